"""Speech made at test time: known sentences spoken by espeak-ng (Debian's; .ci/run installs it) into
a WAV, and the WAV re-encoded by PyAV into the other containers Ember reads (MP3, M4A, OGG, FLAC)."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import av
import numpy as np

# clear sentences of everyday words (espeak-ng's voice is robotic: unusual names would measure it, not Ember)
SENTENCES = (
    "Please send the weekly report to the office before noon.",
    "The meeting is moved to Thursday afternoon at three o'clock.",
    "I would like a cup of coffee with milk and no sugar.",
    "The train to the city leaves from platform number four.",
    "We should buy bread, eggs and apples at the market today.",
    "Open the window because the room is too warm.",
)
TEXT = " ".join(SENTENCES)  # (the sentences as one recording says them)
VOICE = "en-us"
# container → (PyAV's codec, the file's extension, its sample format)
ENCODINGS = {
    "mp3": ("libmp3lame", "mp3", "s16p"),
    "m4a": ("aac", "m4a", "fltp"),
    "ogg": ("libopus", "ogg", "s16"),
    "flac": ("flac", "flac", "s16"),
}


def espeak() -> str:
    found = shutil.which("espeak-ng")
    assert found, "espeak-ng is missing: apt-get install espeak-ng (.ci/run installs it)"
    return found


def speak(text: str, path: Path, words_per_minute: int = 150) -> Path:
    """`text` spoken into the WAV `path` (22050 Hz mono 16-bit, espeak-ng's own)."""
    subprocess.run([espeak(), "-v", VOICE, "-s", str(words_per_minute), "-w", str(path), text], check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    return path


def speak_for(seconds: float, path: Path) -> tuple[Path, str]:
    """At least `seconds` of speech: the sentences over and over, (the WAV, what it says)."""
    per_sentence = 3.2  # (about, at 150 words a minute)
    count = max(1, round(seconds / per_sentence))
    text = " ".join(SENTENCES[i % len(SENTENCES)] for i in range(count))
    return speak(text, path), text


def convert(wav: Path, container: str) -> Path:
    """The WAV re-encoded by PyAV into `container` (mp3, m4a, ogg, flac), beside it."""
    codec, ext, fmt = ENCODINGS[container]
    out = wav.with_suffix("." + ext)
    with av.open(str(wav)) as source, av.open(str(out), "w") as target:
        rate = 48_000 if codec == "libopus" else source.streams.audio[0].rate  # (Opus takes 48 kHz)
        stream = target.add_stream(codec, rate=rate, layout="mono")
        resampler = av.AudioResampler(format=fmt, layout="mono", rate=rate)
        for frame in source.decode(audio=0):
            for converted in resampler.resample(frame):
                for packet in stream.encode(converted):
                    target.mux(packet)
        for converted in resampler.resample(None):
            for packet in stream.encode(converted):
                target.mux(packet)
        for packet in stream.encode(None):
            target.mux(packet)
    return out


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * 16_000), dtype=np.float32)


def silent_flac(seconds: int) -> bytes:
    """A FLAC of `seconds` of digital silence, 16 kHz mono: tiny (an hour is 656 KB), and it declares
    its whole length (the decoded samples of a small upload can be hundreds of MB)."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="flac") as target:
        stream = target.add_stream("flac", rate=16_000, layout="mono")
        step = 16_000 * 10
        zeros = np.zeros((1, step), np.int16)
        for n in range(seconds // 10):
            frame = av.AudioFrame.from_ndarray(zeros, format="s16", layout="mono")
            frame.sample_rate, frame.pts = 16_000, n * step
            for packet in stream.encode(frame):
                target.mux(packet)
        for packet in stream.encode(None):
            target.mux(packet)
    return buffer.getvalue()
