"""Quitting while an answer streams keeps all of it as far as it went, like Stop does: its text to the
last token the engine made, its model name and its metrics line, and a Continue link. Real window and
store, a fake endless engine."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.transcript import anchors
from tests.helpers.window import start_endless_answer


def test_an_answer_cut_by_quitting_keeps_its_text_model_and_metrics(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = start_endless_answer(qtbot, make_window)
    cid = w.controller.conversation_id
    w.close()  # while it streams
    answer = w.store.thread(cid)[-1]
    assert answer.role == "assistant" and answer.content
    assert answer.metrics is not None, "no metrics: the answer was left unfinished"
    assert answer.metrics["model"] == w.controller.model_name
    assert answer.metrics["output_tokens"] == len(answer.content.split())  # every token made is kept
    w.store.close()  # as the app does after the window: nothing the answer's end started reads it later
    qtbot.wait(50)
    w2 = make_window()
    w2.conversations.list.activated.emit(w2.conversations.index_of(cid))
    text = w2.transcript.plain_text()
    assert answer.metrics["model"] in text and "tok/s" in text  # its header and its metrics line
    assert any(a.href == f"ember:continue/{answer.id}" for a in anchors(w2.transcript))  # its Continue link
    # no model loaded yet: Continue and Regenerate say so (and change nothing)
    for verb in ("continue", "regenerate"):
        w2.banner.hide()
        w2.transcript.action.emit(verb, answer.id, 0)
        assert "No model is loaded" in w2.banner.text() and w2.banner.isVisible()
    assert w2.store.thread(cid)[-1].content == answer.content
