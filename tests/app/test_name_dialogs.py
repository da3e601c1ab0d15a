"""A name of spaces only never closes a name dialog silently (New project…, New folder, Rename folder,
Rename chat): its OK button is disabled, its tooltip says why, Enter leaves the dialog open with what was
typed and nothing is made or renamed; a name typed then makes it. Real window, real keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox, QInputDialog, QLineEdit
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.records import ProjectStore

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def _refuses_spaces_then_takes_a_name(qtbot: QtBot, dialog: QInputDialog | None, name: str) -> None:
    """Spaces typed and Enter: the dialog stays, OK disabled and saying why; then `name` typed and Enter."""
    assert isinstance(dialog, QInputDialog) and dialog.isVisible()
    field = dialog.findChild(QLineEdit)
    ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
    field.selectAll()
    qtbot.keyClicks(field, "   ")
    qtbot.keyClick(field, Qt.Key.Key_Return)
    assert dialog.isVisible() and field.text() == "   "
    assert not ok.isEnabled() and ok.toolTip() == "Type a name first: spaces alone are not one."
    qtbot.keyClicks(field, name)
    assert ok.isEnabled() and ok.toolTip() == ""
    qtbot.keyClick(field, Qt.Key.Key_Return)
    assert not dialog.isVisible()


def test_a_name_of_spaces_only_keeps_each_name_dialog_open_and_says_why(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    organise = w.store.organise

    w.projects.new_project()  # Chat ▸ New project…
    dialog = w.projects.question
    assert isinstance(dialog, QInputDialog) and dialog.isVisible()
    ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
    assert not ok.isEnabled()  # (empty at first: nothing to make yet)
    qtbot.keyClick(dialog.findChild(QLineEdit), Qt.Key.Key_Return)
    assert dialog.isVisible() and organise.folders() == []
    _refuses_spaces_then_takes_a_name(qtbot, dialog, "Thesis")
    assert [p.name for p in ProjectStore(w.store).projects()] == ["Thesis"]  # (typed after the spaces: trimmed)
    w.projects.settings_dialog.reject()  # (its settings opened)

    w.chats.organise.new_folder()  # New folder
    _refuses_spaces_then_takes_a_name(qtbot, w.chats.chat_question, "Trips")
    trips = next(f for f in organise.folders() if f.name == "Trips")

    w.chats.organise.rename_folder(trips.id)  # Rename folder: pre-filled with its name
    dialog = w.chats.chat_question
    assert isinstance(dialog, QInputDialog) and dialog.textValue() == "Trips"
    _refuses_spaces_then_takes_a_name(qtbot, dialog, "Journeys")
    assert organise.folder(trips.id).name == "Journeys"
    assert sorted(f.name for f in organise.folders()) == ["Journeys", "Thesis"]

    chat = w.store.create_conversation("Plans")
    w.chats.reload_conversations()
    w.chats.rename_chat(chat.id)  # Rename chat: the same
    _refuses_spaces_then_takes_a_name(qtbot, w.chats.chat_question, "Summer plans")
    assert w.store.conversation(chat.id).title == "Summer plans"
