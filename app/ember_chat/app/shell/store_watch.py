"""The window notices chats changed by another process (issue 28): `ember-chat chats import`, `chats rm`
or a second Ember write the same SQLite file, and the chat list kept showing what it read before until
something in the window reloaded it.

SQLite's `PRAGMA data_version` (ConversationStore.data_version) changes only when another connection
committed to the file, so reading it is how the window tells "changed elsewhere" from its own writes
(which reload what they changed already). It is read on a timer while the window is shown (every tick
while it is the active window, every IDLE_EVERY-th tick while another window is in front: a terminal
beside it), and at once when the window becomes active (the user comes back from the terminal). A
change reloads the chat list as the store has it now: the rows follow their chats, so the selection, the
open chat and the message box's draft stay as they were. A tick while another thread holds the store
(an import's batch) asks again at the next one instead of waiting on the GUI thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

from ember_chat.engine.storage.conversations import ConversationStore

TICK_MS = 1000  # a PRAGMA on the store's own connection: nothing is read from the file
IDLE_EVERY = 5  # ticks between reads while another window is in front


class StoreWatch(QObject):
    """Reads the store's data version while `window` is shown; calls `reload` when another process
    committed to it since the last read."""

    def __init__(self, window: QWidget, store: ConversationStore, reload: Callable[[], None]) -> None:
        super().__init__(window)
        self.window = window
        self.store = store
        self._reload = reload
        self._ticks = 0
        self.timer = QTimer(self)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)
        self._seen = self._version(wait=True)
        window.installEventFilter(self)
        if window.isVisible():
            self.timer.start()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.window:
            kind = event.type()
            if kind == QEvent.Type.Show:
                self.timer.start()
                self.check()
            elif kind == QEvent.Type.Hide:  # (closed or minimised: nothing to keep up to date on screen)
                self.timer.stop()
            elif kind == QEvent.Type.WindowActivate:
                self.check()
        return False

    def _tick(self) -> None:
        self._ticks += 1
        if self.window.isActiveWindow() or self._ticks % IDLE_EVERY == 0:
            self.check()

    def check(self) -> bool:
        """Reload when another process changed the store since the last read; whether it did."""
        now = self._version(wait=False)
        if now is None or now == self._seen:
            return False
        changed = self._seen is not None
        self._seen = now
        if changed:
            self._reload()
        return changed

    def _version(self, *, wait: bool) -> int | None:
        try:
            return self.store.data_version(wait=wait)
        except sqlite3.ProgrammingError:  # the store was closed (the window quits): nothing more to watch
            self.timer.stop()
            return None
        except sqlite3.Error:  # (busy, or damaged: the window's own reads say so; try at the next tick)
            return None
