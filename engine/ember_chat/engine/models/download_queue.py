"""A queue of downloads, one or two at a time, each on its own thread; pause, resume, cancel.

Clients (the GUI, the CLI) read `snapshot()` when they like (the GUI polls a few times a second), so
progress reporting never floods anyone. Unfinished downloads found on disk (sidecars) come back as
paused jobs after a restart.

A pause takes effect when the download thread next looks (between chunks); until then the job still
reads DOWNLOADING. A resume in that window is kept: the pause is withdrawn, and if the thread was
already on its way out, the job goes back in the queue instead of ending PAUSED. The last click wins.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ember_chat.engine.core.states import JobState
from ember_chat.engine.errors import DownloadStopped, EmberError, UnsafeFilename
from ember_chat.engine.models.download_paths import part_paths, safe_target, sidecar_record
from ember_chat.engine.models.downloader import DownloadControl, Downloader, DownloadSpec, Progress, spec_from_record

QUEUED, DOWNLOADING, PAUSED, DONE, FAILED, CANCELLED = JobState  # in the enum's order


@dataclass(frozen=True)
class JobStatus:
    id: int
    spec: DownloadSpec
    state: str
    done: int = 0
    total: int = 0
    speed_bps: float = 0.0
    eta_s: float | None = None
    error: str | None = None
    path: Path | None = None

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


class DownloadQueue:
    def __init__(
        self,
        downloader_factory: Callable[[], Downloader],
        models_dir: Path,
        max_parallel: int = 2,
        on_finished: Callable[[JobStatus], None] | None = None,
    ) -> None:
        self._factory = downloader_factory
        self.models_dir = Path(models_dir)
        self.max_parallel = max_parallel
        self._on_finished = on_finished
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._jobs: dict[int, JobStatus] = {}
        self._controls: dict[int, DownloadControl] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._resume_after_stop: set[int] = set()  # resumed while their pause was taking effect

    # ----- commands
    def add(self, spec: DownloadSpec, start_paused: bool = False) -> int:
        with self._lock:
            for job in self._jobs.values():
                same = (job.spec.repo_id, job.spec.local_name) == (spec.repo_id, spec.local_name)
                if same and job.state in (QUEUED, DOWNLOADING, PAUSED):
                    return job.id
            jid = next(self._ids)
            self._jobs[jid] = JobStatus(jid, spec, PAUSED if start_paused else QUEUED, total=spec.size or 0)
        self._pump()
        return jid

    def pause(self, jid: int) -> None:
        with self._lock:
            job = self._jobs[jid]
            if job.state == QUEUED:
                self._jobs[jid] = replace(job, state=PAUSED, speed_bps=0.0, eta_s=None)
            elif job.state == DOWNLOADING:
                self._resume_after_stop.discard(jid)
                self._controls[jid].pause.set()

    def resume(self, jid: int) -> None:
        with self._lock:
            job = self._jobs[jid]
            if job.state in (PAUSED, FAILED):
                self._jobs[jid] = replace(job, state=QUEUED, error=None)
            elif job.state == DOWNLOADING:
                control = self._controls[jid]
                if control.pause.is_set() and not control.cancel.is_set():
                    # The pause has not taken effect yet: withdraw it (a thread that has not looked
                    # goes on), and requeue the job if the thread was already stopping.
                    self._resume_after_stop.add(jid)
                    control.pause.clear()
        self._pump()

    def cancel(self, jid: int) -> None:
        """Stop and delete the partial file; nothing is installed."""
        with self._lock:
            job = self._jobs[jid]
            if job.state == DOWNLOADING:
                self._resume_after_stop.discard(jid)
                self._controls[jid].cancel.set()
                return
            if job.state in (QUEUED, PAUSED, FAILED):
                self._jobs[jid] = replace(job, state=CANCELLED, speed_bps=0.0, eta_s=None)
        self._discard_partial(job.spec)

    def clear_finished(self) -> None:
        with self._lock:
            for jid in [j.id for j in self._jobs.values() if j.state in (DONE, CANCELLED)]:
                del self._jobs[jid]

    def snapshot(self) -> list[JobStatus]:
        with self._lock:
            return list(self._jobs.values())

    def restore_partials(self, sidecars: list[Path]) -> None:
        """Unfinished downloads from an earlier session, as paused jobs ready to resume."""
        for sidecar in sidecars:
            record = sidecar_record(sidecar)
            if record is None:
                continue
            part = sidecar.with_name(sidecar.name.removesuffix(".json"))
            jid = self.add(spec_from_record(record), start_paused=True)
            with self._lock:
                have = part.stat().st_size if part.exists() else 0
                self._jobs[jid] = replace(self._jobs[jid], done=have, total=int(record.get("size") or 0))

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Join every running download thread (tests, CLI, shutdown)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                threads = list(self._threads.values())
            if not threads:
                return True
            for t in threads:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                t.join(left)
                if t.is_alive():
                    return False

    def close(self, wait: bool = True) -> None:
        """Pause everything that runs (partials are kept for next time) and join the threads, unless
        not `wait` (the window: a download stuck in a read would hold it up to its read timeout; its
        thread ends by itself, and `wait_idle` joins it)."""
        with self._lock:
            for jid, job in self._jobs.items():
                if job.state == DOWNLOADING:
                    self._resume_after_stop.discard(jid)
                    self._controls[jid].pause.set()
                elif job.state == QUEUED:
                    self._jobs[jid] = replace(job, state=PAUSED)
        if wait:
            self.wait_idle()

    # ----- machinery
    def _pump(self) -> None:
        with self._lock:
            running = sum(1 for j in self._jobs.values() if j.state == DOWNLOADING)
            for job in sorted(self._jobs.values(), key=lambda j: j.id):
                if running >= self.max_parallel:
                    break
                if job.state != QUEUED:
                    continue
                control = DownloadControl()
                self._controls[job.id] = control
                self._jobs[job.id] = replace(job, state=DOWNLOADING, error=None)
                thread = threading.Thread(target=self._run, args=(job.id, control), name=f"download-{job.id}")
                self._threads[job.id] = thread
                thread.start()
                running += 1

    def _run(self, jid: int, control: DownloadControl) -> None:
        spec = self._jobs[jid].spec

        def progress(p: Progress) -> None:
            with self._lock:
                self._jobs[jid] = replace(
                    self._jobs[jid], done=p.done, total=p.total, speed_bps=p.speed_bps, eta_s=p.eta_s
                )

        final: JobStatus
        try:
            path = self._factory().fetch(spec, self.models_dir, on_progress=progress, control=control)
            with self._lock:
                job = self._jobs[jid]
                final = replace(job, state=DONE, done=job.total or job.done, speed_bps=0.0, eta_s=0.0, path=path)
        except DownloadStopped as stop:
            if stop.cancelled:
                self._discard_partial(spec)
            with self._lock:
                resumed = jid in self._resume_after_stop  # resumed while stopping: back in the queue
                state = CANCELLED if stop.cancelled else (QUEUED if resumed else PAUSED)
                final = replace(self._jobs[jid], state=state, speed_bps=0.0, eta_s=None)
        except EmberError as exc:
            with self._lock:
                final = replace(self._jobs[jid], state=FAILED, error=str(exc), speed_bps=0.0, eta_s=None)
        except Exception as exc:  # never lose a download thread silently
            with self._lock:
                final = replace(self._jobs[jid], state=FAILED, error=f"Unexpected error: {exc!r}", speed_bps=0.0)
        with self._lock:
            self._jobs[jid] = final
            self._threads.pop(jid, None)
            self._controls.pop(jid, None)
            self._resume_after_stop.discard(jid)
        if self._on_finished and final.state != QUEUED:  # a requeued job has not finished
            self._on_finished(final)
        self._pump()

    def _discard_partial(self, spec: DownloadSpec) -> None:
        try:
            part, sidecar = part_paths(safe_target(self.models_dir, spec.repo_id, spec.local_name))
        except UnsafeFilename:
            return
        part.unlink(missing_ok=True)
        sidecar.unlink(missing_ok=True)
