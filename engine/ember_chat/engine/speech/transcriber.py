"""Speech to text with faster-whisper: a Transcriber holds one loaded model and transcribes whole
recordings (segments with times, progress, cancel) and, through a Dictation, a microphone's growing
buffer (partial words while the user speaks).

Whisper reads 30-second windows; faster-whisper walks a recording window by window and yields each
segment as it is decoded, so progress is told and a cancel is honoured between two segments. A long
recording is also cut into chunks of CHUNK_S (at its quietest moment near each cut, so no word is cut
in two): the log-mel features of a whole hour would take hundreds of MB at once.

None of this may run on a GUI thread: loading takes about a second, a pass over ten seconds of speech
a few hundred milliseconds on two cores."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ember_chat.engine.errors import EmberError, InvalidParameter
from ember_chat.engine.speech.audio import SAMPLE_RATE, Samples, decode
from ember_chat.engine.speech.models import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    RUNTIME_MISSING,
    STARTER_ADVICE,
    VAD_MISSING,
    SpeechModelError,
    default_models_dir,
    known,
    locate,
)

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

CHUNK_S = 600.0  # a recording longer than this is transcribed in chunks of about this length
CUT_SEARCH_S = 5.0  # a chunk ends at the quietest 0.1 s of its last CUT_SEARCH_S
BEAM_SIZE = 5  # files: faster-whisper's default (more accurate than greedy, about twice its time)
DICTATION_BEAM_SIZE = 1  # partial words: greedy, for the latency
PROMPT_CHARS = 200  # the text before a chunk, given as its prompt (Whisper's context: its style, its names)
# Dictation's speech gate: a 0.1 s window is speech when louder (RMS) than both of these; a quiet room
# is about 0.001-0.005, quiet speech into a laptop's microphone 0.02 and more.
SPEECH_MIN_RMS = 0.01
SPEECH_NOISE_RATIO = 3.0  # ... and this many times the quietest window heard (the room's floor)
# Whisper's own rule for a segment that is not speech (its reference decoder's thresholds): both at once
NO_SPEECH_PROB = 0.6
NO_SPEECH_LOGPROB = -1.0

# Told of each segment as it is recognised, with the share of the recording done (0..1).
SegmentListener = Callable[["Segment", float], None]


class TranscriptionCancelled(EmberError):
    """The transcription was cancelled (its cancel event set) before it finished."""


@dataclass(frozen=True)
class Segment:
    """A stretch of speech: its times in seconds from the recording's start, and Whisper's figures
    for it (the fields of OpenAI's verbose_json segments)."""

    id: int
    start: float
    end: float
    text: str
    seek: int = 0
    tokens: tuple[int, ...] = ()
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0


@dataclass(frozen=True)
class Transcript:
    """What a recording said, and how fast it was heard. `real_time_factor`: processing time over the
    sound's length (0.1: ten seconds transcribed in one). `first_segment_s`: from the start to the first
    segment (None: no speech)."""

    text: str
    segments: tuple[Segment, ...]
    language: str
    language_probability: float
    duration_s: float
    processing_s: float
    first_segment_s: float | None
    threads: int
    model: str

    @property
    def real_time_factor(self) -> float:
        return self.processing_s / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def words_per_s(self) -> float:
        return len(self.text.split()) / self.processing_s if self.processing_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `ember-chat transcribe --json`."""
        return {
            "text": self.text,
            "segments": [{"start": round(s.start, 2), "end": round(s.end, 2), "text": s.text} for s in self.segments],
            "language": self.language,
            "duration_s": round(self.duration_s, 3),
            "processing_s": round(self.processing_s, 3),
            "real_time_factor": round(self.real_time_factor, 4),
            "first_segment_s": None if self.first_segment_s is None else round(self.first_segment_s, 3),
            "words_per_s": round(self.words_per_s, 2),
            "model": self.model,
            "threads": self.threads,
        }


def default_threads() -> int:
    """CPU threads for a model: the cores this process may use (CTranslate2's own default is 4)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, 8))


class Transcriber:
    """One speech model, loaded once (SpeechModelError when it is missing or damaged). Its methods block
    for the length of the work: call them from a worker thread. One transcription runs at a time on one
    Transcriber (others wait for it): CTranslate2 would share the same cores anyway."""

    def __init__(self, model: str = DEFAULT_MODEL, threads: int | None = None, models_dir: Path | None = None) -> None:
        """`models_dir`: where downloaded Hub models are (default: the settings' models folder)."""
        folder = locate(model, models_dir)
        self.name = _display_name(model, folder)
        self._models_dir = models_dir
        self._speed_known = known(model) is None  # (a folder named by its path: no speed kept for it)
        self.threads = threads or default_threads()
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            raise SpeechModelError(RUNTIME_MISSING) from None
        try:
            # int8 on the CPU: a quarter of float32's memory, and its fastest kernels
            self._model: WhisperModel = WhisperModel(str(folder), device="cpu", compute_type="int8",
                                                     cpu_threads=self.threads)  # fmt: skip
        except (RuntimeError, ValueError, OSError) as exc:
            advice = STARTER_ADVICE if self.name == DEFAULT_MODEL else "Download the model again."
            raise SpeechModelError(f"The speech model {self.name} cannot be loaded: it is damaged or not a "
                                   f"CTranslate2 Whisper model ({exc}). {advice}") from None  # fmt: skip
        self._lock = threading.Lock()

    @property
    def languages(self) -> tuple[str, ...]:
        """The language codes the model understands (("en",) for an English-only one)."""
        return tuple(self._model.supported_languages)

    def check_language(self, language: str | None) -> str | None:
        """The language to transcribe in (None: detect it), or InvalidParameter naming what to do."""
        if language in (None, "", "auto"):
            return "en" if self.languages == ("en",) else None
        code = language.strip().lower()
        if code in self.languages:
            return code
        if self.languages == ("en",):
            multilingual = ", ".join(m.name for m in KNOWN_MODELS if not m.english_only)
            raise InvalidParameter(f"The speech model {self.name} understands English only, not {language!r}: "
                                   f"choose a multilingual model ({multilingual}) or the language 'auto'.")  # fmt: skip
        raise InvalidParameter(f"{language!r} is not a language code Whisper knows (such as en, fr, de, es, ja); "
                               "or give 'auto' to detect it.")  # fmt: skip

    def transcribe(
        self,
        audio: Samples | Path | str,
        *,
        language: str | None = None,
        vad: bool = False,
        prompt: str | None = None,
        on_segment: SegmentListener | None = None,
        cancel: threading.Event | Callable[[], bool] | None = None,
        temperature: float | None = None,
        beam_size: int = BEAM_SIZE,
        chunk_s: float = CHUNK_S,
        condition_on_previous: bool = True,
    ) -> Transcript:
        """A whole recording: samples (16 kHz mono float32) or a file's path (decoded first). `language`:
        a code, or None/"auto" to detect it; `vad`: silence trimmed before recognition (Silero VAD);
        `prompt`: words it should expect (names, spelling); `on_segment`: told of each segment as it is
        recognised; `cancel`: checked between segments (TranscriptionCancelled once it is set);
        `condition_on_previous`: each 30-second window reads the text before it (False: a window's
        mistake, a repeated phrase in noise, cannot carry into the next)."""
        lang = self.check_language(language)
        if vad and importlib.util.find_spec("onnxruntime") is None:  # (faster-whisper would fail mid-way)
            raise SpeechModelError(VAD_MISSING)
        samples = decode(audio) if isinstance(audio, (Path, str)) else np.asarray(audio, dtype=np.float32)
        cancelled = cancel.is_set if isinstance(cancel, threading.Event) else cancel
        duration = samples.size / SAMPLE_RATE
        with self._lock:
            started = time.perf_counter()
            segments: list[Segment] = []
            first: float | None = None
            detected, probability = lang or "en", 1.0
            context = prompt or ""
            for offset, chunk in _chunks(samples, chunk_s):
                found, info = self._model.transcribe(
                    chunk,
                    language=lang,
                    beam_size=beam_size,
                    vad_filter=vad,
                    initial_prompt=context[-PROMPT_CHARS:] or None,
                    condition_on_previous_text=condition_on_previous,
                    **({} if temperature is None else {"temperature": temperature}),
                )
                if lang is None:  # (detected on the first chunk: the same for the rest)
                    lang = detected = info.language
                    probability = info.language_probability
                while True:
                    if cancelled is not None and cancelled():
                        raise TranscriptionCancelled("The transcription was cancelled.")
                    item = next(found, None)
                    if item is None:
                        break
                    segment = _segment(item, len(segments), offset)
                    segments.append(segment)
                    first = time.perf_counter() - started if first is None else first
                    if on_segment is not None:
                        on_segment(segment, min(1.0, segment.end / duration) if duration else 1.0)
                    context += item.text
            processing = time.perf_counter() - started
        text = "".join(s.text for s in segments).strip()
        transcript = Transcript(text, tuple(segments), detected, probability, duration, processing, first,
                                self.threads, self.name)  # fmt: skip
        if not self._speed_known and beam_size == BEAM_SIZE:
            self._record_speed(transcript)
        return transcript

    def _record_speed(self, transcript: Transcript) -> None:
        """The model's speed on this machine, stored the first time a long enough file is transcribed
        (the Model Manager shows it); dictation's greedy passes are not a file's speed."""
        from ember_chat.engine.speech.downloads import MEASURE_MIN_S, record_speed

        if transcript.duration_s < MEASURE_MIN_S:
            return
        self._speed_known = True
        models_dir = self._models_dir if self._models_dir is not None else default_models_dir()
        record_speed(models_dir, self.name, transcript.real_time_factor, transcript.duration_s, self.threads)

    def dictation(self, language: str | None = None) -> Dictation:
        """A dictation on this model: see Dictation."""
        return Dictation(self, language)


def _display_name(model: str, folder: Path) -> str:
    from ember_chat.engine.speech.models import known

    entry = known(model)
    return entry.name if entry is not None else folder.name


def _segment(item: Any, index: int, offset: float) -> Segment:
    """faster-whisper's segment (times from its chunk's start) as Ember's (from the recording's)."""
    return Segment(
        id=index,
        start=round(item.start + offset, 3),
        end=round(item.end + offset, 3),
        text=item.text,
        seek=int(item.seek),
        tokens=tuple(item.tokens),
        temperature=float(item.temperature or 0.0),
        avg_logprob=float(item.avg_logprob),
        compression_ratio=float(item.compression_ratio),
        no_speech_prob=float(item.no_speech_prob),
    )


def window_rms(samples: Samples, window: int = SAMPLE_RATE // 10) -> np.ndarray:
    """The loudness (RMS) of each `window` samples (the last, partial window included)."""
    if samples.size == 0:
        return np.zeros(0)
    squares = np.square(samples, dtype=np.float64)
    starts = np.arange(0, samples.size, window)
    counts = np.diff(np.append(starts, samples.size))
    return np.sqrt(np.add.reduceat(squares, starts) / counts)


def _is_speech(segment: Segment) -> bool:
    return not (segment.no_speech_prob > NO_SPEECH_PROB and segment.avg_logprob < NO_SPEECH_LOGPROB)


def _chunks(samples: Samples, chunk_s: float) -> list[tuple[float, Samples]]:
    """(offset in seconds, samples) of each chunk: one for a recording up to `chunk_s`, else cut at the
    quietest 0.1 s in the last CUT_SEARCH_S before each `chunk_s` (views: nothing copied)."""
    size, step = samples.size, int(chunk_s * SAMPLE_RATE)
    if size <= step:
        return [(0.0, samples)]
    window, search = SAMPLE_RATE // 10, int(CUT_SEARCH_S * SAMPLE_RATE)
    chunks, start = [], 0
    while size - start > step:
        lo = start + step - search
        area = samples[lo : start + step]
        energy = np.add.reduceat(area * area, np.arange(0, area.size, window))
        cut = lo + int(np.argmin(energy)) * window + window // 2
        chunks.append((start / SAMPLE_RATE, samples[start:cut]))
        start = cut
    chunks.append((start / SAMPLE_RATE, samples[start:]))
    return chunks


@dataclass(frozen=True)
class Partial:
    """A dictation's words so far: `settled` will not change any more; `tentative` (the last second or
    so of speech) may, at the next update. A UI shows both, the tentative part marked."""

    settled: str
    tentative: str
    heard_s: float  # sound fed so far
    processing_s: float  # this update's recognition time
    read_s: float = 0.0  # the sound this update recognised (the unsettled part): its real-time factor's length

    @property
    def text(self) -> str:
        return " ".join(part for part in (self.settled, self.tentative) if part)


@dataclass
class Dictation:
    """Words as they are spoken. The microphone's thread calls `feed` with each buffer of samples
    (16 kHz mono float32, any size); one worker thread calls `update` as often as it can (each returns
    the words so far, recognising only the sound not yet settled), and `finish` when the user stops.

    A segment that ended STABLE_BEHIND_S before the end of what was heard is settled: its words are kept
    and its sound dropped, so each update reads at most MAX_PENDING_S of sound whatever the
    dictation's length, with the settled words as Whisper's prompt (context across the cut). Updates
    decode greedily (latency); `finish` with a file's beam search, so the unsettled rest ends as accurate
    as a file's transcript.

    Silence and room noise are never read: Whisper, given sound without speech, invents words ("Thank
    you.", rows of dots) and the buffer would grow without end. Before a pass, the sound up to LEAD_IN_S
    before the first speech-loud window (SPEECH_MIN_RMS, SPEECH_NOISE_RATIO) is dropped unread; a pass
    that finds no words keeps only its last NO_WORDS_KEEP_S; segments Whisper itself rates as no speech
    are left out."""

    transcriber: Transcriber
    language: str | None = None
    STABLE_BEHIND_S = 2.0
    MAX_PENDING_S = 20.0  # within Whisper's 30-second window
    LEAD_IN_S = 1.0  # kept before the first loud window: a word's soft start
    NO_WORDS_KEEP_S = 3.0  # a pass without words keeps this much (a word may be under way at its end)
    _pending: list[Samples] = field(default_factory=list)
    _settled: list[str] = field(default_factory=list)
    _settled_s: float = 0.0  # sound already settled (dropped from the buffer)
    _floor: float = float("inf")  # the quietest 0.1 s heard: the room's noise
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.language = self.transcriber.check_language(self.language)

    def feed(self, samples: Samples) -> None:
        """More sound from the microphone (any thread; cheap)."""
        with self._lock:
            self._pending.append(np.asarray(samples, dtype=np.float32).reshape(-1))

    def heard_s(self) -> float:
        with self._lock:
            return self._settled_s + sum(p.size for p in self._pending) / SAMPLE_RATE

    def update(self) -> Partial:
        """Recognise what is not settled yet; the words so far (a worker thread: it takes a pass of the model)."""
        return self._pass(final=False)

    def finish(self) -> Partial:
        """The last pass, everything settled: the dictation's text."""
        return self._pass(final=True)

    def _pass(self, final: bool) -> Partial:
        with self._lock:
            buffer = np.concatenate(self._pending) if self._pending else np.zeros(0, np.float32)
            self._pending = [buffer]
            prompt = " ".join(self._settled)
        buffer, loud = self._drop_silence(buffer, final)
        pending_s = buffer.size / SAMPLE_RATE
        if not loud or buffer.size < SAMPLE_RATE // 4:  # (no speech, or under a quarter second: nothing to hear)
            return Partial(prompt, "", self._settled_s + pending_s, 0.0)
        # The final pass decodes as a file does (beam search): greedy, a sentence's first words with no
        # text before them went wrong and stayed ("I will die kakapan coffee" for "I would like a cup
        # and coffee", which the beam hears right); it reads only what is not settled, once.
        beam = BEAM_SIZE if final else DICTATION_BEAM_SIZE
        result = self.transcriber.transcribe(buffer, language=self.language, prompt=prompt or None,
                                             beam_size=beam, condition_on_previous=False)  # fmt: skip
        segments = [s for s in result.segments if _is_speech(s)]
        if final:
            keep = len(segments)
        else:
            keep = sum(1 for s in segments[:-1] if s.end <= pending_s - self.STABLE_BEHIND_S)
            if keep == 0 and pending_s > self.MAX_PENDING_S and len(segments) > 1:
                keep = len(segments) - 1  # (a long breathless stretch: settle all but its last segment)
        cut_s = segments[keep - 1].end if keep else 0.0
        if not final and not segments:  # (noise loud enough to pass the gate, or a word under way)
            cut_s = max(0.0, pending_s - self.NO_WORDS_KEEP_S)
        if not final and pending_s - cut_s > self.MAX_PENDING_S:  # (never more than the cap to read next)
            keep = len(segments)
            cut_s = max(segments[-1].end if segments else 0.0, pending_s - self.MAX_PENDING_S)
        with self._lock:
            self._settled += [s.text.strip() for s in segments[:keep] if s.text.strip()]
            if cut_s > 0:
                cut = min(int(cut_s * SAMPLE_RATE), buffer.size)
                rest = self._pending[1:]  # (fed while this pass ran)
                self._pending = [buffer[cut:], *rest]
                self._settled_s += cut / SAMPLE_RATE
            settled = " ".join(self._settled)
        tentative = "".join(s.text for s in segments[keep:]).strip()
        return Partial(settled, tentative, self._settled_s + pending_s - cut_s, result.processing_s, pending_s)

    def _drop_silence(self, buffer: Samples, final: bool) -> tuple[Samples, bool]:
        """`buffer` (the pending sound, self._pending[0]) without the sound before its speech, less
        LEAD_IN_S; without speech, all but its last LEAD_IN_S (everything at the end). And whether it
        has speech."""
        window = SAMPLE_RATE // 10
        rms = window_rms(buffer, window)
        whole = rms[: buffer.size // window]  # (a partial last window is no floor)
        if whole.size:
            self._floor = min(self._floor, float(whole.min()))
        loud = np.flatnonzero(rms > max(SPEECH_MIN_RMS, SPEECH_NOISE_RATIO * self._floor))
        if loud.size:
            drop = int(loud[0]) * window - int(self.LEAD_IN_S * SAMPLE_RATE)
        else:
            drop = buffer.size if final else buffer.size - int(self.LEAD_IN_S * SAMPLE_RATE)
        if drop > 0:
            with self._lock:
                self._pending[0] = buffer = buffer[drop:]
                self._settled_s += drop / SAMPLE_RATE
        return buffer, bool(loud.size)
