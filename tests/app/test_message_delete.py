"""Deleting a message in the real window (issue 19): its Delete action removes it and what follows it
in its branch, without a question; Ctrl+Z and the banner's Undo bring the same messages back (same
ids) and the open chat shows them again. Real SQLite file."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.conversations import ConversationStore
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.transcript import anchors, click
from tests.helpers.window import ANSWER_TIMEOUT, load, set_max_tokens


def _chat(w: MainWindow) -> list[int]:
    conv = w.store.create_conversation("Four messages")
    ids, parent = [], None
    for role, text in (("user", "first question"), ("assistant", "first answer"),
                       ("user", "second question"), ("assistant", "second answer")):  # fmt: skip
        parent = w.store.add_message(conv.id, role, text, parent_id=parent).id
        ids.append(parent)
    w.chats.reload_conversations()
    w.chats.open_conversation(conv.id)
    return ids


def _delete_link(w: MainWindow, message_id: int) -> object:
    return next(a for a in anchors(w.transcript) if a.href == f"ember:delete/{message_id}")


def test_the_delete_action_removes_a_message_and_what_follows_and_undo_brings_them_back(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    q1, a1, q2, a2 = _chat(w)
    cid = w.controller.conversation_id
    assert "second answer" in w.transcript.plain_text()
    click(qtbot, w.transcript, _delete_link(w, a1))  # a real click on the answer's Delete icon
    assert QApplication.activeModalWidget() is None  # no question: it is undoable
    assert [m.id for m in w.store.thread(cid)] == [q1]
    text = w.transcript.plain_text()
    assert "first question" in text and "first answer" not in text and "second question" not in text
    assert w.banner.text() == "Deleted 3 messages." and w.undo.link.isVisible()

    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    w.conversations.list.setFocus()
    qtbot.keyClick(w.conversations.list, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert [m.id for m in w.store.thread(cid)] == [q1, a1, q2, a2]  # the same ids, the same leaf
    assert "second answer" in w.transcript.plain_text()  # the open chat shows them again
    assert w.banner.text() == "Undone: Deleted 3 messages."
    w.close()
    reopened = ConversationStore(w.store.path)
    try:
        assert [m.content for m in reopened.thread(cid)][-1] == "second answer"
    finally:
        reopened.close()


def test_the_last_message_deleted_then_the_banner_undo(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    q1, a1, q2, a2 = _chat(w)
    cid = w.controller.conversation_id
    click(qtbot, w.transcript, _delete_link(w, a2))
    assert [m.id for m in w.store.thread(cid)] == [q1, a1, q2]
    assert w.banner.text() == "Deleted a message."
    assert "second answer" not in w.transcript.plain_text()
    w.undo.link.linkActivated.emit("undo")
    assert [m.id for m in w.store.thread(cid)] == [q1, a1, q2, a2]
    assert "second answer" in w.transcript.plain_text()
    assert not w.undo.link.isVisible() or w.banner.text().startswith("Undone")


def test_deleting_the_answer_being_written_stops_it_first(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=1_000_000, delay_s=0.001))
    load(qtbot, w)
    set_max_tokens(w, 1_000_000)
    w.composer.editor.setPlainText("go on forever")
    with qtbot.waitSignal(w.controller.streamed, timeout=ANSWER_TIMEOUT):
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    cid = w.controller.conversation_id
    question, answer = w.store.thread(cid)
    with qtbot.waitSignal(w.controller.generating_changed, timeout=ANSWER_TIMEOUT):
        w.controller._on_action("delete", answer.id, 0)  # the verb, as the transcript's link sends it
    qtbot.waitUntil(lambda: [m.id for m in w.store.thread(cid)] == [question.id], timeout=ANSWER_TIMEOUT)
    assert not w.controller.generating and "go on forever" in w.transcript.plain_text()
    w.undo.undo_last()
    restored = w.store.thread(cid)
    assert [m.id for m in restored] == [question.id, answer.id]
    assert restored[-1].metrics["stop_reason"] == "cancelled"  # the answer as it was when it stopped
