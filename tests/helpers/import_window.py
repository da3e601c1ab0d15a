"""Importing chats through the window's Import dialog, as a user does."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from pytestqt.qtbot import QtBot

from ember_chat.app.importing.dialog import ImportChats
from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.paths import TESTS


def choose(qtbot: QtBot, w: MainWindow, path: Path) -> ImportChats:
    """File ▸ Import chats…, then the file picked in its dialog."""
    (action,) = [a for a in w.menuBar().findChildren(QAction) if a.text().replace("&", "") == "Import chats…"]
    action.trigger()
    importer = w.findChild(ImportChats)
    assert importer is not None
    qtbot.waitUntil(lambda: importer.file_dialog is not None and importer.file_dialog.isVisible(), timeout=5000)
    importer.file_dialog.selectFile(str(path))
    importer.file_dialog.accept()
    return importer


def imported_and_opened(qtbot: QtBot, w: MainWindow, path: Path) -> int:
    """File ▸ Import chats of a file holding one chat, then the banner's Open; the chat's id."""
    importer = choose(qtbot, w, path)
    with qtbot.waitSignal(importer.finished, timeout=20_000) as done:
        pass
    ((chat),) = done.args[0].imported
    qtbot.mouseClick(w.banner.action_button, Qt.MouseButton.LeftButton)
    assert w.controller.conversation_id == chat.id
    return chat.id


HOSTILE = TESTS / "hostile"
