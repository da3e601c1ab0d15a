"""A recording attached to a message (a WAV, MP3, M4A, OGG or FLAC file) becomes a document attachment:
its transcript, one line per segment with the time it starts at ("[00:01:05] The meeting is moved…"),
under a first line that says what the text is. From there it is a document like any other (kind
"audio"): whole in the prompt when it fits, else chunked into FTS5 and retrieved, kept under the
transcript's SHA-256 in the content-addressed store (the blob is the transcript: the same recording
attached under another name or transcribed by another model is another text), exported and imported as
its text.

Where it runs: on the caller's worker thread, in Ember's own process, not in the child process other
files are read in (attachments/isolated.py). A Whisper model takes about a second and ~100 MB to load,
which a child per file would pay every time; here one Transcriber is loaded once (`TranscriberSlot`)
and kept. What the child protects against is bounded here by speech/audio.py instead: the file's bytes
(AudioLimits.max_bytes) before it is decoded, its decoded length while it is (a small file declaring
hours of sound stops at max_seconds), and FFmpeg's errors turned into a sentence. There is no time
limit: an hour's recording takes minutes, with its progress shown and its cancel honoured between two
segments."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable
from pathlib import Path, PurePath

from ember_chat.engine.attachments.extract import read_file_bytes
from ember_chat.engine.attachments.kinds import AUDIO_SUFFIXES, AttachmentKind, Extracted, Limits, Progress, shown_name
from ember_chat.engine.speech.audio import DEFAULT_LIMITS, AudioLimits, DecodingCancelled, decode
from ember_chat.engine.speech.audio import _check_size as check_size
from ember_chat.engine.speech.transcriber import Segment, Transcriber, Transcript, TranscriptionCancelled

_MIME = {".wav": "audio/wav", ".mp3": "audio/mpeg", ".m4a": "audio/mp4", ".flac": "audio/flac"}


def is_audio(name: str) -> bool:
    """Whether a file is attached as a recording (told by its name: a file named .wav that is not one
    is then said to be damaged, in audio.py's words, rather than refused as binary text)."""
    return PurePath(name).suffix.lower() in AUDIO_SUFFIXES


def stamp(seconds: float) -> str:
    """A time in the recording as the transcript writes it: 00:01:05 (hours always, for a steady column)."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def transcript_document(name: str, transcript: Transcript) -> str:
    """The text a recording is kept as: a line saying what it is, then "[hh:mm:ss] words" per segment."""
    head = (f"Transcript of {name} ({stamp(transcript.duration_s)} long), recognised by the speech model "
            f"{transcript.model}; [hh:mm:ss] is the time in the recording each line starts at.")  # fmt: skip
    lines = [_line(s) for s in transcript.segments if s.text.strip()]
    return "\n".join([head, *(lines or ["(no speech was recognised)"])])


def _line(segment: Segment) -> str:
    return f"[{stamp(segment.start)}] {' '.join(segment.text.split())}"


class TranscriberSlot:
    """One Transcriber for the recordings attached in a window, loaded on first use and kept (a model
    missing now is looked for again next time: the user may install it meanwhile). Loading is on the
    caller's (worker) thread; two callers at once load it once."""

    def __init__(self, make: Callable[[], Transcriber] = Transcriber) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._transcriber: Transcriber | None = None

    def get(self) -> Transcriber:
        """The transcriber (SpeechModelError with what to do when the model is missing or damaged)."""
        with self._lock:
            if self._transcriber is None:
                self._transcriber = self._make()
            return self._transcriber

    def language(self) -> str | None:
        """The language recordings are spoken in (None: detected); the window's slot says the chosen one."""
        return None


class AudioTranscription:
    """One recording transcribed into a document attachment. `read_path` or `read_bytes` runs on the
    calling (worker) thread; `cancel()` may be called from any thread (TranscriptionCancelled is then
    raised at the next segment, or as soon as decoding or loading ends). `started` turns true when
    the work begins (a chip says "waiting" before); `progress` is told the share of the recording
    transcribed (0..1) as each segment is recognised."""

    def __init__(self, transcriber: TranscriberSlot, limits: AudioLimits = DEFAULT_LIMITS) -> None:
        self.slot = transcriber
        self.limits = limits
        self.started = False
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def read_path(self, path: Path | str, progress: Progress | None = None) -> Extracted:
        """The recording at `path`, read once within the size limit (its digest is of the bytes
        transcribed) and transcribed. AudioFileError or AttachmentError (the file), SpeechModelError
        (the model)."""
        path = Path(path)
        self.started = True
        self._check()
        return self.read_bytes(path.name, _read_bounded(path, self.limits), progress)

    def read_bytes(self, name: str, data: bytes, progress: Progress | None = None) -> Extracted:
        """A recording given as bytes (a paste, an upload), transcribed."""
        self.started = True
        name = shown_name(name)
        try:  # (bounded: size, then length while decoding; a cancel stops the decoding too)
            samples = decode(data, name, self.limits, self._cancel.is_set)
        except DecodingCancelled:
            raise TranscriptionCancelled("The transcription was cancelled.") from None
        self._check()
        transcriber = self.slot.get()
        self._check()
        transcript = transcriber.transcribe(
            samples,
            language=self.slot.language(),
            on_segment=None if progress is None else lambda _s, done: progress(done),
            cancel=self._cancel,
        )
        if progress is not None:
            progress(1.0)
        mime = _MIME.get(PurePath(name).suffix.lower(), "audio/ogg")
        text = transcript_document(name, transcript)
        # the blob holds the transcript, so it is named by the transcript's hash: the recording's would keep
        # the first transcript's text for the same recording attached under another name or with another model
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return Extracted(name, AttachmentKind.AUDIO, mime, len(data), digest, text)

    def _check(self) -> None:
        if self._cancel.is_set():
            raise TranscriptionCancelled("The transcription was cancelled.")


def _read_bounded(path: Path, limits: AudioLimits) -> bytes:
    """A recording's bytes, refused before a byte is read when over the recording's size limit (not the
    attachments' setting: an hour of WAV is 115 MB); a folder, a file gone or unreadable in the words
    every attachment gets (AttachmentError)."""
    with contextlib.suppress(OSError):  # (a file that cannot be looked at: read_file_bytes says why)
        check_size(path.stat().st_size, path.name, limits)
    data = read_file_bytes(path, Limits(max_bytes=limits.max_bytes))
    check_size(len(data), path.name, limits)  # (it grew while it was read)
    return data


__all__ = [
    "AUDIO_SUFFIXES",
    "AudioTranscription",
    "TranscriberSlot",
    "is_audio",
    "stamp",
    "transcript_document",
]
