"""Issue 28, item 15: Models ▸ Connections… has a Close button (only Esc and the title bar closed it); it opens
the Settings window at Connections, whose Close it is."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow


def test_the_connections_dialog_closes_with_its_close_button(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    w.models.open_connections()
    dialog = w.models.connections_dialog
    assert dialog is not None and dialog.isVisible()
    # a page of the Settings window since it has one: the window's Close closes it (the page's own is hidden)
    close = dialog.window().close_button
    assert close is w.settings_window.close_button
    assert close.isVisible() and close.accessibleName() == "Close" and close.text().replace("&", "") == "Close"
    qtbot.mouseClick(close, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5_000)
