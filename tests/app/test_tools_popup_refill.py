"""Issue 28 (the new user's pass under Xvfb): the Tools popup opened while its servers start was an
empty grey box. Each change of the tools listed (a server starting, then running) fills the popup again
with a new one, and the new one was shown only by Qt's queued show of a widget added to a visible
window: the frame stayed empty until then, and while a server started it was filled again every few
tens of milliseconds, so on a real display it was a blank box for seconds. The popup filled again is
shown at once, in its place in the frame."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.tools.config import BuiltinToolsConfig, ToolsConfig
from tests.helpers.tools_window_support import WAIT_MS, popup_grab, servers_listed, stdio_server, write_tools


@popup_grab
def test_the_popup_filled_again_while_a_server_starts_is_never_an_empty_frame(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tools(
        paths, ToolsConfig(servers=(stdio_server("notes", "normal.py"),), builtin=BuiltinToolsConfig(calculator=True))
    )
    w = make_window()
    button = w.tools.button
    seen: list[tuple[bool, bool]] = []  # each time the popup is (re)filled: (its frame shown, the popup shown)
    button.popup_shown.connect(lambda: seen.append((button.frame.isVisible(), button.popup.isVisible())))
    button.open_popup()  # (as the click does: the servers start now, or already do)
    qtbot.waitUntil(lambda: servers_listed(w, "notes"), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "notes/add" in button.popup.boxes, timeout=WAIT_MS)
    assert len(seen) > 1  # (filled again as the server's state changed)
    assert all(popup for frame, popup in seen if frame), seen
    button.frame.close()
