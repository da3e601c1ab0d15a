"""POST /v1/audio/transcriptions on Ember's server: OpenAI's speech-to-text, on the speech models of
engine/speech (the tiny English Whisper shipped with the starter set; `whisper-1`, the name OpenAI's
clients send, is it too). A multipart/form-data body, as OpenAI takes it:

    file (WAV, MP3, M4A, OGG, FLAC), model, language?, prompt?, temperature?,
    response_format? json (the default) | text | verbose_json | srt | vtt,
    timestamp_granularities[]? segment

    → json: {"text", "usage": {"type": "duration", "seconds"}}; verbose_json: {"task", "language",
      "duration", "text", "segments": [{"id", "seek", "start", "end", "text", "tokens", "temperature",
      "avg_logprob", "compression_ratio", "no_speech_prob"}], "usage"}; text, srt, vtt: text/plain.

The body is read under the server's size limit before this runs, on a handler thread (never the event
loop): the upload is decoded there and transcribed by a model loaded once per server (`SpeechModels`),
one request at a time per model. At most MAX_TRANSCRIBING requests decode and transcribe at once (a
decoded recording is held in memory: 3.8 MB a minute); one more is answered 503 at once (OpenAI's
clients retry it) rather than queued, where waiting uploads would hold their bodies. An upload may be
25 MB (OpenAI's limit; the server's body limit may be lower) and 30 minutes of sound (API_LIMITS): a
small compressed file may declare hours (a FLAC of an hour's silence is 656 KB). A client that hangs up
stops its decoding within a few frames and its transcription between two segments. A file that is not
sound, damaged, truncated, empty or over a limit is a 400 naming what is wrong."""

from __future__ import annotations

import io
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.serve.sink import ClientGone
from ember_chat.engine.speech import (
    AudioFileError,
    AudioLimits,
    DecodingCancelled,
    SpeechModelError,
    Transcriber,
    Transcript,
    TranscriptionCancelled,
    decode,
)
from ember_chat.engine.speech.audio import Samples
from ember_chat.engine.speech.models import ALIASES, DEFAULT_MODEL, KNOWN_MODELS, known

RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
TEXT_FIELDS = ("model", "language", "prompt", "response_format", "temperature", "timestamp_granularities[]")
MAX_PARTS = 32  # the form's parts (OpenAI's clients send a handful)
MAX_FIELD_CHARS = 4096  # a text field (a prompt longer than Whisper's 224 tokens is cut anyway)
# an upload: OpenAI's 25 MB, and half an hour of sound (115 MB of float32 samples while it is heard)
API_LIMITS = AudioLimits(max_bytes=25 * 1024 * 1024, max_seconds=30 * 60.0)
MAX_TRANSCRIBING = 2  # requests decoding or transcribing at once (the models' cores are shared anyway)
BUSY_RETRY_S = 2


@dataclass(frozen=True)
class Reply:
    """A response body and its content type."""

    content_type: str
    body: bytes


@dataclass
class Form:
    """The fields of a multipart body: each text field's values, and the uploaded file."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    file_name: str | None = None
    file: bytes | None = None


class SpeechModels:
    """The speech models a server has loaded, each once (at its first request), shared by its requests."""

    def __init__(self, threads: int | None = None, transcribing: int = MAX_TRANSCRIBING) -> None:
        self._threads = threads
        self._loaded: dict[str, Transcriber] = {}
        self._loading: dict[str, threading.Lock] = {}  # one per model: a load blocks only that model's requests
        self._lock = threading.Lock()  # (guards the two dicts; never held while a model loads)
        self.slots = threading.BoundedSemaphore(transcribing)  # requests decoding or transcribing now

    def loaded(self) -> list[str]:
        """The names of the models loaded (an alias such as whisper-1 under its model's name)."""
        with self._lock:
            return sorted({t.name for t in self._loaded.values()})

    def get(self, name: str) -> Transcriber:
        """The model `name` (an alias such as whisper-1 is its model: whisper-1, tiny and tiny.en are one
        load), loaded at its first request; two first requests at once load it once."""
        model = known(name)
        key = model.name if model is not None else name
        with self._lock:
            transcriber = self._loaded.get(key)
            if transcriber is not None:
                return transcriber
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            with self._lock:
                transcriber = self._loaded.get(key)
            if transcriber is None:
                transcriber = Transcriber(key, self._threads)
                with self._lock:
                    self._loaded[key] = transcriber
            return transcriber


def read_form(raw: bytes | bytearray, content_type: str) -> Form:
    """The multipart body's parts, or a 400 saying what is wrong with it."""
    from python_multipart import FormParser
    from python_multipart.exceptions import FormParserError
    from python_multipart.multipart import parse_options_header

    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data" or not options.get(b"boundary"):
        raise ApiError(400, "Send the audio as multipart/form-data (a `file` part and a `model` field), as OpenAI's "
                       f"clients do; this request's Content-Type is {content_type or 'missing'!r}.")  # fmt: skip
    form, parts = Form(), 0

    def counted() -> None:
        nonlocal parts
        parts += 1  # (refused at once: a body of many tiny parts is not parsed to its end first)
        if parts > MAX_PARTS:
            raise ApiError(400, f"The form has {parts} parts or more; at most {MAX_PARTS}.")

    def on_field(item: object) -> None:
        counted()
        name = _text(getattr(item, "field_name", b""))
        value = getattr(item, "value", None)
        text = _text(value or b"")
        if len(text) > MAX_FIELD_CHARS:
            raise ApiError(400, f"The field {name} is {len(text):,} characters long; at most {MAX_FIELD_CHARS:,}.",
                           param=name)  # fmt: skip
        form.fields.setdefault(name, []).append(text)

    def on_file(item: object) -> None:
        counted()
        name = _text(getattr(item, "field_name", b""))
        if name != "file":
            raise ApiError(400, f"Unexpected file part {name!r}: the audio goes in the part named `file`.", param=name)
        if form.file is not None:
            raise ApiError(400, "Send one audio file per request.", param="file")
        stream = getattr(item, "file_object")  # noqa: B009 (python-multipart's File: untyped here)
        stream.seek(0)
        form.file, form.file_name = stream.read(), _text(getattr(item, "file_name", b"") or b"") or "the audio file"

    # the whole body is in memory already: its file stays there too (no temporary file)
    parser = FormParser("multipart/form-data", on_field, on_file, boundary=options[b"boundary"],
                        config={"MAX_MEMORY_FILE_SIZE": len(raw) + 1})  # fmt: skip
    try:
        parser.write(bytes(raw))
        parser.finalize()
    except FormParserError as exc:
        raise ApiError(400, f"The multipart body cannot be read ({exc}).") from None
    return form


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def transcribe(
    raw: bytes | bytearray,
    content_type: str,
    models: SpeechModels,
    cancelled: Callable[[], bool],
    allow_unknown: bool = False,
    advice: str = "",
) -> tuple[str, Reply]:
    """Answer one transcription request: (the model's name, the response), or an ApiError."""
    form = read_form(raw, content_type)
    if "file" in form.fields:  # (a part without a filename is a text field to the parser)
        raise ApiError(400, "file must be a file upload (a part with a filename), not a text field.", param="file")
    unknown = sorted(set(form.fields) - set(TEXT_FIELDS) - {"timestamp_granularities"})
    if unknown and not allow_unknown:
        raise ApiError(400, f"Unknown fields: {', '.join(unknown)}. {advice}".strip(), param=unknown[0])
    if form.file is None:
        raise ApiError(400, "The request has no `file` part: send the recording as a file upload.", param="file")
    name = _one(form, "model") or DEFAULT_MODEL
    fmt = _one(form, "response_format") or "json"
    if fmt not in RESPONSE_FORMATS:
        raise ApiError(400, f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, not {fmt!r}.",
                       param="response_format")  # fmt: skip
    granularities = form.fields.get("timestamp_granularities[]", []) + form.fields.get("timestamp_granularities", [])
    if any(g != "segment" for g in granularities):
        raise ApiError(400, "timestamp_granularities: Ember gives segment timestamps only (not word).",
                       param="timestamp_granularities[]")  # fmt: skip
    temperature = _temperature(_one(form, "temperature"))
    if not models.slots.acquire(blocking=False):
        busy = f"The server is transcribing {MAX_TRANSCRIBING} recordings already; try again in a moment."
        raise ApiError(503, busy, "server_error", code="server_busy", headers={"Retry-After": str(BUSY_RETRY_S)})
    try:
        transcriber = _model(models, name)  # (first: a server without the speech runtime says so, as a 503)
        samples = _decoded(form, cancelled)
        form.file = None  # (the upload's bytes are not needed while it is heard)
        transcript = transcriber.transcribe(samples, language=_one(form, "language"), prompt=_one(form, "prompt"),
                                            temperature=temperature, cancel=cancelled)  # fmt: skip
    except InvalidParameter as exc:
        raise ApiError(400, str(exc), param="language") from None
    except (TranscriptionCancelled, DecodingCancelled):
        raise ClientGone from None  # (its client hung up, or the server is stopping: nobody to answer)
    finally:
        models.slots.release()
    return transcriber.name, render(transcript, fmt)


def _one(form: Form, name: str) -> str | None:
    values = form.fields.get(name)
    if values is None:
        return None
    if len(values) > 1:
        raise ApiError(400, f"The field {name} is given {len(values)} times; give it once.", param=name)
    return values[0].strip() or None


def _temperature(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not 0.0 <= number <= 1.0:  # (NaN fails this too)
        raise ApiError(400, f"temperature must be a number from 0 to 1, not {value!r}.", param="temperature")
    return number


def _decoded(form: Form, cancelled: Callable[[], bool]) -> Samples:
    assert form.file is not None
    try:
        return decode(form.file, form.file_name, API_LIMITS, cancelled)
    except AudioFileError as exc:
        raise ApiError(400, str(exc), param="file", code="invalid_audio") from None


def _model(models: SpeechModels, name: str) -> Transcriber:
    if known(name) is None:
        names = ", ".join([m.name for m in KNOWN_MODELS if m.shipped] + list(ALIASES))
        raise ApiError(404, f"The speech model {name!r} does not exist here; this server transcribes with {names}.",
                       param="model", code="model_not_found")  # fmt: skip
    try:
        return models.get(name)
    except SpeechModelError as exc:
        raise ApiError(503, str(exc), "server_error", param="model", code="model_not_loaded") from None


def render(transcript: Transcript, fmt: str) -> Reply:
    """The transcript in a response_format."""
    usage = {"type": "duration", "seconds": math.ceil(transcript.duration_s)}
    if fmt == "text":
        return Reply("text/plain; charset=utf-8", (transcript.text + "\n").encode())
    if fmt in ("srt", "vtt"):
        return Reply("text/plain; charset=utf-8", subtitles(transcript, fmt).encode())
    body: dict[str, object] = {"text": transcript.text, "usage": usage}
    if fmt == "verbose_json":
        segments = [
            {
                "id": s.id,
                "seek": s.seek,
                "start": s.start,
                "end": s.end,
                "text": s.text,
                "tokens": list(s.tokens),
                "temperature": s.temperature,
                "avg_logprob": s.avg_logprob,
                "compression_ratio": s.compression_ratio,
                "no_speech_prob": s.no_speech_prob,
            }
            for s in transcript.segments
        ]
        body = {"task": "transcribe", "language": transcript.language, "duration": round(transcript.duration_s, 3),
                "text": transcript.text, "segments": segments, "usage": usage}  # fmt: skip
    return Reply("application/json", json.dumps(body, ensure_ascii=False).encode())


def subtitles(transcript: Transcript, fmt: str) -> str:
    """SubRip (srt) or WebVTT (vtt) cues, one per segment."""
    out = io.StringIO()
    if fmt == "vtt":
        out.write("WEBVTT\n\n")
    for n, s in enumerate(transcript.segments, 1):
        if fmt == "srt":
            out.write(f"{n}\n")
        out.write(f"{_stamp(s.start, fmt)} --> {_stamp(s.end, fmt)}\n{s.text.strip()}\n\n")
    return out.getvalue()


def _stamp(seconds: float, fmt: str) -> str:
    ms = round(seconds * 1000)
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{',' if fmt == 'srt' else '.'}{ms:03d}"
