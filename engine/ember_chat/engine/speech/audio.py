"""A sound file decoded to what Whisper hears: 16 kHz mono float32 samples in [-1, 1].

PyAV (FFmpeg; faster-whisper's own decoder) reads WAV, MP3, M4A/AAC, OGG (Vorbis, Opus) and FLAC. The
loop is faster-whisper's `decode_audio`, written out so that a file is bounded while it is read (its
bytes before, its decoded length during: a small file may declare hours of sound) and so that a damaged
or truncated file is an error rather than the part that could be read passed off as the whole."""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from ember_chat.engine.errors import EmberError

SAMPLE_RATE = 16_000  # what Whisper's feature extractor takes
FORMATS = "WAV, MP3, M4A, OGG or FLAC"
# a file that decodes to less than this share of the length its header declares was cut short (MP3's
# declared length is an estimate from its bit rate: hence the slack)
TRUNCATED_SHARE = 0.9
TRUNCATED_SLACK_S = 1.0
# the samples are decoded into one float32 array: sized by the declared length where there is one, else
# started at this many seconds and grown by half each time it fills (never past the limit)
FIRST_CAPACITY_S = 60.0
GROWTH = 1.5
CANCEL_EVERY = 16  # resampled frames between two looks at the cancel callback (one is a few ms of sound)

Samples = npt.NDArray[np.float32]


class AudioFileError(EmberError):
    """A sound file cannot be transcribed (empty, damaged, truncated, not sound, over the limits)."""


class DecodingCancelled(EmberError):
    """Decoding stopped because its cancel callback said so (a client hung up, the user cancelled)."""


@dataclass(frozen=True)
class AudioLimits:
    """What one file may be: its size (OpenAI's API takes 25 MB; an hour of 16-bit WAV at 16 kHz is
    115 MB) and its sound's length (its samples are held in memory: 4 bytes each, 230 MB an hour)."""

    max_bytes: int = 200 * 1024 * 1024
    max_seconds: float = 3 * 3600.0


DEFAULT_LIMITS = AudioLimits()


def decode(
    source: Path | str | bytes | bytearray,
    name: str | None = None,
    limits: AudioLimits = DEFAULT_LIMITS,
    cancel: Callable[[], bool] | None = None,
) -> Samples:
    """The file's sound as 16 kHz mono float32 samples. `source`: a path, or the file's bytes (an API
    upload); `name`: how errors name it (the path's name by default). AudioFileError when it cannot be;
    DecodingCancelled once `cancel` returns True (asked every few frames while decoding)."""
    if isinstance(source, (bytes, bytearray)):
        label = name or "the audio file"
        size = len(source)
        _check_size(size, label, limits)
        return _decode(io.BytesIO(source), size, label, limits, cancel)
    path = Path(source)
    label = name or path.name
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise AudioFileError(f"{label}: no such file.") from None
    except OSError as exc:
        raise AudioFileError(f"{label} cannot be read ({exc.strerror or exc}).") from None
    if not path.is_file():
        raise AudioFileError(f"{label} is not a file.")
    _check_size(size, label, limits)
    try:
        with path.open("rb") as file:
            return _decode(file, size, label, limits, cancel)
    except OSError as exc:
        raise AudioFileError(f"{label} cannot be read ({exc.strerror or exc}).") from None


def _check_size(size: int, label: str, limits: AudioLimits) -> None:
    if size == 0:
        raise AudioFileError(f"{label} is empty (0 bytes): there is no sound to transcribe.")
    if size > limits.max_bytes:
        raise AudioFileError(f"{label} is {_mb(size)}, over the limit of {_mb(limits.max_bytes)} for a recording. "
                             "Split it, or convert it to a compressed format (MP3, M4A, OGG).")  # fmt: skip


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):,.1f} MB"


def _too_long(label: str, seconds: float, limits: AudioLimits) -> AudioFileError:
    limit = _duration(limits.max_seconds)
    return AudioFileError(
        f"{label} holds {_duration(seconds)} of sound, over the limit of {limit} for one recording. Split it."
    )


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def wav_shortfall(head: bytes, size: int) -> tuple[int, int] | None:
    """(bytes its header declares, bytes present) of a WAV file's sound cut short, else None. FFmpeg
    trims a WAV's length to the file's, so a truncated WAV would be read as a whole shorter one.
    `head`: the file's first bytes (its chunks before the sound); `size`: the file's."""
    if len(head) < 12 or head[:4] not in (b"RIFF", b"RIFX") or head[8:12] != b"WAVE":
        return None
    order = "little" if head[:4] == b"RIFF" else "big"
    pos = 12
    while pos + 8 <= len(head):
        chunk, length = head[pos : pos + 4], int.from_bytes(head[pos + 4 : pos + 8], order)
        if chunk == b"data":
            present = size - pos - 8
            # (0 and 0xFFFFFFFF: a recorder that streamed it and never wrote the length back)
            return (length, present) if 0 < length < 0xFFFFFFFF and present < length else None
        pos += 8 + length + (length & 1)
    return None


def _decode(file: BinaryIO, size: int, label: str, limits: AudioLimits, cancel: Callable[[], bool] | None) -> Samples:
    try:
        import av  # PyAV: faster-whisper's dependency (FFmpeg's libraries in its wheel)
    except ImportError:
        from ember_chat.engine.speech.models import RUNTIME_MISSING

        raise AudioFileError(RUNTIME_MISSING) from None

    head = file.read(4096)
    file.seek(0)
    short = wav_shortfall(head, size)
    if short is not None:
        raise AudioFileError(f"{label} is truncated: its header declares {short[0]:,} bytes of sound, the file "
                             f"holds {short[1]:,}. Copy or record it again.")  # fmt: skip

    max_samples = math.ceil(limits.max_seconds * SAMPLE_RATE)
    try:
        container = av.open(file, mode="r", metadata_errors="ignore")
    except av.FFmpegError as exc:
        raise AudioFileError(f"{label} is not a sound file Ember can read ({_reason(exc)}). Give a {FORMATS} file."
                             ) from None  # fmt: skip
    got = bad_packets = frames_seen = 0
    with container:
        if not container.streams.audio:
            raise AudioFileError(f"{label} has no sound track (a {container.format.name} file without audio).")
        stream = container.streams.audio[0]
        declared = container.duration / av.time_base if container.duration else None
        if declared is not None and declared > limits.max_seconds:
            raise _too_long(label, declared, limits)
        # One float32 array, filled in place: no list of chunks, concatenated copy and float copies (an
        # hour's int16 chunks, their concatenation and two float copies peaked at 12 bytes a sample).
        first_s = declared + TRUNCATED_SLACK_S if declared is not None else FIRST_CAPACITY_S
        samples: Samples = np.empty(min(max_samples, math.ceil(first_s * SAMPLE_RATE)), dtype=np.float32)
        resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
        try:
            for packet in container.demux(stream):
                try:
                    frames = packet.decode()
                except av.error.InvalidDataError:
                    bad_packets += 1  # (a damaged frame: counted, and the file judged by what is left)
                    continue
                for frame in [*frames, None] if packet.size == 0 else frames:  # (an empty packet: the flush)
                    for out in resampler.resample(frame):
                        frames_seen += 1
                        if cancel is not None and frames_seen % CANCEL_EVERY == 0 and cancel():
                            raise DecodingCancelled(f"Decoding {label} was cancelled.")
                        array = out.to_ndarray().reshape(-1)
                        end = got + array.size
                        if end > max_samples:
                            raise _too_long(label, end / SAMPLE_RATE, limits)
                        if end > samples.size:
                            samples = _grown(samples, got, end, max_samples)
                        np.multiply(array, 1.0 / 32768.0, out=samples[got:end], casting="unsafe")
                        got = end
        except av.FFmpegError as exc:
            raise AudioFileError(f"{label} is damaged: reading stopped after {_duration(got / SAMPLE_RATE)} "
                                 f"({_reason(exc)}).") from None  # fmt: skip
    if got == 0:
        what = f"{bad_packets} damaged frames" if bad_packets else "no sound frames"
        raise AudioFileError(f"{label} holds no sound that can be decoded ({what}). Is it damaged or truncated?")
    heard = got / SAMPLE_RATE
    if declared is not None and heard < declared * TRUNCATED_SHARE - TRUNCATED_SLACK_S:
        raise AudioFileError(f"{label} is truncated or damaged: it declares {declared:.1f} s of sound, but only "
                             f"{heard:.1f} s could be read. Copy or record it again.")  # fmt: skip
    if got < samples.size:
        samples.resize(got, refcheck=False)  # (in place: the unused tail given back, no copy kept)
    return samples


def _grown(samples: Samples, got: int, needed: int, max_samples: int) -> Samples:
    """A larger array holding the first `got` samples (a file whose length was not declared, or was
    declared short): by half again, at least `needed`, at most `max_samples`."""
    bigger = np.empty(min(max_samples, max(needed, math.ceil(samples.size * GROWTH))), dtype=np.float32)
    bigger[:got] = samples[:got]
    return bigger


def _reason(exc: Exception) -> str:
    """FFmpeg's reason without its error number and the file name it was given (a BytesIO's repr)."""
    text = getattr(exc, "strerror", None) or str(exc)
    return str(text).rstrip(".")
