"""The queue bound is per client kind: waiting API requests can fill their side of the queue, but the
window's Send is never refused; and the window submits before it saves an empty streaming answer,
so a refusal (only when Ember is shutting down) leaves nothing half-saved."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import QueueFull
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.sinks import RecordingSink
from tests.helpers.window import ANSWER_TIMEOUT, load

WAIT_S = 10.0
API_BOUND = 3


def request(client: str) -> tuple[GenerationRequest, RecordingSink]:
    sink = RecordingSink()
    req = GenerationRequest(
        SamplingParams(max_tokens=3), sink, messages=[ChatMessage("user", "hi")], client=client, batch_s=0
    )
    return req, sink


class Gated:
    """A FakeBackend whose every generation pauses after its first token until `gate` is set."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.backend = FakeBackend(n_tokens=3)
        self.backend.on_token = lambda i: i == 0 and self.gate.wait(WAIT_S)


def fill_api_side(service: EngineService, gate: Gated) -> list[RecordingSink]:
    """One API request running (paused on the gate) and API_BOUND more waiting: the API side is full."""
    running, sink = request("api")
    service.submit(running)
    assert sink.first_token.wait(WAIT_S)
    sinks = [sink]
    for _ in range(API_BOUND):
        req, s = request("api")
        service.submit(req)
        sinks.append(s)
    assert service.queue_state().count("api") == (1, API_BOUND)
    return sinks


@pytest.fixture
def gated_service() -> Iterator[tuple[EngineService, Gated]]:
    gated = Gated()
    service = EngineService(lambda _ref: gated.backend, queue_limit=API_BOUND)
    load_blocking(service, LoadConfig(Path("fake.gguf")))
    try:
        yield service, gated
    finally:
        gated.gate.set()
        service.close()
        assert not service.running


def test_window_is_accepted_when_the_api_side_is_at_its_bound(gated_service: tuple[EngineService, Gated]) -> None:
    service, gated = gated_service
    api_sinks = fill_api_side(service, gated)
    window, window_sink = request("window")
    window_id = service.submit(window)  # never refused: the user pressed Send
    assert window_id > 0
    with pytest.raises(QueueFull, match="waiting"):
        service.submit(request("api")[0])  # the API side stays bounded as before
    assert service.queue_state().count("window") == (0, 1)
    gated.gate.set()
    assert window_sink.done.wait(WAIT_S) and window_sink.reason == "length"
    assert all(s.done.wait(WAIT_S) and s.reason == "length" for s in api_sinks)


def test_window_send_with_the_api_side_full_starts_the_answer(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    gated = Gated()
    w = make_window(lambda _ref: gated.backend)
    try:
        load(qtbot, w, "tiny.gguf")
        service = w.bridge.service
        service.queue_limit = API_BOUND
        api_sinks = fill_api_side(service, gated)
        assert w.controller.send("hello while the API is busy")
        assert w.controller.generating
        roles = [m.role for m in w.store.thread(w.controller.conversation_id)]
        assert roles == ["user", "assistant"]
        with qtbot.waitSignal(
            w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT
        ):
            gated.gate.set()
        answer = w.store.thread(w.controller.conversation_id)[-1]
        assert answer.role == "assistant" and answer.complete and answer.content
        assert all(s.done.wait(WAIT_S) for s in api_sinks)
    finally:
        gated.gate.set()


def test_a_refused_send_saves_nothing(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    load(qtbot, w, "tiny.gguf")
    w.bridge.service.close()  # shutting down: the one refusal the window can still get
    errors: list[str] = []
    w.controller.error.connect(errors.append)
    assert not w.controller.send("this cannot be answered")
    assert errors and "shutting down" in errors[-1]
    assert not w.controller.generating
    assert w.controller.conversation_id is None  # the chat it would have started is not left behind
    assert w.store.conversations() == []
    # in an open chat: neither the question nor an empty answer stays
    chat = w.store.create_conversation("Open chat")
    w.controller.conversation_id = chat.id
    assert not w.controller.send("again")
    assert w.store.messages(chat.id) == []
