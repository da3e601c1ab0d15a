"""The Project settings dialog in the real window, as the projects' window tests drive it: the one open,
and a wait for the indexing run under way (and the state the dialog reads after it)."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ember_chat.app.projects.dialog import ProjectSettingsDialog
from ember_chat.app.shell.main_window import MainWindow

WAIT_MS = 30_000


def settings_dialog(w: MainWindow) -> ProjectSettingsDialog:
    """The Project settings dialog open (and shown)."""
    dialog = w.projects.settings_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def indexed(qtbot: QtBot, w: MainWindow, folder_id: int) -> None:
    """Wait for the run under way (or about to start) to end, then for the dialog's state to be read."""
    k = w.projects.indexing
    qtbot.waitUntil(lambda: not k.running(folder_id) and not w.tasks.busy, timeout=WAIT_MS)  # (and the state read)
