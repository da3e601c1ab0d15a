"""The engine service: request ids, per-request cancel, the fair bounded queue, loads, live metrics
from the same computation as the final record, and a clean shutdown."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import QueueFull
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.service.engine import (
    EngineService,
    GenerationRequest,
    QueueState,
    ServiceListener,
)
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.gguf_factory import TinySpec, says, write_tiny_model
from tests.helpers.sinks import RecordingSink

WAIT_S = 10


class Loads(ServiceListener):
    def __init__(self) -> None:
        self.gate = threading.Event()
        self.failed: list[str] = []
        self.model: ModelDescription | None = None
        self.order: list[int] = []

    def loaded(self, model: ModelDescription) -> None:
        self.model = model
        self.gate.set()

    def load_failed(self, message: str) -> None:
        self.failed.append(message)
        self.gate.set()

    def queue_changed(self, state: QueueState) -> None:
        if state.running is not None and (not self.order or self.order[-1] != state.running.id):
            self.order.append(state.running.id)


@pytest.fixture
def service_with(request: pytest.FixtureRequest) -> Iterator[Any]:
    services: list[EngineService] = []

    def make(backend: FakeBackend, queue_limit: int = 8) -> tuple[EngineService, Loads]:
        svc = EngineService(lambda _ref: backend, queue_limit=queue_limit)
        services.append(svc)
        listener = Loads()
        svc.add_listener(listener)
        svc.load(LoadConfig(Path("fake.gguf")), alias="fake")
        assert listener.gate.wait(WAIT_S) and listener.model is not None
        return svc, listener

    yield make
    for svc in services:
        svc.close()
        assert not svc.running


def chat(client: str = "window", max_tokens: int = 50) -> tuple[GenerationRequest, RecordingSink]:
    sink = RecordingSink()
    req = GenerationRequest(
        SamplingParams(max_tokens=max_tokens), sink, messages=[ChatMessage("user", "hi")], client=client, batch_s=0
    )
    return req, sink


def test_ids_results_and_live_metrics_match_the_record(service_with: Any) -> None:
    svc, _ = service_with(FakeBackend(n_tokens=200, rate=2000))
    assert svc.model_alias == "fake" and svc.model is not None and svc.model.name == "Fake"
    req, sink = chat(max_tokens=200)
    req.snapshot_s = 0.0  # a live snapshot per token
    rid = svc.submit(req)
    assert rid == req.id > 0
    assert sink.done.wait(WAIT_S)
    assert sink.reason == "length" and sink.final is not None
    assert "".join(sink.text).startswith("Ember streams")
    last = sink.snapshots[-1]
    # one computation: the last live snapshot counts the tokens the same way as the record
    assert last["output_tokens"] in (sink.final.output_tokens, sink.final.output_tokens - 1)
    assert sink.final.output_tokens == 200
    assert set(last) >= {"ttft_s", "decode_tokens_per_s", "elapsed_s", "context_used", "n_ctx"}
    record = svc.recent[-1]
    assert record.id == rid and record.reason == "length" and record.metrics == sink.final


def test_cancel_one_request_leaves_the_others(service_with: Any) -> None:
    svc, _ = service_with(FakeBackend(n_tokens=100_000, delay_s=0.002))
    first, s1 = chat(max_tokens=100_000)
    second, s2 = chat("api", max_tokens=30)
    third, s3 = chat("api", max_tokens=30)
    svc.submit(first)
    svc.submit(second)
    svc.submit(third)
    assert s1.first_token.wait(WAIT_S)
    svc.cancel(second.id)  # queued: dropped without running
    assert s2.done.wait(WAIT_S) and s2.reason == "cancelled" and s2.text == []
    assert not s1.done.is_set()
    svc.cancel(first.id)  # running: stops within a token
    assert s1.done.wait(WAIT_S) and s1.reason == "cancelled"
    assert s3.done.wait(WAIT_S) and s3.reason == "length"  # the other one ran to its end
    svc.cancel(first.id)  # cancelling a finished request is harmless
    assert [r.reason for r in list(svc.recent)[-3:]] == ["cancelled", "cancelled", "length"]


def test_queue_is_bounded_and_fair(service_with: Any) -> None:
    svc, listener = service_with(FakeBackend(n_tokens=100_000, delay_s=0.001), queue_limit=4)
    blocker, sb = chat("api", max_tokens=100_000)
    svc.submit(blocker)
    assert sb.first_token.wait(WAIT_S)
    api = [chat("api", max_tokens=5) for _ in range(3)]
    for req, _ in api:
        svc.submit(req)
    window, sw = chat("window", max_tokens=5)
    svc.submit(window)
    with pytest.raises(QueueFull, match="waiting"):
        svc.submit(chat("api")[0])
    state = svc.queue_state()
    assert state.running is not None and state.running.id == blocker.id
    assert state.count("api") == (1, 3) and state.count("window") == (0, 1)
    svc.cancel(blocker.id)
    assert sw.done.wait(WAIT_S) and all(s.done.wait(WAIT_S) for _, s in api)
    # round-robin between client kinds: the window's request runs right after the running one,
    # not after the three API requests queued before it
    order = listener.order
    assert order.index(window.id) == order.index(blocker.id) + 1


def test_load_failure_is_data_and_generation_without_model_fails_cleanly(tmp_path: Path) -> None:
    svc = EngineService()  # the real factory: a missing file is a clear load error
    failures: list[str] = []
    done = threading.Event()

    class L(ServiceListener):
        def load_failed(self, message: str) -> None:
            failures.append(message)
            done.set()

    svc.add_listener(L())
    try:
        svc.load(LoadConfig(tmp_path / "missing.gguf"))
        assert done.wait(WAIT_S) and "missing.gguf" in failures[0]
        req, sink = chat()
        svc.submit(req)
        assert sink.done.wait(WAIT_S) and sink.reason == "error"
        assert sink.failures and sink.failures[0][1] == "NoModelLoaded"
    finally:
        svc.close()
    assert not svc.running


def test_close_cancels_running_and_queued_and_joins(service_with: Any) -> None:
    svc, _ = service_with(FakeBackend(n_tokens=1_000_000, delay_s=0.001))
    running, s1 = chat(max_tokens=1_000_000)
    queued, s2 = chat("api")
    svc.submit(running)
    svc.submit(queued)
    assert s1.first_token.wait(WAIT_S)
    svc.close()
    assert not svc.running
    assert s1.reason == "cancelled" and s2.reason == "cancelled"
    with pytest.raises(QueueFull):
        svc.submit(chat()[0])


def test_live_and_final_counts_agree_when_the_model_ends_its_turn(tmp_path: Path) -> None:
    """The end-of-generation token is not part of the answer, for the live view and the record alike."""
    # a scripted model: three tokens, then the end of its turn
    model = write_tiny_model(tmp_path / "ends.gguf", TinySpec(script=says("▁hello", "▁world", "!", "</s>")))
    svc = EngineService()
    listener = Loads()
    svc.add_listener(listener)
    try:
        svc.load(LoadConfig(model, n_ctx=512, threads=1))
        assert listener.gate.wait(WAIT_S) and listener.model is not None
        sink = RecordingSink()
        req = GenerationRequest(SamplingParams(temperature=2.0, seed=1, max_tokens=400), sink, prompt="hi",
                                batch_s=0, snapshot_s=0)  # fmt: skip
        svc.submit(req)
        assert sink.done.wait(WAIT_S) and sink.final is not None
        assert sink.reason == "stop" and "".join(sink.text) == " hello world!"
        assert sink.final.output_tokens == 3
        assert sink.snapshots[-1]["output_tokens"] == sink.final.output_tokens
        assert sink.final.context_used == sink.final.prompt_tokens + sink.final.output_tokens
    finally:
        svc.close()
