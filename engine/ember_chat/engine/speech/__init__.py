"""Speech-to-text on this machine (faster-whisper over CTranslate2), without Qt.

- `models`: the Whisper models Ember knows (the tiny English one shipped in the starter set, Hub ones
  downloaded into the models folder) and where a model's files are; a missing or damaged one is a
  SpeechModelError.
- `downloads`: a Hub model's files downloaded through the Model Manager's downloader, its speed here.
- `audio`: a sound file (WAV, MP3, M4A, OGG, FLAC) decoded to 16 kHz mono float32, under a size limit;
  an unreadable one is an AudioFileError naming the file; a cancel asked while decoding.
- `transcriber`: a Transcriber (the model loaded once) for whole files, with progress and cancel, and
  a Dictation that transcribes a growing microphone buffer for partial words.
- `wer`: word error rate, for tests and benchmarks.

faster-whisper (and its CTranslate2, PyAV, tokenizers) is imported when a model is loaded or a file
decoded, not when this package is imported."""

from __future__ import annotations

from ember_chat.engine.speech.audio import SAMPLE_RATE, AudioFileError, AudioLimits, DecodingCancelled, decode
from ember_chat.engine.speech.models import DEFAULT_MODEL, KNOWN_MODELS, SpeechModel, SpeechModelError, locate
from ember_chat.engine.speech.transcriber import (
    Dictation,
    Partial,
    Segment,
    Transcriber,
    Transcript,
    TranscriptionCancelled,
)

__all__ = [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "SAMPLE_RATE",
    "AudioFileError",
    "AudioLimits",
    "DecodingCancelled",
    "Dictation",
    "Partial",
    "Segment",
    "SpeechModel",
    "SpeechModelError",
    "Transcriber",
    "Transcript",
    "TranscriptionCancelled",
    "decode",
    "locate",
]
