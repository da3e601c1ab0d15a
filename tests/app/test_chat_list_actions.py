"""The chat list's controllers (app/chat_list/: ChatActions, ChatExports, ChatOrganise, UndoActions) have
no back-reference to the main window (issue 29): each is built from the app's context and the exact
widgets and collaborators it drives, typed (no `Any`), and its module never reaches through a window
(`self.w.…`, `self.window.…`). What they do to the rest of the window goes through their signals,
which the real window connects: a new chat, opening another and deleting every chat do what they did."""

from __future__ import annotations

import typing
from collections.abc import Callable
from types import ModuleType

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.chat_list import actions, export, organise, undo
from ember_chat.app.chat_list.actions import ChatActions
from ember_chat.app.chat_list.export import ChatExports
from ember_chat.app.chat_list.organise import ChatOrganise
from ember_chat.app.chat_list.undo import UndoActions
from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.back_references import assert_built_without_the_window, assert_module_reads_no_window
from tests.helpers.chat_list import _chats

CONTROLLERS = [(ChatActions, actions), (ChatExports, export), (ChatOrganise, organise), (UndoActions, undo)]


@pytest.mark.parametrize(("cls", "module"), CONTROLLERS, ids=lambda c: getattr(c, "__name__", ""))
def test_its_constructor_does_not_take_the_window(cls: type, module: ModuleType) -> None:
    assert_built_without_the_window(cls, module)
    hint = typing.get_type_hints(cls.__init__, vars(module)).get("parent")
    assert "QMainWindow" not in repr(hint)  # (a QObject's owner, nothing read from it)


@pytest.mark.parametrize("module", [actions, export, organise, undo], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_its_module_never_reads_through_a_window(module: ModuleType) -> None:
    assert_module_reads_no_window(module)


def test_the_window_wires_them_without_handing_itself_over(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    for part in (w.chats, w.chats.exports, w.chats.organise, w.undo):
        held = [name for name, value in vars(part).items() if value is w]
        assert held in ([], ["_dialog_parent"])  # (the Qt parent its dialogs open over; nothing read from it)
    assert w.chats.ctx is w.ctx and w.chats.chat is w.controller and w.chats.conversations is w.conversations
    assert w.chats.undo is w.undo and w.chats.organise.undo is w.undo and w.undo.chat is w.controller
    assert w.chats.exports.attachments is w.attach.store


def test_a_new_chat_and_another_chat_opened_do_to_the_window_what_they_did(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Through the real window's signals: leaving a chat for another drops what the banner said about
    it and the side panel's measures; a new chat takes the new-chat defaults and the keyboard."""
    w = make_window()
    w.show()
    qtbot.waitExposed(w)
    a, b = _chats(w, ["A", "B"])
    w.chats.open_conversation(a)
    w.side.params.temperature.setValue(1.7)  # (saved with chat A)
    w.show_error("About chat A", cause="answer")
    assert w.banner.isVisible()
    w.chats.open_conversation(b)
    assert w.controller.conversation_id == b and not w.banner.isVisible()
    w.chats.new_chat()
    assert w.controller.conversation_id is None
    assert w.side.params.temperature.value() != pytest.approx(1.7)  # the new-chat defaults
    qtbot.waitUntil(w.composer.editor.hasFocus, timeout=5000)
    assert w.centre_stack.currentWidget() is w.welcome  # (no model loaded, no chat open)


def test_deleting_every_chat_closes_the_open_one_and_clears_the_undo_stack(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b = _chats(w, ["A", "B"])
    w.chats.open_conversation(a)
    w.chats.organise.trash([b])
    assert len(w.undo.stack) == 1
    w.chats.organise.delete_all(confirmed=True)
    qtbot.waitUntil(lambda: w.conversations.isEnabled() and w.store.conversations() == [], timeout=10_000)
    assert w.controller.conversation_id is None and w.undo.stack == []
    assert w.centre_stack.currentWidget() is w.welcome
