"""The GUI thread never waits: on nvidia-smi (the ⚙ dialog, "auto" GPU layers), the keychain (the Hub
token, a connection's key, the API server's key), GGUF headers and the models folder (the Model
Manager's Installed tab, the picker), a connection test or a download on close. Each blocking part is
made to hang on an Event here (for at most HANG_S, so the old behaviour fails instead of hanging the
suite): the call returns at once, the event loop keeps running, and the result arrives when the event
is set. Latest wins: of two searches, the first one's late result is dropped. The keychain, connection
tests and closing are in app/test_gui_never_waits_keychain.py, which shares these helpers and fixtures."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.errors import ModelFileError
from ember_chat.engine.models import fit
from ember_chat.engine.models.hub import RepoSummary
from ember_chat.engine.storage.model_settings import AUTO_GPU_LAYERS, ModelLoadSettings
from tests.helpers.never_waits import HANG_S, PROMPT_S, WAIT_MS, Heartbeat, closed_cleanly, timed
from tests.helpers.window import LOAD_TIMEOUT

pytestmark = pytest.mark.usefixtures("every_task_thread_ends", "no_api_server_key")

# ----- helpers and fixtures


@pytest.fixture
def hung_nvidia_smi(monkeypatch: pytest.MonkeyPatch, release: threading.Event) -> threading.Event:
    """nvidia-smi that answers (8 GB free) only once `release` is set; returns the event set when asked."""
    asked = threading.Event()

    def free_vram() -> int | None:
        asked.set()
        release.wait(HANG_S)
        return 8 << 30

    monkeypatch.setattr(fit, "free_vram_bytes", free_vram)
    for where in ("ember_chat.engine.storage.model_settings", "ember_chat.app.models.load_panel"):
        monkeypatch.setattr(f"{where}.free_vram_bytes", free_vram, raising=False)
    return asked


# ----- the one idiom: TaskRunner


def test_a_newer_task_with_the_same_key_wins(qtbot: QtBot) -> None:
    runner = TaskRunner(workers=2)
    first_may_end = threading.Event()
    shown: list[str] = []
    try:
        runner.run(lambda: first_may_end.wait(HANG_S) and "first", shown.append, key="search")
        with qtbot.waitSignal(runner.settled, timeout=WAIT_MS):
            runner.run(lambda: "second", shown.append, key="search")
        assert shown == ["second"]
        first_may_end.set()  # the first one ends last: its result is dropped
        assert runner.join(10)
        qtbot.waitUntil(lambda: not runner.busy, timeout=WAIT_MS)
        qtbot.wait(50)  # a delivery would have happened by now (the runner collects every 15 ms)
        assert shown == ["second"]
    finally:
        first_may_end.set()
        runner.shutdown()
        runner.join(10)


def test_a_superseded_task_that_has_not_started_never_runs(qtbot: QtBot) -> None:
    runner = TaskRunner(workers=1)
    gate = threading.Event()
    ran: list[str] = []
    try:
        runner.run(lambda: gate.wait(HANG_S), lambda _: None)  # holds the only worker
        runner.run(lambda: ran.append("old"), lambda _: None, key="k")
        runner.run(lambda: ran.append("new"), lambda _: None, key="k")
        gate.set()
        assert runner.join(10)
        assert ran == ["new"]
    finally:
        gate.set()
        runner.shutdown()
        runner.join(10)


def test_errors_arrive_as_messages(qtbot: QtBot) -> None:
    runner = TaskRunner()
    errors: list[str] = []

    def bad_file() -> None:
        raise ModelFileError("x.gguf is not a GGUF file.")

    def bug() -> None:
        raise ValueError("oops")

    try:
        with qtbot.waitSignal(runner.settled, timeout=WAIT_MS):
            runner.run(bad_file, lambda _: None, errors.append)
        with qtbot.waitSignal(runner.settled, timeout=WAIT_MS):
            runner.run(bug, lambda _: None, errors.append)
        assert errors == ["x.gguf is not a GGUF file.", "Unexpected error: ValueError('oops')"]
    finally:
        runner.shutdown()
        runner.join(10)


def test_a_task_reports_its_progress_in_order_before_its_result(qtbot: QtBot) -> None:
    runner = TaskRunner()
    got: list[object] = []
    on_gui: list[bool] = []
    gui = threading.current_thread()

    def count(report: Callable[[int], None]) -> str:
        helper = threading.Thread(target=lambda: [report(i) for i in range(500, 600)])  # from another thread too
        for i in range(500):
            report(i)
        helper.start()
        helper.join()
        return "done"

    def progress(i: int) -> None:
        on_gui.append(threading.current_thread() is gui)
        got.append(i)

    try:
        with qtbot.waitSignal(runner.settled, timeout=WAIT_MS):
            runner.run_reporting(count, progress, got.append)
        assert got == [*range(600), "done"] and all(on_gui)  # every event, on the GUI thread, then the result
    finally:
        runner.shutdown()
        runner.join(10)


def test_a_cancelled_task_reports_nothing_more(qtbot: QtBot, release: threading.Event) -> None:
    runner = TaskRunner()
    got: list[object] = []

    def slow(report: Callable[[str], None]) -> str:
        report("first")
        release.wait(HANG_S)
        report("after the cancel")
        return "late"

    try:
        task = runner.run_reporting(slow, got.append, got.append, got.append)
        qtbot.waitUntil(lambda: got == ["first"], timeout=WAIT_MS)
        task.cancel()
        release.set()
        assert task.wait(10) and runner.join(10)
        qtbot.wait(50)  # a delivery would have happened by now (the runner collects every 15 ms)
        assert got == ["first"]
    finally:
        release.set()
        runner.shutdown()
        runner.join(10)


def test_a_task_on_its_own_thread_never_holds_up_the_workers(qtbot: QtBot, release: threading.Event) -> None:
    runner = TaskRunner(workers=1)
    shown: list[str] = []
    try:
        long = runner.run(lambda: release.wait(HANG_S) and "long", shown.append, own_thread=True)
        with qtbot.waitSignal(runner.settled, timeout=WAIT_MS):
            runner.run(lambda: "short", shown.append)  # the only worker is free for it
        assert shown == ["short"] and not long.wait(0)
        with qtbot.waitSignal(runner.settled, timeout=WAIT_MS):
            release.set()
        assert shown == ["short", "long"]
    finally:
        release.set()
        runner.shutdown()
        runner.join(10)


def test_shutdown_interrupts_and_never_waits_for_a_hung_task(qtbot: QtBot, release: threading.Event) -> None:
    runner = TaskRunner()
    started, interrupted = threading.Event(), threading.Event()
    delivered: list[object] = []

    def hung() -> str:
        started.set()
        release.wait(HANG_S)
        return "late"

    runner.run(hung, delivered.append, delivered.append, key="test", cancel=interrupted.set)
    runner.run(lambda: "never", delivered.append)  # a second worker runs it, or shutdown drops it
    assert started.wait(10)
    assert timed(runner.shutdown) < PROMPT_S
    assert interrupted.is_set() and not runner.busy
    assert not runner.join(0.05)  # the hung task still runs: shutdown did not wait for it
    release.set()
    assert runner.join(10)
    qtbot.wait(50)
    assert delivered == []  # nothing is delivered after shutdown
    runner.run(lambda: "after", delivered.append)  # a closed runner takes no more work
    assert runner.join(10) and delivered == []


# ----- nvidia-smi


def test_the_gear_dialog_opens_while_nvidia_smi_hangs(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    hung_nvidia_smi: threading.Event,
    release: threading.Event,
    heartbeat: Heartbeat,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a machine with a GPU (nvidia-smi answers) and a llama.cpp build that can use it
    monkeypatch.setattr("ember_chat.app.models.load_panel.gpu_offload_supported", lambda: True)
    w = make_window()
    qtbot.waitUntil(lambda: w.model_picker.findData("tiny.gguf") >= 0, timeout=WAIT_MS)
    w.model_picker.setCurrentIndex(w.model_picker.findData("tiny.gguf"))
    with qtbot.waitSignal(w.load_settings_opened, timeout=WAIT_MS):
        assert timed(w.models.open_load_settings) < PROMPT_S
    dialog = w.models.load_settings
    assert hung_nvidia_smi.wait(10)
    assert "checking the GPU" in dialog.estimate.text()
    heartbeat.keeps_beating(qtbot)  # the window keeps running while nvidia-smi does not answer
    dialog.gpu_layers.setValue(AUTO_GPU_LAYERS)  # and the dialog takes input
    assert "checking the GPU" in dialog.estimate.text()
    with qtbot.waitSignal(dialog.gpu_checked, timeout=WAIT_MS):
        release.set()
    text = dialog.estimate.text()
    assert "checking" not in text and "VRAM" in text and "8.59 GB free" in text and "auto:" in text
    dialog.reject()
    closed_cleanly(w)


def test_loading_with_auto_gpu_layers_does_not_wait_for_nvidia_smi(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    hung_nvidia_smi: threading.Event,
    release: threading.Event,
    heartbeat: Heartbeat,
) -> None:
    w = make_window()
    w.model_settings.save(
        "tiny.gguf", ModelLoadSettings(n_ctx=512, threads=1, threads_batch=1, gpu_layers=AUTO_GPU_LAYERS, n_batch=256)
    )
    assert timed(lambda: w.models.load_model("tiny.gguf")) < PROMPT_S
    assert hung_nvidia_smi.wait(10)
    heartbeat.keeps_beating(qtbot)
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        release.set()
    assert w.model is not None and w.model.n_ctx == 512
    closed_cleanly(w)


# ----- GGUF headers and the models folder


def test_the_installed_tab_lists_models_before_their_headers_are_read(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
    release: threading.Event,
    heartbeat: Heartbeat,
) -> None:
    from ember_chat.engine.models import library as library_module

    real_inspect = library_module.inspect_gguf
    reading = threading.Event()

    def slow_inspect(path: Path) -> object:
        reading.set()
        release.wait(HANG_S)
        return real_inspect(path)

    w = make_window()
    monkeypatch.setattr(library_module, "inspect_gguf", slow_inspect)
    made: list[object] = []
    assert timed(lambda: made.append(w.models.model_manager())) < PROMPT_S  # it used to read every header first
    mm = made[0]
    qtbot.waitUntil(lambda: mm.select_installed("tiny.gguf"), timeout=WAIT_MS)  # listed, header unread
    assert reading.wait(10)
    row = mm.installed.currentRow()
    assert mm.installed.item(row, 1).text() == "reading…"
    heartbeat.keeps_beating(qtbot)
    with qtbot.waitSignal(mm.headers_read, timeout=WAIT_MS):
        release.set()
    assert mm.installed.item(row, 1).text() == "llama" and mm.installed.item(row, 6).text() == "yes"
    closed_cleanly(w)


def test_the_picker_is_listed_off_the_gui_thread(
    qtbot: QtBot,
    make_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
    release: threading.Event,
    heartbeat: Heartbeat,
) -> None:
    from ember_chat.engine.models.library import ModelLibrary

    w = make_window()
    qtbot.waitUntil(lambda: w.model_picker.findData("tiny.gguf") >= 0, timeout=WAIT_MS)
    (w.library.models_dir / "second.gguf").write_bytes((w.library.models_dir / "tiny.gguf").read_bytes())
    real_entries = ModelLibrary.entries
    listing = threading.Event()

    def slow_entries(self: ModelLibrary) -> list[object]:
        listing.set()
        release.wait(HANG_S)
        return real_entries(self)

    monkeypatch.setattr(ModelLibrary, "entries", slow_entries)
    assert timed(w.models.reload_models) < PROMPT_S
    assert listing.wait(10)
    heartbeat.keeps_beating(qtbot)
    assert w.model_picker.findData("second.gguf") < 0  # not known yet
    with qtbot.waitSignal(w.models_listed, timeout=WAIT_MS):
        release.set()
    assert w.model_picker.findData("second.gguf") >= 0
    closed_cleanly(w)


# ----- the keychain


class SlowHub:
    """Stands in for the Hub client: each query answers once its gate opens."""

    def __init__(self, gates: dict[str, threading.Event]) -> None:
        self.gates = gates

    def search(self, query: str) -> list[RepoSummary]:
        self.gates[query].wait(HANG_S)
        return [RepoSummary(f"acme/{query}-GGUF", 1, 0, None)]


def test_a_fast_double_search_shows_the_last_search(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    mm = w.models.model_manager()
    gates = {"first": threading.Event(), "second": threading.Event()}
    mm.hub_factory = lambda: SlowHub(gates)
    try:
        mm.search_box.setText("first")
        mm.search()
        mm.search_box.setText("second")
        mm.search()
        with qtbot.waitSignal(mm.search_done, timeout=WAIT_MS):
            gates["second"].set()
        assert [mm.repos.item(r, 0).text() for r in range(mm.repos.rowCount())] == ["acme/second-GGUF"]
        gates["first"].set()  # the first search answers last: dropped
        assert mm.tasks.join(10)
        qtbot.wait(50)
        assert [mm.repos.item(r, 0).text() for r in range(mm.repos.rowCount())] == ["acme/second-GGUF"]
    finally:
        for gate in gates.values():
            gate.set()
    closed_cleanly(w)
