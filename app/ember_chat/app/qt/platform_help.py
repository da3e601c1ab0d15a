"""When Qt cannot load its xcb platform plugin (Linux, X11), say which packages it needs: Qt's own
error names none of them (issue 16, item 20). The same line is in the README's install section."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QMessageLogContext, QtMsgType, qInstallMessageHandler

XCB_LIBRARIES = (
    "libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-randr0 "
    "libxcb-shape0 libxcb-xinerama0 libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1 libdbus-1-3"
)
XCB_APT_LINE = f"sudo apt-get install {XCB_LIBRARIES}"


def xcb_help() -> str:
    """What `ember-chat` prints after Qt's message when the xcb plugin did not load."""
    text = (
        "ember: Qt could not load its X11 (xcb) platform plugin. On Debian or Ubuntu it needs these "
        f"libraries:\n{XCB_APT_LINE}"
    )
    if not os.environ.get("DISPLAY"):
        text += "\nember: no X display is set (DISPLAY): run Ember in a desktop session, or inside xvfb-run."
    return text


class PlatformFailureWatch:
    """Watches Qt's messages while the QApplication is made: Qt prints them as before, and when the xcb
    plugin fails to load (a fatal message follows and Qt aborts), the help line is printed first."""

    def __init__(self, write: Callable[[str], Any] | None = None) -> None:
        self._write = write or (lambda text: (sys.stderr.write(text + "\n"), sys.stderr.flush()))
        self._xcb_failed = False

    def __enter__(self) -> PlatformFailureWatch:
        qInstallMessageHandler(self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        qInstallMessageHandler(None)  # Qt's own handler again

    def _handle(self, mode: QtMsgType, context: QMessageLogContext, message: str) -> None:
        category = context.category if context is not None else None
        self._write(f"{category}: {message}" if category and category != "default" else message)
        if 'platform plugin "xcb"' in message:
            self._xcb_failed = True
        if mode == QtMsgType.QtFatalMsg and self._xcb_failed:
            self._write(xcb_help())  # Qt aborts when this returns
