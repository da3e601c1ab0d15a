"""The Settings window opened from the main window, and its sections."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow

if TYPE_CHECKING:
    from ember_chat.app.shell.settings_window import SettingsWindow


SECTIONS = [
    "Appearance", "Models", "Connections", "Presets", "Tools", "Local API server", "Backups", "Conversation caches",
    "Voice",
]  # fmt: skip


def _menu(w: MainWindow, title: str) -> QMenu:
    return next(a.menu() for a in w.menuBar().actions() if a.text() == title)


def _entry(w: MainWindow, menu: str, text: str) -> QAction:
    return next(a for a in _menu(w, menu).actions() if a.text() == text)


def _open(qtbot: QtBot, w: MainWindow) -> SettingsWindow:
    _entry(w, "&Settings", "&Settings…").trigger()
    sw = w.settings_window
    qtbot.waitExposed(sw)
    sw.activateWindow()  # (offscreen, an activation asked before the window was exposed is lost)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is sw)  # keys go to it, not to the main window's
    return sw
