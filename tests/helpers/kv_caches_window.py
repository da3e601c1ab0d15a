"""The conversation caches tests' window and its Settings page."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ember_chat.app.main import build_window
from ember_chat.app.models.kv_caches import KvCachesDialog
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths


def _open(qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]) -> MainWindow:
    w = build_window(paths)
    qtbot.addWidget(w)
    w.show()
    windows.append(w)
    return w


def _dialog(qtbot: QtBot, w: MainWindow) -> KvCachesDialog:
    """Settings ▸ Conversation caches…, as the user opens it; its usage counted."""
    (settings,) = [a.menu() for a in w.menuBar().actions() if a.text() == "&Settings"]
    (entry,) = [a for a in settings.actions() if a.text() == "&Conversation caches…"]
    with qtbot.waitSignal(w.kv_caches.usage_known, timeout=10_000):
        entry.trigger()
    dialog = w.kv_caches.dialog
    assert dialog is not None and dialog.isVisible()
    return dialog
