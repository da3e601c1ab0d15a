"""Issue 28, item 3: the Tools popup stays on the screen, inside the window below its title bar when there
is room, above (or below) its button, and each of its rows is drawn whole on its own: a failing server's
error was drawn under "Make the model call a tool first", the popup filled again while servers started
kept the size it had before (it ran off the bottom of a 1024×640 screen), and a tall one covered the
title bar. Many tools scroll; the box and Settings stay in view."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.tools.config import BuiltinToolsConfig, McpServerConfig, ToolsConfig
from tests.helpers.tools_window_support import (
    WAIT_MS,
    assert_placed,
    assert_rows_whole,
    global_rect,
    servers_listed,
    stdio_server,
    write_tools,
)

LEFT = Qt.MouseButton.LeftButton
popup_grab = pytest.mark.qt_log_ignore("This plugin does not support grabbing the keyboard")
# what a real server that cannot start leaves on stderr (mcp-server-time without its package): a long sentence
CRASHING = (
    "import sys; sys.stderr.write('Traceback (most recent call last): ModuleNotFoundError: No module named "
    "mcp_server_time, so the server could not start at all\\n'); sys.exit(3)"
)


@popup_grab
def test_a_failing_servers_error_has_its_own_row_and_the_popup_filled_again_stays_on_screen(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    broken = McpServerConfig("broken", command=sys.executable, args=("-c", CRASHING))
    servers = (stdio_server("notes", "normal.py"), broken)
    write_tools(paths, ToolsConfig(servers=servers, builtin=BuiltinToolsConfig(datetime=True, calculator=True)))
    w = make_window()
    button = w.tools.button
    qtbot.mouseClick(button, LEFT)  # opened while the servers start: it fills in as they list or fail
    assert button.frame.isVisible()
    qtbot.waitUntil(lambda: servers_listed(w, "notes", "broken"), timeout=WAIT_MS)
    error = w.tools.server_state("broken")[1]
    assert error and "mcp_server_time" in error

    def error_label() -> QLabel | None:
        return next((x for x in button.popup.body.findChildren(QLabel) if x.text() == error), None)

    qtbot.waitUntil(lambda: "notes/add" in button.popup.boxes and error_label() is not None, timeout=WAIT_MS)
    QApplication.processEvents()
    assert_placed(w, button)
    assert_rows_whole(button)
    label = error_label()
    assert global_rect(label).bottom() < global_rect(button.popup.require_box).top()
    button.frame.close()


@popup_grab
def test_many_tools_scroll_inside_the_window_with_the_box_and_settings_in_view(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    servers = tuple(stdio_server(f"notes{i}", "normal.py") for i in range(3))
    write_tools(paths, ToolsConfig(servers=servers, builtin=BuiltinToolsConfig(datetime=True, calculator=True)))
    w = make_window()
    w.tools.button.open_popup()  # (servers with no tools remembered start when the popup opens)
    w.tools.button.frame.close()
    qtbot.waitUntil(lambda: all(w.tools.server_entries(f"notes{i}") for i in range(3)), timeout=WAIT_MS)
    # a window in the lower half of the screen: the popup above its button has less room than its 14 tools need
    screen = w.screen().availableGeometry()
    w.setGeometry(screen.left(), screen.top() + screen.height() // 3, screen.width(), screen.height() * 2 // 3)
    qtbot.waitUntil(lambda: w.geometry().top() > screen.top() + 100, timeout=WAIT_MS)
    QApplication.processEvents()
    button = w.tools.button
    qtbot.mouseClick(button, LEFT)
    popup = button.popup
    assert len(popup.boxes) == 14
    assert_placed(w, button)
    assert_rows_whole(button)
    assert popup.scroll.verticalScrollBar().maximum() > 0  # the list scrolls
    assert popup.scroll.height() >= 120  # and shows several tools at once
    assert popup.require_box.isVisible() and popup.settings_button.isVisible()
    button.frame.close()
