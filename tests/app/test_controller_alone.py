"""The ChatController without a window: the fake backend behind a real bridge, a real chat store on
disk, and no widget. What the views would show is what its signals say (issue 15: it emits view
signals instead of driving the transcript and the metrics panel)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.conversation.controller import ChatController
from ember_chat.app.engine_link.bridge import EngineBridge
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.storage.conversations import ConversationStore
from tests.helpers.fake_backend import WORDS, FakeBackend

WAIT_MS = 30_000
VIEW_SIGNALS = (
    "thread_shown", "jump_requested", "thinking_toggled", "stream_began", "stream_resumed", "stream_appended",
    "stream_ended", "metrics_began", "metrics_live", "metrics_prefill", "metrics_finished", "generating_changed",
    "streamed", "error", "notice", "conversations_changed",
)  # fmt: skip


def fake_text(n: int) -> str:
    """What FakeBackend says in n tokens."""
    return "".join(WORDS[i % len(WORDS)] + ("\n\n" if i % 80 == 79 else "") for i in range(n))


class Alone:
    """A controller, its bridge and store, and every signal it emitted, in order."""

    def __init__(self, backend: FakeBackend, store: ConversationStore, max_tokens: int) -> None:
        self.backend = backend
        self.store = store
        self.bridge = EngineBridge(EngineService(lambda _ref: backend))
        params = SamplingParams(max_tokens=max_tokens)
        self.controller = ChatController(store, self.bridge, lambda: (params, "Be brief."))
        self.log: list[tuple[str, tuple[object, ...]]] = []
        for name in VIEW_SIGNALS:
            getattr(self.controller, name).connect(lambda *args, n=name: self.log.append((n, args)))

    def names(self) -> list[str]:
        return [name for name, _ in self.log]

    def args(self, name: str) -> list[tuple[object, ...]]:
        return [args for n, args in self.log if n == name]


@pytest.fixture
def alone(qtbot: QtBot, tmp_path: Path) -> Iterator[Callable[..., Alone]]:
    made: list[Alone] = []
    store = ConversationStore(tmp_path / "chats.sqlite3")

    def make(backend: FakeBackend, max_tokens: int = 100) -> Alone:
        a = Alone(backend, store, max_tokens)
        made.append(a)
        with qtbot.waitSignal(a.bridge.loaded, timeout=WAIT_MS):
            a.bridge.load(LoadConfig(Path("fake.gguf")), alias="fake")
        a.controller.model_ready = True
        a.controller.model_name = "Fake"
        return a

    yield make
    for a in made:
        a.bridge.close()
    store.close()


def test_a_send_shows_the_question_then_streams_the_answer_and_saves_it(
    qtbot: QtBot, alone: Callable[..., Alone]
) -> None:
    a = alone(FakeBackend(n_tokens=30))
    c = a.controller
    with qtbot.waitSignal(c.generating_changed, timeout=WAIT_MS, check_params_cb=lambda on: not on):
        assert c.send("Hello there")
        # at once: the question shown, the empty answer begun, the metrics reset, the chat listed
        cid = c.conversation_id
        assert cid is not None and c.generating
        assert a.names() == [
            "thread_shown",
            "stream_began",
            "metrics_began",
            "generating_changed",
            "conversations_changed",
        ]
        ((messages, branches),) = a.args("thread_shown")
        assert [(m.role, m.content) for m in messages] == [("user", "Hello there")] and branches == {}
        ((answer_id, model),) = a.args("stream_began")
        assert model == "Fake" and a.store.message(answer_id).role == "assistant"
        assert a.args("generating_changed") == [(True,)]
    # the answer streamed, in order and complete, then ended with its metrics line
    text = fake_text(30)
    assert "".join(t for (t,) in a.args("stream_appended")) == text
    counts = [n for (n,) in a.args("streamed")]
    assert counts == sorted(counts) and counts[-1] == 30
    assert a.names().index("stream_appended") < a.names().index("stream_ended")
    ((finished, itl),) = a.args("metrics_finished")
    assert isinstance(finished, GenerationMetrics) and finished.output_tokens == 30 and len(itl) == 29
    ((ended_text, summary, reason),) = a.args("stream_ended")
    assert ended_text == text and reason == "length" and isinstance(summary, str) and "30" in summary
    assert a.names()[-2:] == ["conversations_changed", "generating_changed"]
    assert a.args("generating_changed") == [(True,), (False,)] and not c.generating
    assert a.args("error") == [] and a.args("stream_resumed") == []
    assert a.args("metrics_live")  # the live figures while it streamed
    # saved: the question and its answer; the system prompt went to the engine, not the chat
    assert [(m.role, m.content) for m in a.store.thread(cid)] == [("user", "Hello there"), ("assistant", text)]
    assert [(m.role, m.content) for m in a.backend.requests[0]] == [("system", "Be brief."), ("user", "Hello there")]


def test_no_model_no_send_and_the_views_are_told_nothing_but_why(alone: Callable[..., Alone]) -> None:
    a = alone(FakeBackend(n_tokens=3))
    a.controller.model_ready = False
    assert not a.controller.send("Anyone?")
    assert a.names() == ["error"] and "No model is loaded" in str(a.args("error")[0][0])
    assert a.controller.conversation_id is None and a.store.conversations() == []


def test_stop_ends_the_stream_keeps_what_came_and_runs_what_waited(qtbot: QtBot, alone: Callable[..., Alone]) -> None:
    a = alone(FakeBackend(n_tokens=100_000, rate=500), max_tokens=100_000)
    c = a.controller
    with qtbot.waitSignal(c.streamed, timeout=WAIT_MS):
        assert c.send("Go on and on")
    cid = c.conversation_id
    assert cid is not None
    ran: list[bool] = []
    with qtbot.waitSignal(c.generating_changed, timeout=WAIT_MS, check_params_cb=lambda on: not on):
        c.after_stop(lambda: ran.append(c.generating))  # stops the answer, runs once it has ended
        assert ran == [] and c.generating
    assert ran == [False]
    streamed = "".join(t for (t,) in a.args("stream_appended"))
    assert streamed and len(streamed) < len(fake_text(100_000))
    ((finished, _itl),) = a.args("metrics_finished")
    assert finished is not None and finished.stop_reason == "cancelled"
    # the stream ends in place (no new thread shown), saying it was stopped; what streamed is the answer
    ((ended_text, summary, reason),) = a.args("stream_ended")
    assert ended_text == streamed and reason == "cancelled" and "stopped" in str(summary)
    assert a.args("thread_shown") == a.args("thread_shown")[:1]  # only the question, at the send
    answer = a.store.thread(cid)[-1]
    assert answer.role == "assistant" and answer.content == streamed
    assert a.names()[-2:] == ["conversations_changed", "generating_changed"]
    assert a.args("error") == []


def test_opening_a_chat_shows_its_thread_and_jumps_to_a_message(alone: Callable[..., Alone]) -> None:
    a = alone(FakeBackend(n_tokens=3))
    conv = a.store.create_conversation("Kept", system_prompt="", params={})
    question = a.store.add_message(conv.id, "user", "Where?", parent_id=None)
    a.controller.open_conversation(conv.id, jump_to=question.id)
    assert a.names() == ["thread_shown", "jump_requested"]
    assert [m.id for m in a.args("thread_shown")[0][0]] == [question.id]  # type: ignore[attr-defined]
    assert a.args("jump_requested") == [(question.id,)]
    a.controller.open_conversation(None)
    assert a.log[-1] == ("thread_shown", ([], {}))
