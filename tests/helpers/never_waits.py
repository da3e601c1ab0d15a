"""What the GUI-never-waits tests measure the window with: a heartbeat on the GUI thread, a keychain that hangs."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from keyring.backend import KeyringBackend
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.file_keyring import FileTestKeyring

HANG_S = 10.0  # how long a "hung" call blocks at most (the old code waited this long, then failed)
PROMPT_S = 1.0  # a call that must not wait returns well within this
WAIT_MS = 10_000


def timed(call: Callable[[], Any]) -> float:
    t0 = time.monotonic()
    call()
    return time.monotonic() - t0


class Heartbeat:
    """A GUI-thread timer: it beats only while the event loop runs."""

    def __init__(self) -> None:
        self.beats = 0
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._beat)
        self.timer.start()

    def _beat(self) -> None:
        self.beats += 1

    def keeps_beating(self, qtbot: QtBot, n: int = 5) -> None:
        start = self.beats
        qtbot.waitUntil(lambda: self.beats >= start + n, timeout=WAIT_MS)


class HangingKeyring(KeyringBackend):
    """The test keychain, but every call waits for `release` first (a keychain waiting to be unlocked)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release
        self.entered = threading.Event()
        self.inner = FileTestKeyring()

    def _wait(self) -> None:
        self.entered.set()
        self.release.wait(HANG_S)

    def get_password(self, service: str, username: str) -> str | None:
        self._wait()
        return self.inner.get_password(service, username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self._wait()
        self.inner.set_password(service, username, password)

    def delete_password(self, service: str, username: str) -> None:
        self._wait()
        self.inner.delete_password(service, username)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_cleanly(w: MainWindow) -> None:
    """Close the window (promptly) and join what it left running (the hung calls were released)."""
    assert timed(w.close) < PROMPT_S
    assert w.join_background(10)
