"""A long conversation is fitted to the context in a few renders, not one per dropped turn (issue 27,
item 8: a 400-turn request took 27 s to get its 400, re-rendering and re-tokenizing itself once per
dropped turn on the engine thread, and a cancel could not stop it).

Renders are counted with a wrapper around the chat template's `render` (no wall-clock assertion): an
API client that did not opt into trimming gets its 400 after the whole conversation was rendered once;
one that did, and the window, keep the newest turns that fit — exactly those, checked
against the prompt with one more turn — in O(log turns) renders; a cancel stops the fitting."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.errors import HistoryTooLong
from ember_chat.engine.inference.prompt.fitting import cut_points
from ember_chat.engine.inference.prompt.templates import JinjaTemplate
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.inference.service.requests import GenerationRequest
from tests.helpers.api_support import WAIT_S
from tests.helpers.runtime_support import loaded
from tests.helpers.sinks import RecordingSink
from tests.helpers.window import load, send, set_max_tokens

# fixtures from tests/helpers/api_support.py and tests/app/test_app.py

TURNS = 400


def long_history(turns: int = TURNS) -> list[dict[str, Any]]:
    """A system prompt, `turns` questions and answers, a last question: each turn fits a 256-token
    context alone, a dozen of them do not."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        history.append({"role": "user", "content": f"question {i}: hello world, the café"})
        history.append({"role": "assistant", "content": f"answer {i}: the world is naïve"})
    history.append({"role": "user", "content": "and now?"})
    return history


def log_bound(turns: int) -> int:
    """Renders allowed: the whole conversation, its last turn, then a doubling and a halving search."""
    return 2 + 2 * math.ceil(math.log2(turns + 1))


class Renders:
    """Every chat template render (on whichever thread): the messages it was given."""

    def __init__(self) -> None:
        self.calls: list[list[ChatMessage]] = []
        self.on_render: Callable[[int], None] = lambda _n: None
        self._lock = threading.Lock()

    def add(self, messages: list[ChatMessage]) -> None:
        with self._lock:
            self.calls.append(list(messages))
            n = len(self.calls)
        self.on_render(n)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> Renders:
    counter = Renders()
    original = JinjaTemplate.render

    def counting(self: JinjaTemplate, messages: list[ChatMessage], *args: Any, **kwargs: Any) -> str:
        counter.add(messages)
        return original(self, messages, *args, **kwargs)

    monkeypatch.setattr(JinjaTemplate, "render", counting)
    return counter


def assert_the_newest_that_fit(
    model: Path, n_ctx: int, messages: list[ChatMessage], dropped: int, max_tokens: int
) -> None:
    """Leaving out `dropped` messages keeps the newest turns that fit: the prompt without them fits,
    the prompt with the turn before them does not."""
    cuts = cut_points(messages)
    head = messages[: cuts[0]]
    start = cuts[0] + dropped
    assert start in cuts[1:], "the kept history starts with a user message"
    params = SamplingParams(temperature=0, max_tokens=max_tokens)
    with loaded(model, n_ctx=n_ctx) as rt:
        assert rt.chat_prompt(head + messages[start:], params, trim=False).dropped == 0
        previous = max(c for c in cuts if c < start)
        with pytest.raises(HistoryTooLong):
            rt.chat_prompt(head + messages[previous:], params, trim=False)


# ----- the API


def test_a_long_conversation_gets_its_400_after_one_render(client: openai.OpenAI, renders: Renders) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=long_history(), max_tokens=8)  # type: ignore[arg-type]
    assert info.value.code == "context_length_exceeded"
    assert "trim_history" in str(info.value.message) and "512" in str(info.value.message)
    assert len(renders.calls) == 1  # the whole conversation (its last turn alone was rendered too before)
    assert len(renders.calls[0]) == len(long_history())


def test_trimming_keeps_the_newest_turns_in_log_renders(
    client: openai.OpenAI, renders: Renders, tiny_model: Path
) -> None:
    response = client.chat.completions.create(
        model="tiny", messages=long_history(), max_tokens=8, temperature=0,  # type: ignore[arg-type]
        extra_body={"ember": {"trim_history": True}},
    )  # fmt: skip
    assert response.choices[0].finish_reason in ("stop", "length")
    dropped = (response.model_extra or {})["ember"]["dropped_messages"]
    assert len(renders.calls) <= log_bound(TURNS)  # (one render per dropped turn before: ~390)
    full = renders.calls[0]
    assert len(full) == 2 * TURNS + 2
    assert_the_newest_that_fit(tiny_model, 512, full, dropped, max_tokens=8)


def test_a_cancel_stops_the_fitting(tiny_service: EngineService, renders: Renders) -> None:
    """Cancelled while its first render runs (a client gone, Stop in the window): no more renders."""
    sink = RecordingSink()
    messages = [ChatMessage(m["role"], m["content"]) for m in long_history()]
    request = GenerationRequest(SamplingParams(max_tokens=8), sink, messages=messages, client="api")
    renders.on_render = lambda n: tiny_service.cancel(request.id) if n == 1 else None
    tiny_service.submit(request)
    assert sink.done.wait(WAIT_S)
    assert sink.reason == StopReason.CANCELLED
    assert len(renders.calls) == 1


# ----- the window


def test_the_window_keeps_the_newest_turns_and_says_so(
    qtbot: QtBot, make_window: Callable[..., MainWindow], renders: Renders, tiny_model: Path
) -> None:
    w = make_window()
    w.side.params.context.setValue(256)
    load(qtbot, w)
    set_max_tokens(w, 8)
    chat = w.store.create_conversation("A long chat")
    parent = None
    for m in long_history(150)[1:-1]:
        parent = w.store.add_message(chat.id, m["role"], m["content"], parent_id=parent).id
    w.chats.open_conversation(chat.id)
    renders.reset()
    with qtbot.waitSignal(
        w.controller.notice, check_params_cb=lambda text: "oldest messages were left out" in text, timeout=60_000
    ) as notice:
        send(qtbot, w, "and now?")
    found = re.search(r"the (\d+) oldest messages were left out", str(notice.args[0]))
    assert found is not None
    assert len(renders.calls) <= log_bound(150)
    assert_the_newest_that_fit(tiny_model, 256, renders.calls[0], int(found.group(1)), max_tokens=8)
