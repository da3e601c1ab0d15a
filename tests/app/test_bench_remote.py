"""The benchmark lab on a remote connection's model, against the fault-injecting server on 127.0.0.1:
what is sent (a fresh prompt per length and repetition, greedy, `ignore_eos`, exactly the output
length), what is recorded (the server's prompt count, no local memory figure, the server in the
facts), cancel while the server is still on the prompt, an unreachable server, and the window."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.bench.lab import BenchPlan, BenchRun, load_for_bench, run_lab
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.errors import GenerationError, LoadCancelled, RemoteUnreachable
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.bench_lab import bench_dialog, run_bench
from tests.helpers.remote_support import MODEL, Backends, free_port
from tests.helpers.sse_server import DONE, FakeOpenAI, text_chunk, usage_chunk

pytestmark = pytest.mark.usefixtures("no_thread_left")


ANSWER = [text_chunk(" one"), text_chunk(" two"), text_chunk(" three", finish="length"), usage_chunk(21, 3), DONE]


def wait_for_request(fake: FakeOpenAI, path: str | None = None, count: int = 1) -> None:
    """Until `count` requests (to `path`; by default any generation) have arrived."""

    def arrived() -> int:
        return len(fake.received(path) if path else fake.generate_requests())

    while arrived() < count:
        fake.request_arrived.clear()
        if arrived() >= count:
            return
        assert fake.request_arrived.wait(10), "no request arrived"


def test_remote_lab_sends_fresh_greedy_prompts_and_keeps_the_servers_figures(
    server: FakeOpenAI, backends: Backends
) -> None:
    server.stream(ANSWER)
    backend = backends.make(server)
    run = run_lab(backend, BenchPlan((16, 48), 3, 2))
    warm_up, *bodies = [r.body for r in server.generate_requests()]
    assert [r.path for r in server.generate_requests()] == ["/v1/completions"] * 5
    assert warm_up["max_tokens"] == 2  # one untimed run first, as llama-bench does
    assert all(b["ignore_eos"] is True and b["max_tokens"] == 3 and b["temperature"] == 0.0 for b in bodies)
    prompts = [b["prompt"] for b in [warm_up, *bodies]]
    # no tokenizer endpoint here: n words; every prompt different and none the start of another
    assert [len(p.split()) for p in prompts] == [16, 16, 16, 48, 48]
    assert all(not b.startswith(a) for a in prompts for b in prompts if a is not b)
    assert [p.prompt_tokens for p in run.points] == [21, 21]  # as the server counted them
    for p in run.points:
        assert p.where == "lab" and p.model == MODEL and p.output_tokens == 3 and p.repetitions == 2
        assert p.peak_rss_bytes is None  # the model's memory is on the server
        assert p.ttft_s > 0 and p.prefill_tokens_per_s > 0 and p.decode_tokens_per_s > 0
    assert run.machine["backend"] == "remote" and run.machine["server"] == "lab"
    assert "peak_rss_bytes" in run.to_csv().splitlines()[0]


def test_cancel_while_the_server_is_on_the_prompt(server: FakeOpenAI, backends: Backends) -> None:
    server.stream(ANSWER, pauses={0: 60})  # the 200, then a long prompt evaluation
    backend = backends.make(server)
    cancel = threading.Event()
    result: list[BenchRun] = []
    worker = threading.Thread(target=lambda: result.append(run_lab(backend, BenchPlan((16,), 3, 1), cancel)))
    t0 = time.monotonic()
    worker.start()
    wait_for_request(server)
    cancel.set()
    backend.request_stop()  # as the window's Cancel does: the stream closes at once
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - t0 < 10
    assert result[0].cancelled and result[0].points == []


def test_a_cancel_before_a_request_starts_is_not_lost(server: FakeOpenAI, backends: Backends) -> None:
    """Cancelled just as the warm-up's request is about to go out (a backend forgets a stop that comes
    before its request starts): the lab repeats the stop, so the stalled request is closed at once."""
    server.stream(ANSWER, pauses={0: 60})
    backend = backends.make(server)
    cancel = threading.Event()
    t0 = time.monotonic()
    run = run_lab(backend, BenchPlan((16,), 3, 1), cancel, progress=lambda *_: cancel.set())
    assert run.cancelled and time.monotonic() - t0 < 10


def test_connecting_to_a_server_that_hangs_can_be_cancelled(server: FakeOpenAI) -> None:
    server.stall_models = True
    cancel = threading.Event()
    ref = RemoteModelRef(Endpoint("lab", server.base_url), MODEL)
    failure: list[BaseException] = []

    def connect() -> None:
        try:
            load_for_bench(ref, BenchPlan((16,), 3, 1), cancel)
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=connect)
    worker.start()
    wait_for_request(server, "/v1/models")
    cancel.set()
    worker.join(10)
    assert not worker.is_alive() and isinstance(failure[0], LoadCancelled)


def test_a_stream_cut_short_is_an_error_not_a_sample(server: FakeOpenAI, backends: Backends) -> None:
    server.stream(ANSWER, cut_after=2)  # two tokens, then the connection drops
    with pytest.raises(GenerationError, match="connection broke"):
        run_lab(backends.make(server), BenchPlan((16,), 3, 1))


def test_an_unreachable_server_says_so() -> None:
    ref = RemoteModelRef(Endpoint("gone", f"http://127.0.0.1:{free_port()}/v1", connect_timeout_s=2), MODEL)
    with pytest.raises(RemoteUnreachable, match="gone"):
        load_for_bench(ref, BenchPlan((16,), 3, 1))


@pytest.fixture
def connections(tmp_path: Path, server: FakeOpenAI) -> Iterator[object]:
    from ember_chat.engine.storage.connections import Connection, ConnectionStore

    store = ConnectionStore(tmp_path / "connections.json")
    store.save(Connection("lab", server.base_url, default_model=MODEL, models=(MODEL,)))
    yield store


def test_the_benchmark_window_measures_a_remote_model(
    qtbot: object, tmp_path: Path, server: FakeOpenAI, connections: object
) -> None:
    server.stream(ANSWER)
    (tmp_path / "models").mkdir()
    dialog = bench_dialog(qtbot, tmp_path, tmp_path / "models", connections)
    items = [dialog.models.item(i) for i in range(dialog.models.count())]
    remote = next(it for it in items if it.data(Qt.ItemDataRole.UserRole) == f"remote:lab/{MODEL}")
    assert remote.text() == f"{MODEL} — lab"
    run_bench(qtbot, dialog, {f"remote:lab/{MODEL}"}, "16,32", 3)
    assert dialog.status.text() == "Done." and dialog.table.rowCount() == 2
    assert dialog.table.item(0, 0).text() == f"{MODEL} — lab" and dialog.table.item(0, 6).text() == "—"
    assert [s.name() for s in dialog.prefill_chart.series()] == [f"{MODEL} — lab"]
    dialog.close()


def test_the_benchmark_window_says_when_a_server_is_gone(qtbot: object, tmp_path: Path) -> None:

    from ember_chat.engine.storage.connections import Connection, ConnectionStore

    store = ConnectionStore(tmp_path / "connections.json")
    store.save(Connection("gone", f"http://127.0.0.1:{free_port()}/v1", default_model=MODEL))
    (tmp_path / "models").mkdir()
    dialog = bench_dialog(qtbot, tmp_path, tmp_path / "models", store)
    run_bench(qtbot, dialog, {f"remote:gone/{MODEL}"}, "16", 3)
    assert dialog.status.text().startswith("The benchmark stopped:") and "gone" in dialog.status.text()
    assert dialog.run_button.isEnabled()
    dialog.close()


def test_closing_the_window_mid_prompt_returns_at_once(
    qtbot: object, tmp_path: Path, server: FakeOpenAI, connections: object
) -> None:
    server.stream(ANSWER, pauses={0: 60})  # a server busy on the prompt for a minute
    (tmp_path / "models").mkdir()
    dialog = bench_dialog(qtbot, tmp_path, tmp_path / "models", connections)
    items = [dialog.models.item(i) for i in range(dialog.models.count())]
    next(it for it in items if it.data(Qt.ItemDataRole.UserRole) == f"remote:lab/{MODEL}").setCheckState(
        Qt.CheckState.Checked
    )
    dialog.start()
    wait_for_request(server)
    t0 = time.monotonic()
    dialog.close()  # stops the run and joins its worker
    assert time.monotonic() - t0 < 10 and not dialog.running


def test_esc_stops_a_run_and_one_benchmark_window_runs_at_a_time(
    qtbot: QtBot, server: FakeOpenAI, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    from ember_chat.engine.storage.connections import Connection, ConnectionStore

    server.stream(ANSWER, pauses={0: 60})  # a server busy on the prompt for a minute
    ConnectionStore(paths.connections_file).save(Connection("lab", server.base_url, MODEL, models=(MODEL,)))
    w = make_window()
    w.models.open_benchmark()
    lab = w.models.benchmark
    items = [lab.models.item(i) for i in range(lab.models.count())]
    next(it for it in items if it.data(Qt.ItemDataRole.UserRole) == f"remote:lab/{MODEL}").setCheckState(
        Qt.CheckState.Checked
    )
    lab.start()
    wait_for_request(server)
    w.models.open_benchmark()  # while it runs: the same window, brought to the front
    assert w.models.benchmark is lab and lab.running
    lab.activateWindow()  # Esc goes to the window the user is in (in the main window it stops the chat)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is lab, timeout=5000)
    with qtbot.waitSignal(lab.run_finished, timeout=10_000):
        qtbot.keyClick(lab, Qt.Key.Key_Escape)  # hides it: the run stops too
    assert not lab.isVisible() and lab.status.text().startswith("Cancelled")
    w.models.open_benchmark()  # nothing running: a fresh window
    assert w.models.benchmark is not lab
