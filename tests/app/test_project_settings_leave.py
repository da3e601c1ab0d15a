"""Project settings left with changes not saved (Esc, Cancel, the window's close button, another project's
settings opened, the main window closed) asks first — Discard / Keep editing — the one way the dialog is
left; with nothing typed it closes at once. Its project gone underneath (deleted, made a plain folder), it
closes and says the changes were dropped. Real window, real keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from ember_chat.app.projects.dialog import ProjectSettingsDialog
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.projects_window import WAIT_MS, settings_dialog

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def _asked(dialog: ProjectSettingsDialog) -> QMessageBox:
    box = dialog.leaving
    assert box is not None and box.isVisible() and "“Thesis” have changes not saved" in box.text()
    assert sorted(b.text() for b in box.buttons()) == ["Discard", "Keep editing"]
    assert box.defaultButton().text() == "Keep editing"
    return box


def _click(box: QMessageBox, text: str) -> None:
    next(b for b in box.buttons() if b.text() == text).click()


def test_leaving_project_settings_with_changes_not_saved_asks_first(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    store = ProjectStore(w.store)
    thesis, other = store.create("Thesis"), store.create("Other")
    w.chats.reload_conversations()
    w.projects.open_settings(thesis.folder_id)
    dialog = settings_dialog(w)
    dialog.instructions.setFocus()
    qtbot.keyClicks(dialog.instructions, "Answer as my supervisor would.")
    cancel = dialog.buttons.button(dialog.buttons.StandardButton.Cancel)

    # Esc asks; Keep editing (its Esc too) keeps the dialog and what was typed
    dialog.activateWindow()  # (as a click on it makes it: Esc is the window's Stop answer while the window is)
    qtbot.waitUntil(dialog.isActiveWindow, timeout=WAIT_MS)
    qtbot.keyClick(dialog.instructions, Qt.Key.Key_Escape)
    box = _asked(dialog)
    qtbot.keyClick(box, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: dialog.leaving is None, timeout=WAIT_MS)
    assert dialog.isVisible() and dialog.instructions.toPlainText() == "Answer as my supervisor would."

    # Cancel asks; the window's close button asks
    cancel.click()
    _click(_asked(dialog), "Keep editing")
    qtbot.waitUntil(lambda: dialog.leaving is None, timeout=WAIT_MS)
    assert not dialog.close() and dialog.isVisible()
    _click(_asked(dialog), "Keep editing")
    qtbot.waitUntil(lambda: dialog.leaving is None, timeout=WAIT_MS)

    # another project's settings asked for: the same question; Discard opens them, nothing saved — also
    # when they are asked for while the question of a Cancel is up
    cancel.click()
    _asked(dialog)
    w.projects.open_settings(other.folder_id)
    _click(_asked(dialog), "Discard")
    qtbot.waitUntil(lambda: not shiboken6.isValid(dialog), timeout=WAIT_MS)
    assert settings_dialog(w).folder_id == other.folder_id
    assert store.project(thesis.folder_id).instructions == ""

    # Discard on Cancel closes it, nothing saved; nothing typed: Esc closes at once, unasked
    settings_dialog(w).discard()
    w.projects.open_settings(thesis.folder_id)
    dialog = settings_dialog(w)
    dialog.name.setText("Thesis 2")
    dialog.buttons.button(dialog.buttons.StandardButton.Cancel).click()
    _click(_asked(dialog), "Discard")
    qtbot.waitUntil(lambda: w.projects.settings_dialog is None, timeout=WAIT_MS)
    assert store.project(thesis.folder_id).name == "Thesis"
    w.projects.open_settings(thesis.folder_id)
    dialog = settings_dialog(w)
    qtbot.waitUntil(dialog.isActiveWindow, timeout=WAIT_MS)
    qtbot.keyClick(dialog.name, Qt.Key.Key_Escape)
    assert dialog.leaving is None
    qtbot.waitUntil(lambda: w.projects.settings_dialog is None, timeout=WAIT_MS)


def test_the_window_closing_asks_and_a_project_gone_says_its_changes_were_dropped(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    store = ProjectStore(w.store)
    thesis, trip = store.create("Thesis"), store.create("Trip")
    w.chats.reload_conversations()
    w.projects.open_settings(thesis.folder_id)
    dialog = settings_dialog(w)
    dialog.instructions.setPlainText("Answer as my supervisor would.")

    # the main window closing asks; Keep editing keeps the window open, and the dialog with what was typed
    assert not w.close() and w.isVisible()
    _click(_asked(dialog), "Keep editing")
    qtbot.waitUntil(lambda: dialog.leaving is None, timeout=WAIT_MS)
    assert (
        w.isVisible() and dialog.isVisible() and dialog.instructions.toPlainText() == "Answer as my supervisor would."
    )

    # its project deleted from the chat list meanwhile: the dialog closes and says what was dropped, beside
    # the banner's sentence and its Undo (not covered over)
    w.chats.organise.delete_folder(thesis.folder_id)
    question = w.chats.chat_question
    assert isinstance(question, QMessageBox)
    next(b for b in question.buttons() if b.text() == "Delete project").click()
    qtbot.waitUntil(lambda: not shiboken6.isValid(dialog), timeout=WAIT_MS)
    note = w.projects.dropped_note
    assert note is not None and note.isVisible()
    assert note.text() == "The project “Thesis” was deleted; the changes not saved in its settings were dropped."
    assert "Thesis" in w.banner.text() and w.undo.link.isVisible()
    assert QApplication.activeModalWidget() is None  # (the note blocks nothing: the Undo can be clicked)
    note.button(QMessageBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: w.projects.dropped_note is None, timeout=WAIT_MS)

    # nothing typed: it closes unasked and says nothing; made a plain folder with changes: said so
    w.projects.open_settings(trip.folder_id)
    settings_dialog(w).name.setText("Trip to Lisbon")
    w.projects.unmake(trip.folder_id, confirmed=True)
    qtbot.waitUntil(lambda: w.projects.settings_dialog is None, timeout=WAIT_MS)
    note = w.projects.dropped_note
    assert note is not None and note.text().startswith("“Trip” is a plain folder again; the changes not saved")
    note.button(QMessageBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: w.projects.dropped_note is None, timeout=WAIT_MS)

    # the window closing again: Discard closes it, nothing saved
    w.undo.undo_last()
    qtbot.waitUntil(lambda: store.is_project(thesis.folder_id), timeout=WAIT_MS)
    w.projects.open_settings(thesis.folder_id)
    dialog = settings_dialog(w)
    dialog.icon.setText("🎓")
    assert not w.close()
    _click(_asked(dialog), "Discard")
    qtbot.waitUntil(lambda: not w.isVisible(), timeout=WAIT_MS)
    assert store.project(thesis.folder_id).icon == "" and w.projects.dropped_note is None
