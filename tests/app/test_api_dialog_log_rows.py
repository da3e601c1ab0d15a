"""Issue 28, item 15: Settings ▸ Local API server's log of recent requests shows several rows with the
server on (its address and curl command above it left the table two rows tall), and the dialog stays
on the screen; what is above the log scrolls when the screen is small."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.api_dialog import start_server
from tests.helpers.fake_backend import FakeBackend

ROWS = 6


def test_the_request_log_shows_several_rows_with_the_server_on(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    dialog = start_server(qtbot, w, key="sesame")
    qtbot.waitUntil(dialog.curl.isVisible, timeout=5_000)
    QApplication.processEvents()
    table = dialog.table
    rows_in_view = table.viewport().height() // table.verticalHeader().defaultSectionSize()
    assert rows_in_view >= ROWS, (rows_in_view, table.height())
    assert dialog.screen().availableGeometry().contains(dialog.frameGeometry())
    # the address and the command above it are shown whole, or can be scrolled to
    assert dialog.curl.isVisible() and dialog.copy_curl.isVisible()
    dialog.close()
