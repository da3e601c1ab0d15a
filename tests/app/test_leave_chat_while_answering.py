"""Opening another chat (or a new one) while an answer streams stops that answer — and says so, naming
the chat left behind; what it wrote is kept. Real window, a fake endless engine."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.window import ANSWER_TIMEOUT, start_endless_answer


@pytest.mark.parametrize("where", ["another chat", "a new chat"])
def test_leaving_a_chat_while_it_answers_says_the_answer_stopped(
    qtbot: QtBot, make_window: Callable[..., MainWindow], where: str
) -> None:
    w = start_endless_answer(qtbot, make_window)
    a = w.controller.conversation_id
    assert a is not None
    other = w.store.create_conversation("Other chat")
    w.chats.reload_conversations()
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        if where == "another chat":
            w.chats.open_conversation(other.id)
        else:
            w.chats.new_chat()
    qtbot.waitUntil(lambda: w.controller.conversation_id == (other.id if where == "another chat" else None))
    text = w.banner.text()
    assert w.banner.isVisible() and "stopped" in text and "“tell me everything”" in text, text
    answer = w.store.thread(a)[-1]
    assert answer.role == "assistant" and answer.content and answer.metrics["stop_reason"] == "cancelled"


def test_leaving_an_idle_chat_says_nothing(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = start_endless_answer(qtbot, make_window)
    a = w.controller.conversation_id
    assert a is not None
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.controller.stop()
    w.banner.hide()
    w.chats.new_chat()
    assert not w.banner.isVisible()


def test_a_search_result_in_the_answering_chat_says_the_answer_stopped(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = start_endless_answer(qtbot, make_window)
    a = w.controller.conversation_id
    assert a is not None
    question = w.store.thread(a)[0]
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.chats.open_hit(a, question.id)
    text = w.banner.text()
    assert w.banner.isVisible() and "stopped to show that message" in text and "“tell me everything”" in text
