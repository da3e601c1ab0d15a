"""The system asks Ember to end (SIGTERM: a plain `kill`, a logout, a shutdown; SIGHUP: its terminal
went away; neither on Windows, where SIGHUP does not exist): Ember quits as if its window were closed, but
without the questions that wait for an answer (no one is there at a logout), keeping what is saved — not
a crash, so the next start reloads the last model and says nothing about the run.

Python runs a signal's handler only when the interpreter gets control, which Qt's event loop may not give
it for a long while; the signal's number is written to a socket (`signal.set_wakeup_fd`) that a
`QSocketNotifier` watches, so the loop wakes at once and the ending runs on the GUI thread."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from types import FrameType

from PySide6.QtCore import QObject, QSocketNotifier

ENDING_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _noted(_signum: int, _frame: FrameType | None) -> None:
    """The handler Python runs: nothing (the wakeup socket carries the signal to the event loop)."""


def _exit_now(_signum: int, _frame: FrameType | None) -> None:
    """A signal again once the ending has saved all: the process ends now (threads left are not waited for)."""
    os._exit(0)


class SessionEnd(QObject):
    """Calls `end` on the GUI thread once one of ENDING_SIGNALS arrives (once: a second one while it
    ends changes nothing until the store is closed, then ends the process at once). `uninstall` puts the
    wakeup descriptor back, and the handlers as they were unless the session is ending."""

    def __init__(self, end: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._end = end
        self._ended = False
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._woken)
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._previous = {s: signal.signal(s, _noted) for s in ENDING_SIGNALS}

    def _woken(self) -> None:
        try:
            got = self._reader.recv(64)
        except BlockingIOError:
            return
        if self._ended or not any(n in got for n in ENDING_SIGNALS):
            return  # (another signal's byte: its own Python handler ran already)
        self._ended = True
        self._end()

    def uninstall(self) -> None:
        """Idempotent; called once the store is closed. After an ending signal, another one from here on ends
        the process at once, exit status 0 (what had to be saved is: a thread that does not end must not
        keep a `kill` from working), else the handlers are put back as they were."""
        if not self._previous:
            return
        for s, handler in self._previous.items():
            signal.signal(s, _exit_now if self._ended else handler)
        self._previous = {}
        signal.set_wakeup_fd(self._previous_fd)
        self._notifier.setEnabled(False)
        self._reader.close()
        self._writer.close()
