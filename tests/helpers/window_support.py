"""Shared by the window tests that need no model of test_app's: a window whose Model Manager talks to
the test's own Hub (tests/app/conftest.py's `window` fixture, which needs a `hub` fixture in the test module), and the
window's local API server turned on as a user does."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.peer_servers import free_port


def start_api_in_window(qtbot: QtBot, w: MainWindow) -> str:
    """Settings ▸ Local API server: turned on at a free port and applied (which succeeds); its URL."""
    dialog = w.api.open_dialog()
    dialog.enabled.setChecked(True)
    dialog.port.setValue(free_port())
    with qtbot.waitSignal(dialog.applied, timeout=10_000) as applied:
        dialog.apply()
    assert applied.args == [True]
    dialog.close()
    return w.api.server.url
