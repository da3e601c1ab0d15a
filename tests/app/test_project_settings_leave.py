"""Project settings left with changes not saved (Esc, Cancel, the window's close button, another project's
settings opened) asks first — Discard / Keep editing — the one way the dialog is left; with nothing typed
it closes at once. Real window, real keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
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
