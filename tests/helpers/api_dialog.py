"""The window's API server started from its dialog, as a user does."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.peer_servers import free_port

WAIT_MS = 30_000


def start_server(qtbot: QtBot, w: MainWindow, key: str = "") -> object:
    dialog = w.api.open_dialog()
    dialog.enabled.setChecked(True)
    dialog.port.setValue(free_port())
    dialog.key.setText(key)
    dialog.remove_key.setChecked(not key)  # (a key an earlier test stored is not wanted)
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS) as applied:  # the keychain: off the GUI thread
        dialog.apply()
    assert applied.args == [True] and w.api.running
    return dialog
