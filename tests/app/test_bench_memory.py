"""The benchmark lab's peak memory is per model (sampled around and during each model's measurement,
not the process's lifetime maximum), the lab imports without the Unix-only `resource` module, and a
measurement through the engine service is an exclusive job: chat and API requests wait while it
runs, and the run's facts say it had the engine alone."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.bench.lab import BenchPlan, measure_model
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import LoadCancelled
from ember_chat.engine.inference.service.engine import (
    EngineService,
    GenerationRequest,
    QueueState,
)
from tests.helpers.bench_lab import run_bench
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.paths import REPO
from tests.helpers.sinks import RecordingSink
from tests.helpers.window import load

WAIT_S = 60.0
PLAN = BenchPlan((8,), 2, 1)
BALLAST = 256 * 1024 * 1024
ROOT = REPO


def test_lab_imports_without_the_resource_module() -> None:
    probe = (
        "import sys\n"
        "sys.modules['resource'] = None  # as on Windows: importing it fails\n"
        "import ember_chat.engine.bench.lab\n"
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_each_model_measured_in_one_process_gets_its_own_peak(tiny_model: Path) -> None:
    ballast: list[bytes] = []

    def grow(done: int, _total: int, _what: str) -> None:
        if done == 1 and not ballast:  # while the first model is measured, the process holds 256 MB more
            ballast.append(b"\x01" * BALLAST)

    big = measure_model(LoadConfig(tiny_model, n_ctx=256, threads=1), PLAN, progress=grow)
    assert ballast, "the first measurement never reported progress"
    ballast.clear()  # a "smaller" model next: the memory is given back before it is measured
    small = measure_model(LoadConfig(tiny_model, n_ctx=256, threads=1), PLAN)
    (big_point,) = big.points
    (small_point,) = small.points
    assert big_point.peak_rss_bytes is not None and small_point.peak_rss_bytes is not None
    # the second model's own peak, not the process's lifetime maximum (which still includes the ballast)
    assert small_point.peak_rss_bytes < big_point.peak_rss_bytes - BALLAST // 2
    assert big_point.peak_rss_bytes >= big.machine["rss_before_load_bytes"] + BALLAST
    assert small_point.peak_rss_bytes >= small.machine["rss_before_load_bytes"]


def chat(client: str) -> tuple[GenerationRequest, RecordingSink]:
    sink = RecordingSink()
    req = GenerationRequest(SamplingParams(max_tokens=3), sink, messages=[ChatMessage("user", "hi")], client=client)
    return req, sink


@pytest.fixture
def chat_service() -> Iterator[tuple[EngineService, FakeBackend]]:
    """A service with a fake chat model loaded (the one a window would have)."""
    backend = FakeBackend(n_tokens=3)
    service = EngineService(lambda _ref: backend)
    load_blocking(service, LoadConfig(Path("fake.gguf")))
    try:
        yield service, backend
    finally:
        service.close()
        assert not service.running


def test_measuring_through_the_service_has_the_engine_alone(
    chat_service: tuple[EngineService, FakeBackend], tiny_model: Path
) -> None:
    from ember_chat.engine.bench.lab import measure_exclusively

    service, _ = chat_service
    waiting: list[tuple[GenerationRequest, RecordingSink]] = []
    during: list[QueueState] = []

    def progress(done: int, _total: int, _what: str) -> None:
        if not waiting:  # on the engine thread, mid-run: a chat and an API request arrive
            waiting.extend([chat("window"), chat("api")])
            for req, _sink in waiting:
                service.submit(req)
        during.append(service.queue_state())

    run = measure_exclusively(service, LoadConfig(tiny_model, n_ctx=256, threads=1), PLAN, progress=progress)
    assert run.machine["exclusive"] is True and run.machine["resident_model"] == "Fake"
    assert run.points and run.points[0].peak_rss_bytes
    # while the lab ran, the chat and the API request waited; neither had started
    assert during and all(s.running is not None and s.running.client == "bench" for s in during)
    assert all(s.count("window") == (0, 1) and s.count("api") == (0, 1) for s in during)
    for _req, sink in waiting:
        assert sink.done.wait(WAIT_S) and sink.reason == "length"  # then they ran
    assert service.queue_state() == QueueState(None, ())


def test_a_waiting_measurement_is_dropped_at_once_when_cancelled(
    chat_service: tuple[EngineService, FakeBackend], tiny_model: Path
) -> None:
    from ember_chat.engine.bench.lab import measure_exclusively

    service, backend = chat_service
    gate = threading.Event()
    backend.on_token = lambda i: i == 0 and gate.wait(WAIT_S)  # a chat answer holds the engine
    req, sink = chat("window")
    service.submit(req)
    assert sink.started_event.wait(WAIT_S)
    cancel = threading.Event()
    outcome: list[BaseException] = []

    def measure() -> None:
        try:
            measure_exclusively(service, LoadConfig(tiny_model, n_ctx=256, threads=1), PLAN, cancel)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=measure)
    worker.start()
    cancel.set()  # the dialog closed while the lab waited for the answer to end
    worker.join(WAIT_S)
    try:
        assert not worker.is_alive(), "the cancelled measurement waited for the running answer"
        assert len(outcome) == 1 and isinstance(outcome[0], LoadCancelled)
        assert not sink.done.is_set()  # the answer was not disturbed
    finally:
        gate.set()
    assert sink.done.wait(WAIT_S) and sink.reason == "length"


def test_the_window_benchmark_runs_as_an_exclusive_job(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    load(qtbot, w, "tiny.gguf")  # a chat model is loaded (the fake one)
    w.models.open_benchmark()
    dialog = w.models.benchmark
    try:
        run_bench(qtbot, dialog, {"tiny.gguf"}, "8", 2)
        assert dialog.status.text() == "Done.", dialog.status.text()
        (run,) = dialog.runs
        assert run.machine["exclusive"] is True and run.machine["resident_model"] == "Fake"
        saved = sorted((w.data_dir / "benchmarks").glob("*.json"))
        assert json.loads(saved[-1].read_text())["machine"]["exclusive"] is True
    finally:
        dialog.close()
