"""The benchmark lab's speech models side by side (issue 33): each installed Whisper model (the shipped
tiny.en and those downloaded) transcribes the same clip, and its real-time factor, time to the first
segment, words per second, threads and what it heard are kept. The clip is the user's own audio file,
or speech made by espeak-ng where it is on PATH (Ember cannot make speech by itself)."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember_chat.engine.errors import EmberError
from ember_chat.engine.speech.models import KNOWN_MODELS, SpeechModelError, downloaded_folder
from ember_chat.engine.speech.transcriber import Transcriber, TranscriptionCancelled

# what "Generated speech" says: everyday sentences, about 13 s at 150 words a minute
GENERATED_TEXT = (
    "Please send the weekly report to the office before noon. The meeting is moved to Thursday "
    "afternoon at three o'clock. We should buy bread, eggs and apples at the market today. "
    "Open the window because the room is too warm."
)
ESPEAK_TIMEOUT_S = 60
CSV_COLUMNS = ("model", "real_time_factor", "first_segment_s", "words_per_s", "threads", "clip_s", "words", "error")

Progress = Callable[[int, int, str], None]  # (models done, models in all, what is happening)


class ClipError(EmberError):
    """The clip cannot be made (espeak-ng failed)."""


@dataclass(frozen=True)
class SpeechResult:
    """One model on the clip; `error`: why it has no figures (a damaged model, say)."""

    model: str
    real_time_factor: float | None = None
    first_segment_s: float | None = None
    words_per_s: float | None = None
    threads: int | None = None
    clip_s: float | None = None
    words: int | None = None
    text: str = ""
    error: str = ""

    def row(self) -> list[str]:
        """The CSV's row (CSV_COLUMNS)."""

        def num(value: float | None, digits: int) -> str:
            return "" if value is None else f"{value:.{digits}f}"

        return [self.model, num(self.real_time_factor, 3), num(self.first_segment_s, 2), num(self.words_per_s, 1),
                "" if self.threads is None else str(self.threads), num(self.clip_s, 1),
                "" if self.words is None else str(self.words), self.error]  # fmt: skip


def installed_models(models_dir: Path | None = None) -> list[str]:
    """The Whisper models that can run here: the shipped one, then those downloaded, in Ember's order."""
    return [m.name for m in KNOWN_MODELS if m.shipped or downloaded_folder(m, models_dir) is not None]


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


def generated_clip(path: Path, text: str = GENERATED_TEXT) -> Path:
    """`text` spoken by espeak-ng into the WAV `path` (ClipError when espeak-ng is missing or fails)."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        raise ClipError("espeak-ng is not installed (Debian and Ubuntu: sudo apt install espeak-ng).")
    try:
        subprocess.run([espeak, "-v", "en-us", "-s", "150", "-w", str(path), text], check=True,
                       capture_output=True, timeout=ESPEAK_TIMEOUT_S)  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        raise ClipError(f"espeak-ng could not make the clip: {exc}") from None
    return path


def measure_speech(
    models: list[str],
    clip: Path,
    cancel: threading.Event,
    progress: Progress | None = None,
    models_dir: Path | None = None,
    threads: int | None = None,
) -> list[SpeechResult]:
    """Each model loaded in turn and timed on `clip` (a model that fails gets its reason, the others go
    on; a damaged or unreadable clip fails them all the same way, so it stops the run: SpeechModelError
    or the decoder's error). Cancelled: the models measured so far."""
    results: list[SpeechResult] = []
    for i, name in enumerate(models):
        if cancel.is_set():
            break
        if progress is not None:
            progress(i, len(models), name)
        try:
            transcriber = Transcriber(name, threads=threads, models_dir=models_dir)
        except SpeechModelError as exc:
            results.append(SpeechResult(name, error=str(exc)))
            continue
        try:
            t = transcriber.transcribe(clip, cancel=cancel)
        except TranscriptionCancelled:
            break
        words = len(t.text.split())
        figures = (t.real_time_factor, t.first_segment_s, t.words_per_s, t.threads, t.duration_s, words)
        results.append(SpeechResult(name, *figures, text=t.text))
    if progress is not None:
        progress(len(results), len(models), "")
    return results


def results_csv(results: list[SpeechResult]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(r.row() for r in results)
    return out.getvalue()
