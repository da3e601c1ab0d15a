"""Settings ▸ Conversation caches… opens (each time) with the focus on the Settings window's list of sections:
a key typed at once (the user still typing, or Enter) does not change the disk space the caches may take (0
would delete them all)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import SettingsFile
from tests.helpers.kv_caches_window import _dialog, _open


@pytest.fixture
def windows(window_list: list[MainWindow]) -> list[MainWindow]:
    """The windows a test opens, closed at teardown: tests/app/conftest.py's window_list."""
    return window_list


@pytest.fixture
def paths(bare_paths: AppPaths) -> AppPaths:
    """An empty data folder: tests/app/conftest.py's bare_paths."""
    return bare_paths


def test_the_dialog_opens_with_the_focus_on_close_and_typed_keys_leave_the_cap(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    dialog = _dialog(qtbot, w)
    settings = dialog.window()  # the Settings window, at its Conversation caches page
    assert settings is w.settings_window
    qtbot.waitUntil(lambda: settings.focusWidget() is settings.list)  # its list of sections, not the cap
    qtbot.keyClicks(settings.focusWidget(), "0")
    assert dialog.cap.value() == 2048 and SettingsFile(paths.settings_file).load().kv_snapshot_cap_mb == 2048
    qtbot.mouseClick(settings.close_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.isVisible())
    # opened again after the user had left the focus in the disk-space box: on the list again
    dialog = _dialog(qtbot, w)
    dialog.cap.setFocus()
    dialog.reject()
    qtbot.waitUntil(lambda: not dialog.isVisible())
    assert _dialog(qtbot, w) is dialog  # (the same dialog, shown again)
    qtbot.waitUntil(lambda: settings.focusWidget() is settings.list)
