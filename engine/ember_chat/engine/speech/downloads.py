"""Downloading a Whisper model from the Hub: the several files of a CTranslate2 conversion (model.bin,
config.json, the tokenizer and vocabulary, preprocessor_config.json) through the Model Manager's own
downloader (`models.downloader`: HTTP Range resume from `<file>.part`, the sha256 the Hub gives for LFS
files, retries, the token kept to the Hub's origin), with the disk checked for the whole model first.

The files go to `<models folder>/speech/<owner>/<repo>/`; the manifest (`models.MANIFEST`: each
file's size and sha256) is written only after every file is in place, so a model cut short, cancelled
or refused is never offered (`models.locate` wants the manifest). Downloading again resumes the
partial file. Delete removes the folder. `SpeechDownloads` runs one download per model on a thread of
its own and is read by snapshots (the window polls it, as it does the GGUF queue).

The real-time factor on this machine is measured by use: the first transcription of a file of at
least MEASURE_MIN_S seconds stores it (`record_speed`), and the Model Manager shows it with its date."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ember_chat.engine.errors import DiskFullError, DownloadStopped, EmberError
from ember_chat.engine.models.downloader import DISK_MARGIN, DownloadControl, Downloader, DownloadSpec, Progress
from ember_chat.engine.speech.models import (
    MANIFEST,
    REQUIRED_FILES,
    SPEECH_FOLDER,
    VOCABULARY_FILES,
    SpeechModel,
    SpeechModelError,
    check_folder,
    known,
    model_folder,
)

if TYPE_CHECKING:  # (huggingface_hub is not imported by a transcription that records its speed)
    from ember_chat.engine.models.hub import HubClient, HubFile

# what faster-whisper's own download_model takes from a repository (faster_whisper/utils.py)
WANTED = re.compile(r"^(config\.json|preprocessor_config\.json|model\.bin|tokenizer\.json|vocabulary\.[a-z]+)$")
SPEEDS_FILE = "speeds.json"  # <models folder>/speech/speeds.json: name → measured real-time factor
MEASURE_MIN_S = 5.0  # shorter recordings say more about the model's load than its speed
SPEEDS_MAX_BYTES = 64 * 1024

QUEUED, DOWNLOADING, DONE, FAILED, CANCELLED = "queued", "downloading", "done", "failed", "cancelled"


def hub_model(name: str) -> SpeechModel:
    """The downloadable model `name`, or SpeechModelError naming those there are."""
    model = known(name)
    if model is None or model.shipped or not model.repo:
        names = ", ".join(m.name for m in _downloadable())
        raise SpeechModelError(f"{name!r} is not a speech model Ember downloads; it downloads {names}.")
    return model


def _downloadable() -> list[SpeechModel]:
    from ember_chat.engine.speech.models import KNOWN_MODELS

    return [m for m in KNOWN_MODELS if not m.shipped and m.repo]


def model_files(hub: HubClient, model: SpeechModel) -> tuple[str, list[HubFile]]:
    """(the commit, the files faster-whisper needs) of the model's repository: SpeechModelError when
    it lacks one (the Hub's own errors, offline or not found, pass through)."""
    commit, files = hub.listing(model.repo)
    wanted = [f for f in files if WANTED.match(f.path)]
    names = {f.path for f in wanted}
    missing = [f for f in REQUIRED_FILES if f not in names]
    if not names & set(VOCABULARY_FILES):
        missing.append(" or ".join(VOCABULARY_FILES))
    if missing:
        raise SpeechModelError(f"{model.repo} is not a CTranslate2 Whisper model: it has no {', '.join(missing)}.")
    return commit, sorted(wanted, key=lambda f: f.size)  # (the small files first: a wrong repo is told early)


def download(
    model: SpeechModel,
    models_dir: Path,
    hub: HubClient,
    downloader: Downloader,
    on_progress: Callable[[int, int], None] | None = None,
    control: DownloadControl | None = None,
) -> Path:
    """Every file of `model` into its folder, each verified, then the manifest: the folder. A partial
    file is kept for a later resume unless the download was cancelled (then the folder goes)."""
    control = control or DownloadControl()
    commit, files = model_files(hub, model)
    folder = model_folder(models_dir, model)
    root = Path(models_dir) / SPEECH_FOLDER
    total = sum(f.size for f in files)
    have = {f.path: _complete_size(folder / f.path, f.size) for f in files}
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    need = total - sum(have.values())
    if free < need + DISK_MARGIN:  # the whole model, not file by file: never stop at the last file for space
        raise DiskFullError(f"Not enough disk space in {folder} for {model.name}: it needs {need / 1e9:.2f} GB "
                            f"more, {free / 1e9:.2f} GB are free. Free some space or choose another models "
                            "folder.")  # fmt: skip
    done_before = 0
    for f in files:
        spec = DownloadSpec(model.repo, f.path, commit or "main", f.size, f.sha256)

        def progress(p: Progress, before: int = done_before) -> None:
            if on_progress is not None:
                on_progress(before + p.done, total)

        try:
            downloader.fetch(spec, root, on_progress=progress, control=control)
        except DownloadStopped as stop:
            if stop.cancelled:
                delete(models_dir, model)
            raise
        done_before += f.size
        if on_progress is not None:
            on_progress(done_before, total)
    check_folder(folder, model.name, {f.path: f.size for f in files})
    manifest = {
        "name": model.name,
        "repo": model.repo,
        "commit": commit,
        "downloaded": dt.date.today().isoformat(),
        "files": {f.path: {"size": f.size, "sha256": f.sha256} for f in files},
    }
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)  # (last: the model is usable from this moment, never before)
    return folder


def _complete_size(path: Path, size: int) -> int:
    return size if path.is_file() and path.stat().st_size == size else 0


def delete(models_dir: Path, model: SpeechModel) -> None:
    """The model's folder, gone (its partial files too); its measured speed is forgotten."""
    folder = model_folder(models_dir, model)
    root = (Path(models_dir) / SPEECH_FOLDER).resolve()
    if folder.is_symlink() or not folder.resolve().is_relative_to(root):
        raise SpeechModelError(f"Refusing to delete {folder}: it is not inside {root}.")
    if folder.exists():
        (folder / MANIFEST).unlink(missing_ok=True)  # (first: a delete cut short leaves no model half there)
        shutil.rmtree(folder)
    speeds = read_speeds(models_dir)
    if speeds.pop(model.name, None) is not None:
        _write_speeds(models_dir, speeds)


# ----- speed on this machine
@dataclass(frozen=True)
class Speed:
    real_time_factor: float
    date: str  # ISO date of the measurement
    audio_s: float
    threads: int


def read_speeds(models_dir: Path) -> dict[str, Speed]:
    path = Path(models_dir) / SPEECH_FOLDER / SPEEDS_FILE
    try:
        if path.stat().st_size > SPEEDS_MAX_BYTES:
            return {}
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    speeds: dict[str, Speed] = {}
    for name, v in raw.items() if isinstance(raw, dict) else ():
        try:
            speeds[str(name)] = Speed(float(v["rtf"]), str(v["date"])[:10], float(v["audio_s"]), int(v["threads"]))
        except (KeyError, TypeError, ValueError):
            continue  # (one bad entry does not hide the others)
    return speeds


def _write_speeds(models_dir: Path, speeds: dict[str, Speed]) -> None:
    path = Path(models_dir) / SPEECH_FOLDER / SPEEDS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {n: {"rtf": s.real_time_factor, "date": s.date, "audio_s": s.audio_s, "threads": s.threads}
            for n, s in speeds.items()}  # fmt: skip
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def record_speed(models_dir: Path, name: str, real_time_factor: float, audio_s: float, threads: int) -> bool:
    """Store the model's real-time factor the first time it is measured (a recording of at least
    MEASURE_MIN_S); True when stored. Best effort: a folder that cannot be written is not an error."""
    if audio_s < MEASURE_MIN_S or real_time_factor <= 0:
        return False
    speeds = read_speeds(models_dir)
    if name in speeds:
        return False
    speeds[name] = Speed(round(real_time_factor, 4), dt.date.today().isoformat(), round(audio_s, 1), threads)
    try:
        _write_speeds(models_dir, speeds)
    except OSError:
        return False
    return True


# ----- downloads on threads, for the window
@dataclass(frozen=True)
class SpeechJob:
    name: str
    state: str
    done: int = 0
    total: int = 0
    error: str | None = None

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


class SpeechDownloads:
    """One download per model, each on its own thread; `snapshot()` says where they are."""

    def __init__(
        self, models_dir: Path, hub_factory: Callable[[], HubClient], downloader_factory: Callable[[], Downloader]
    ) -> None:
        self.models_dir = Path(models_dir)
        self._hub = hub_factory
        self._downloader = downloader_factory
        self._lock = threading.Lock()
        self._jobs: dict[str, SpeechJob] = {}
        self._controls: dict[str, DownloadControl] = {}
        self._threads: dict[str, threading.Thread] = {}

    def start(self, name: str) -> None:
        model = hub_model(name)
        with self._lock:
            if name in self._threads:
                return
            control = self._controls[name] = DownloadControl()
            self._jobs[name] = SpeechJob(name, QUEUED, total=model.size_mb * 1_000_000)
            thread = self._threads[name] = threading.Thread(
                target=self._run, args=(model, control), name=f"speech-download-{name}"
            )
        thread.start()

    def cancel(self, name: str) -> None:
        with self._lock:
            control = self._controls.get(name)
        if control is not None:
            control.cancel.set()

    def snapshot(self) -> dict[str, SpeechJob]:
        with self._lock:
            return dict(self._jobs)

    def forget(self, name: str) -> None:
        """Drop a finished, failed or cancelled job from the snapshot."""
        with self._lock:
            if name not in self._threads:
                self._jobs.pop(name, None)

    def close(self, wait: bool = True) -> None:
        """Stop every download (its partial files are kept for a later resume) and, if `wait`, join."""
        with self._lock:
            controls = list(self._controls.values())
        for control in controls:
            control.pause.set()
        if wait:
            self.wait_idle()

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._lock:
            threads = list(self._threads.values())
        for t in threads:
            t.join(timeout)
        return not any(t.is_alive() for t in threads)

    def _set(self, name: str, **changes: object) -> None:
        with self._lock:
            self._jobs[name] = replace(self._jobs[name], **changes)  # type: ignore[arg-type]

    def _run(self, model: SpeechModel, control: DownloadControl) -> None:
        name = model.name
        self._set(name, state=DOWNLOADING)
        try:
            download(model, self.models_dir, self._hub(), self._downloader(),
                     lambda done, total: self._set(name, done=done, total=total), control)  # fmt: skip
            self._set(name, state=DONE, error=None)
        except DownloadStopped as stop:
            self._set(name, state=CANCELLED if stop.cancelled else FAILED,
                      error=None if stop.cancelled else str(stop))  # fmt: skip
        except EmberError as exc:
            self._set(name, state=FAILED, error=str(exc))
        except Exception as exc:  # never lose a download thread silently
            self._set(name, state=FAILED, error=f"Unexpected error: {exc!r}")
        finally:
            with self._lock:
                self._threads.pop(name, None)
                self._controls.pop(name, None)
