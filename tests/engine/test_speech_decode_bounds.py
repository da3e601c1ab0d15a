"""What decoding a recording may cost (engine/speech/audio.py): a small file that declares a long
sound (a FLAC of ten minutes' silence is 112 KB) is decoded into one float32 array, its peak memory
about the array's own size (before: int16 chunks, their concatenation and two float copies, about three
times it); and decoding stops when its cancel callback says so (a client that hung up)."""

from __future__ import annotations

import tracemalloc

import pytest

from ember_chat.engine.speech import SAMPLE_RATE, DecodingCancelled, decode
from tests.helpers.speech import silent_flac

pytestmark = pytest.mark.slow

SECONDS = 600


def test_a_long_silent_flac_decodes_into_one_array() -> None:
    data = silent_flac(SECONDS)
    assert len(data) < 200_000
    tracemalloc.start()
    try:
        samples = decode(data, "quiet.flac")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert samples.size == SECONDS * SAMPLE_RATE and samples.dtype.name == "float32" and not samples.any()
    # the array (38.4 MB) and its declared-length slack (one second), plus a frame or two in flight
    assert peak <= samples.nbytes + 2 * 1024 * 1024, (peak, samples.nbytes)


def test_decoding_stops_when_cancelled() -> None:
    asked: list[int] = []

    def cancel() -> bool:
        asked.append(1)
        return len(asked) >= 3

    with pytest.raises(DecodingCancelled, match=r"Decoding quiet\.flac was cancelled"):
        decode(silent_flac(SECONDS), "quiet.flac", cancel=cancel)
    assert len(asked) == 3  # (asked while decoding, every few frames, and nothing decoded after it said so)
