"""Editing an earlier message borrows the message box: whatever ends the edit (Cancel, sending it, opening
another chat, a new chat) gives the box back what it held before — never the edited text and files,
which otherwise went into another chat as a new message. Real window, a fake engine, a real file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.attachments_window import FACT, send, settle
from tests.helpers.fake_backend import FakeBackend


@pytest.fixture
def make_window(make_loaded_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window with the tiny model loaded: tests/app/conftest.py's make_loaded_window."""
    return make_loaded_window


def chip_names(w: MainWindow) -> list[str]:
    return [i.chip.name_label.text() for i in w.composer.attachments.items]


def two_chats(qtbot: QtBot, w: MainWindow, tmp_path: Path) -> tuple[int, int, int]:
    """Chat A (its question has notes.txt) and chat B; A is open. (A, B, A's question id)"""
    notes = tmp_path / "notes.txt"
    notes.write_text(FACT, encoding="utf-8")
    w.composer.attach_paths([notes])
    settle(qtbot, w)
    send(qtbot, w, "What is the cat called?")
    a = w.controller.conversation_id
    question = w.store.thread(a)[-2].id
    w.chats.new_chat()
    send(qtbot, w, "Something else")
    b = w.controller.conversation_id
    w.chats.open_conversation(a)
    assert a is not None and b is not None
    return a, b, question


def editing_with_a_draft(qtbot: QtBot, w: MainWindow, tmp_path: Path) -> tuple[int, int, int]:
    """Two chats (two_chats), "my draft" in the box, then Edit on A's question: its text and file."""
    a, b, question = two_chats(qtbot, w, tmp_path)
    w.composer.editor.setPlainText("my draft")
    w.compose.edit_message(question)
    settle(qtbot, w)
    assert w.composer.editor.toPlainText() == "What is the cat called?" and chip_names(w) == ["notes.txt"]
    return a, b, question


def test_opening_another_chat_ends_the_edit_and_gives_the_draft_back(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    a, b, _question = editing_with_a_draft(qtbot, w, tmp_path)
    w.chats.open_conversation(b)
    assert w.composer.editor.toPlainText() == "my draft" and chip_names(w) == []
    assert not w.controller.editing and not w.composer.edit_banner.isVisibleTo(w.composer)
    before = len(w.store.thread(b))
    send(qtbot, w, "my draft")
    thread = w.store.thread(b)
    assert len(thread) == before + 2 and thread[-2].content == "my draft"
    assert w.attach.store.of_message(thread[-2].id) == []  # A's file did not come along
    assert len(w.store.thread(a)) == 2  # and A is as it was


def test_cancel_and_sending_the_edit_give_the_draft_back(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    a, _b, question = editing_with_a_draft(qtbot, w, tmp_path)
    w.composer.edit_banner.linkActivated.emit("#")  # its Cancel link
    assert w.composer.editor.toPlainText() == "my draft" and chip_names(w) == []
    assert not w.controller.editing
    w.compose.edit_message(question)
    settle(qtbot, w)
    send(qtbot, w, "What is the keeper's cat called?")
    edited = w.store.thread(a)[-2]
    assert edited.content == "What is the keeper's cat called?" and edited.id != question  # a branch
    assert [x.name for x in w.attach.store.of_message(edited.id)] == ["notes.txt"]
    assert w.composer.editor.toPlainText() == "my draft" and not w.controller.editing


def test_a_new_chat_ends_the_edit(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    _a, _b, question = two_chats(qtbot, w, tmp_path)
    w.compose.edit_message(question)
    settle(qtbot, w)
    w.chats.new_chat()
    assert w.composer.editor.toPlainText() == "" and chip_names(w) == [] and not w.controller.editing


def test_moving_the_edited_chat_to_the_trash_ends_the_edit(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    """The edited text went into a new chat with the next Enter."""
    w = make_window(FakeBackend(n_tokens=3))
    a, _b, _question = editing_with_a_draft(qtbot, w, tmp_path)
    w.chats.organise.trash([a])
    assert w.controller.conversation_id is None and not w.controller.editing
    assert w.composer.editor.toPlainText() == "my draft" and chip_names(w) == []
    assert not w.composer.edit_banner.isVisibleTo(w.composer)
    editor = w.composer.editor
    assert editor.textCursor().position() == len("my draft")  # typing goes on at its end
