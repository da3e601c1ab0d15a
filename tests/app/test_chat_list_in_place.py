"""A message sent in a chat changes that chat's row in place (issue 29 item 8): the list is not laid out
again, row by row, for each message saved; the chat moves to the top of its group with its new time."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import QAbstractItemModel
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import send


def sixty_chats(w: MainWindow) -> list[int]:
    """Sixty chats of one question each, listed; their ids, oldest first."""
    ids = []
    for i in range(60):
        c = w.store.create_conversation(f"chat {i}")
        w.store.add_message(c.id, "user", f"question {i}")
        ids.append(c.id)
    w.chats.reload_conversations()
    return ids


def changes(model: QAbstractItemModel) -> list[str]:
    """What the model says it did to its rows, as it says it (filled as it happens)."""
    seen: list[str] = []
    model.layoutChanged.connect(lambda *_: seen.append("layout"))
    model.modelReset.connect(lambda: seen.append("reset"))
    model.rowsMoved.connect(lambda *_: seen.append("moved"))
    model.rowsInserted.connect(lambda *_: seen.append("inserted"))
    model.rowsRemoved.connect(lambda *_: seen.append("removed"))
    return seen


def test_a_message_in_an_older_chat_moves_its_row_without_rebuilding_the_list(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow]
) -> None:
    w = make_loaded_window(FakeBackend(n_tokens=8))
    ids = sixty_chats(w)
    oldest = ids[0]
    w.chats.open_conversation(oldest)
    QApplication.processEvents()
    lst = w.chats.conversations
    assert lst.chat_ids() == ids[::-1]
    before = w.chats._listed[oldest].updated_at
    seen = changes(lst.model)

    send(qtbot, w, "one more question")

    assert seen == ["moved"]  # (before: a new layout of all 60 rows at the Send and again at the answer's end)
    assert lst.chat_ids() == [oldest, *ids[:0:-1]]
    assert w.chats._listed[oldest].updated_at > before
    assert lst.selected_ids() == [oldest]
    assert lst.list.currentIndex() == lst.index_of(oldest)


def test_a_message_in_the_newest_chat_leaves_the_list_as_it_is(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = make_loaded_window(FakeBackend(n_tokens=8))
    ids = sixty_chats(w)
    newest = ids[-1]
    w.chats.open_conversation(newest)
    QApplication.processEvents()
    lst = w.chats.conversations
    before = w.chats._listed[newest].updated_at
    built = []
    monkeypatch.setattr(lst.model, "set_tree", lambda *a: built.append(a))

    send(qtbot, w, "one more question")

    assert built == []  # (before: the tree built again from every chat at the Send and at the answer's end)
    assert lst.chat_ids() == ids[::-1]
    assert w.chats._listed[newest].updated_at > before
    assert w.chats._order[0] == w.store.chat_rows([newest])[0]
    assert lst.selected_ids() == [newest]


def test_a_new_chats_first_message_adds_its_row_without_rebuilding_the_list(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow]
) -> None:
    w = make_loaded_window(FakeBackend(n_tokens=8))
    ids = sixty_chats(w)
    w.chats.new_chat()
    QApplication.processEvents()
    lst = w.chats.conversations
    seen = changes(lst.model)

    send(qtbot, w, "a new question")

    new = w.controller.conversation_id
    assert seen == ["inserted"]  # (before: a new layout of every row)
    assert lst.chat_ids() == [new, *ids[::-1]]
    assert lst.row_texts()[0] == "a new question"
    assert lst.selected_ids() == [new]
