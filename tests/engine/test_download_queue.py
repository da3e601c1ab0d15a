"""The download queue's pause/resume/cancel clicks against a scripted downloader whose fetch() stops
where the test says (events, not sleeps), so the moments between a click and its effect are exact."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ember_chat.engine.errors import DownloadStopped
from ember_chat.engine.models.download_paths import safe_target
from ember_chat.engine.models.download_queue import CANCELLED, DONE, DOWNLOADING, PAUSED, DownloadQueue, JobStatus
from ember_chat.engine.models.downloader import DownloadControl, DownloadSpec, Progress

SPEC = DownloadSpec("acme/tiny-GGUF", "tiny-Q4_K_M.gguf", size=4)
WAIT_S = 30  # generous: a stuck test fails instead of hanging; never a measured time


def complete(spec: DownloadSpec, models_dir: Path, on_progress: Callable[[Progress], None] | None) -> Path:
    target = safe_target(models_dir, spec.repo_id, spec.filename)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"GGUF")
    if on_progress:
        on_progress(Progress(4, 4, 0.0, 0.0))
    return target


class ScriptedDownloader:
    """The first fetch() runs until it sees the pause, says so, and returns only when the test lets it
    go: in between the download is "stopping", as a real one is until its current chunk is written.
    Later fetches complete at once."""

    def __init__(self) -> None:
        self.calls = 0
        self.started = threading.Event()
        self.stop_seen = threading.Event()
        self.let_go = threading.Event()

    def fetch(
        self,
        spec: DownloadSpec,
        models_dir: Path,
        on_progress: Callable[[Progress], None] | None = None,
        control: DownloadControl | None = None,
    ) -> Path:
        assert control is not None
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            assert control.pause.wait(WAIT_S), "no pause came"
            self.stop_seen.set()
            assert self.let_go.wait(WAIT_S), "the test never let the download go"
            raise DownloadStopped(
                "Download cancelled." if control.cancel.is_set() else "Download paused.",
                cancelled=control.cancel.is_set(),
            )
        return complete(spec, models_dir, on_progress)


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[tuple[DownloadQueue, ScriptedDownloader, list[JobStatus]]]:
    fake = ScriptedDownloader()
    finished: list[JobStatus] = []
    queue = DownloadQueue(lambda: fake, tmp_path, on_finished=finished.append)  # type: ignore[arg-type,return-value]
    yield queue, fake, finished
    fake.let_go.set()
    assert queue.wait_idle(WAIT_S)


def stopping(queue: DownloadQueue, fake: ScriptedDownloader) -> int:
    """A download that has seen the user's pause and is on its way out, not yet PAUSED."""
    jid = queue.add(SPEC)
    assert fake.started.wait(WAIT_S)
    queue.pause(jid)
    assert fake.stop_seen.wait(WAIT_S)
    assert queue.snapshot()[0].state == DOWNLOADING
    return jid


def test_resume_while_a_pause_is_taking_effect_is_not_lost(scripted: tuple) -> None:
    queue, fake, finished = scripted
    jid = stopping(queue, fake)
    queue.resume(jid)  # the click that used to be dropped: the job was neither PAUSED nor QUEUED yet
    fake.let_go.set()
    assert queue.wait_idle(WAIT_S)
    [job] = queue.snapshot()
    assert job.state == DONE and job.path is not None
    assert fake.calls == 2  # it started again (from its partial file) after stopping
    assert [f.state for f in finished] == [DONE]


def test_pause_resume_pause_while_stopping_ends_paused(scripted: tuple) -> None:
    queue, fake, finished = scripted
    jid = stopping(queue, fake)
    queue.resume(jid)
    queue.pause(jid)  # the last click wins
    fake.let_go.set()
    assert queue.wait_idle(WAIT_S)
    assert queue.snapshot()[0].state == PAUSED
    assert fake.calls == 1
    assert [f.state for f in finished] == [PAUSED]


def test_resume_then_cancel_while_stopping_ends_cancelled(scripted: tuple) -> None:
    queue, fake, _finished = scripted
    jid = stopping(queue, fake)
    queue.resume(jid)
    queue.cancel(jid)
    fake.let_go.set()
    assert queue.wait_idle(WAIT_S)
    assert queue.snapshot()[0].state == CANCELLED
    assert fake.calls == 1


def test_close_does_not_restart_a_resumed_download(scripted: tuple) -> None:
    queue, fake, _finished = scripted
    jid = stopping(queue, fake)
    queue.resume(jid)
    real_wait_idle = queue.wait_idle

    def let_go_then_wait(timeout: float | None = None) -> bool:
        fake.let_go.set()  # the download stops only once close() has paused everything
        return real_wait_idle(timeout)

    queue.wait_idle = let_go_then_wait  # type: ignore[method-assign]
    queue.close()  # quitting pauses everything, a pending resume included
    assert queue.snapshot()[0].state == PAUSED
    assert fake.calls == 1


class LateLookingDownloader:
    """fetch() looks at its control only when the test says, then finishes unless paused."""

    def __init__(self) -> None:
        self.calls = 0
        self.started = threading.Event()
        self.look = threading.Event()

    def fetch(
        self,
        spec: DownloadSpec,
        models_dir: Path,
        on_progress: Callable[[Progress], None] | None = None,
        control: DownloadControl | None = None,
    ) -> Path:
        assert control is not None
        self.calls += 1
        self.started.set()
        assert self.look.wait(WAIT_S)
        if control.pause.is_set():
            raise DownloadStopped("Download paused.", cancelled=False)
        return complete(spec, models_dir, on_progress)


def test_resume_before_the_pause_is_noticed_just_goes_on(tmp_path: Path) -> None:
    fake = LateLookingDownloader()
    queue = DownloadQueue(lambda: fake, tmp_path)  # type: ignore[arg-type,return-value]
    try:
        jid = queue.add(SPEC)
        assert fake.started.wait(WAIT_S)
        queue.pause(jid)
        queue.resume(jid)  # before the download thread looked: the pause is withdrawn
        fake.look.set()
        assert queue.wait_idle(WAIT_S)
        assert queue.snapshot()[0].state == DONE
        assert fake.calls == 1  # not stopped and restarted
    finally:
        fake.look.set()
        assert queue.wait_idle(WAIT_S)
