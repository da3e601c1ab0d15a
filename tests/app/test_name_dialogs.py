"""A name of spaces only never closes a name dialog silently (New project…, New folder, Rename folder,
Rename chat): its OK button is disabled, its tooltip says why, Enter leaves the dialog open with what was
typed and nothing is made or renamed; a name typed then makes it. Real window, real keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QInputDialog, QLabel, QLineEdit
from pytestqt.qtbot import QtBot
from shiboken6 import isValid

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
    qtbot.waitUntil(lambda: w.projects.settings_dialog is not None)  # (its settings open, the name's closed)
    w.projects.settings_dialog.reject()

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


def _refuses_then_takes(qtbot: QtBot, dialog: QInputDialog | None, taken: str, said: str, name: str) -> None:
    """`taken` typed and Enter: the dialog stays with what was typed and `said` under the field; typing
    again takes the sentence away; then `name` typed and Enter closes it."""
    assert isinstance(dialog, QInputDialog) and dialog.isVisible()
    field = dialog.findChild(QLineEdit)
    error = dialog.findChild(QLabel, "nameError")
    assert error is not None and error.isHidden()
    field.selectAll()
    qtbot.keyClicks(field, taken)
    qtbot.keyClick(field, Qt.Key.Key_Return)
    assert dialog.isVisible() and field.text() == taken
    assert error.isVisible() and error.text() == said
    assert error.geometry().top() >= field.geometry().bottom()  # (under the field, above the buttons)
    assert error.height() >= error.heightForWidth(error.width())  # (the dialog grew: none of it cut off)
    assert error.textFormat() == Qt.TextFormat.PlainText  # (it names what was typed)
    field.selectAll()
    qtbot.keyClicks(field, name)
    assert error.isHidden()
    qtbot.keyClick(field, Qt.Key.Key_Return)
    assert not dialog.isVisible()


def test_a_name_another_project_has_keeps_new_project_and_rename_project_open_saying_so(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Chat ▸ New project… with the name of a project there: the dialog stays open, what was typed kept and
    the reason under the field (as in Project settings ▸ General), no banner; Rename project the same."""
    w = make_window()
    projects = ProjectStore(w.store)
    volcano = projects.create("Volcano research")
    w.chats.reload_conversations()
    said: list[str] = []
    w.ctx.notifier.show_error = said.append  # (what the banner is told: nothing here)
    taken = "There is a project named “Volcano research” already: give this one another name."

    w.projects.new_project()
    dialog = w.projects.question
    _refuses_then_takes(qtbot, dialog, "volcano research", taken, "Volcano 2")
    assert [p.name for p in projects.projects()] == ["Volcano research", "Volcano 2"]
    qtbot.waitUntil(lambda: w.projects.settings_dialog is not None)  # (its settings open, the name's closed)
    w.projects.settings_dialog.reject()

    w.chats.organise.rename_folder(volcano.folder_id)  # the chat list's Rename project…
    dialog = w.chats.chat_question
    assert isinstance(dialog, QInputDialog) and dialog.windowTitle() == "Rename project"
    again = "There is a project named “Volcano 2” already: give this one another name."
    _refuses_then_takes(qtbot, dialog, "Volcano 2", again, "Volcanoes")
    assert [p.name for p in projects.projects()] == ["Volcanoes", "Volcano 2"] and said == []

    plain = w.store.organise.create_folder("Trips")
    w.chats.reload_conversations()
    w.chats.organise.rename_folder(plain.id)  # a plain folder's is still Rename folder
    dialog = w.chats.chat_question
    assert isinstance(dialog, QInputDialog) and dialog.windowTitle() == "Rename folder"
    dialog.reject()


def test_new_folder_inside_a_subfolder_is_refused_in_its_dialog_which_stays_open(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """New folder where none can be (inside a folder that is itself inside one): the dialog stays open with
    what was typed and why under the field, no banner, nothing made; Cancel closes it."""
    w = make_window()
    organise = w.store.organise
    trips = organise.create_folder("Trips")
    inner = organise.create_folder("Alps", trips.id)
    w.chats.reload_conversations()
    said: list[str] = []
    w.ctx.notifier.show_error = said.append
    w.chats.organise.new_folder(inner.id)
    dialog = w.chats.chat_question
    assert isinstance(dialog, QInputDialog) and dialog.isVisible()
    field = dialog.findChild(QLineEdit)
    qtbot.keyClicks(field, "Huts")
    qtbot.keyClick(field, Qt.Key.Key_Return)
    error = dialog.findChild(QLabel, "nameError")
    assert dialog.isVisible() and field.text() == "Huts"
    assert error.isVisible() and error.text() == "Folders nest one level: a folder inside a folder cannot hold folders."
    assert sorted(f.name for f in organise.folders()) == ["Alps", "Trips"] and said == []
    dialog.reject()
    assert not dialog.isVisible() and sorted(f.name for f in organise.folders()) == ["Alps", "Trips"]


def test_a_chat_or_folder_gone_while_its_name_dialog_is_open_closes_it_and_says_so(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Rename chat with the chat deleted for good meanwhile (from the Trash, another window), Rename folder
    and New folder and New project inside a folder deleted meanwhile: OK closes the dialog and the banner
    says that it is gone (before, Rename chat's OK raised into the crash reporter each time and stayed
    open; the others said "This folder no longer exists" under the field on every OK)."""
    w = make_window()
    said: list[str] = []
    w.ctx.notifier.show_error = said.append
    chat = w.store.create_conversation("Plans")
    w.chats.reload_conversations()
    w.chats.rename_chat(chat.id)
    dialog = w.chats.chat_question
    assert isinstance(dialog, QInputDialog) and dialog.isVisible()
    w.store.delete_conversation(chat.id)  # (deleted for good)
    field = dialog.findChild(QLineEdit)
    field.selectAll()
    qtbot.keyClicks(field, "Summer plans")
    qtbot.keyClick(field, Qt.Key.Key_Return)
    assert not dialog.isVisible()
    assert said == ["That chat is gone: it was deleted for good, so it was not renamed."]

    organise = w.store.organise
    cases: list[tuple[Callable[[int], None], str]] = [
        (w.chats.organise.rename_folder, "That folder is gone: it was deleted, so it was not renamed."),
        (w.chats.organise.new_folder, "The folder to make it in is gone: no folder was made."),
        (lambda fid: w.projects.new_project(parent_id=fid), "The folder to make it in is gone: no project was made."),
    ]
    for ask, words in cases:
        said.clear()
        trips = organise.create_folder("Trips")
        w.chats.reload_conversations()
        ask(trips.id)
        dialog = w.chats.chat_question if w.projects.question is None else w.projects.question
        assert isinstance(dialog, QInputDialog) and dialog.isVisible()
        organise.delete_folder(trips.id)
        field = dialog.findChild(QLineEdit)
        field.selectAll()
        qtbot.keyClicks(field, "Journeys")
        qtbot.keyClick(field, Qt.Key.Key_Return)
        assert not dialog.isVisible() and said == [words]
        assert organise.folders() == [] and ProjectStore(w.store).projects() == []
    assert w.projects.settings_dialog is None


def test_new_projects_settings_open_once_its_name_dialog_has_closed_and_have_the_focus(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """New project…, a name typed and Enter: its settings open after the window-modal name dialog has
    closed (before, they opened under it, while it was still up), and the focus is in them."""
    w = make_window()
    w.show()
    qtbot.waitExposed(w)
    w.projects.new_project()
    dialog = w.projects.question
    assert isinstance(dialog, QInputDialog)
    qtbot.waitExposed(dialog)
    opened: list[bool] = []  # whether the name dialog was still up when the settings opened
    real = w.projects.open_settings
    w.projects.open_settings = lambda folder_id: (
        opened.append(isValid(dialog) and dialog.isVisible()),
        real(folder_id),
    )[1]
    qtbot.keyClicks(dialog.findChild(QLineEdit), "Thesis")
    qtbot.keyClick(dialog.findChild(QLineEdit), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: w.projects.settings_dialog is not None)
    settings = w.projects.settings_dialog
    assert opened == [False]
    qtbot.waitUntil(
        lambda: QApplication.focusWidget() is not None and settings.isAncestorOf(QApplication.focusWidget())
    )
    settings.reject()
