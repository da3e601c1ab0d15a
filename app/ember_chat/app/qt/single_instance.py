"""One Ember per data folder: a second launch brings the running window to the front instead of
opening a second writer on the same chat database.

A `QLockFile` in the data folder says who owns it (a lock left by a killed process is recognised as
stale and taken over); a `QLocalServer` named after the folder lets the second launch ask the first
to show itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QWidget


def server_name(data_dir: Path) -> str:
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return f"ember-chat-{digest}"


class SingleInstance(QObject):
    activated = Signal()  # another launch asked this window to come to the front

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        data_dir.mkdir(parents=True, exist_ok=True)
        self.name = server_name(data_dir)
        self.lock = QLockFile(str(data_dir / "ember.lock"))
        self.lock.setStaleLockTime(0)  # never expire a live owner's lock by age; a dead owner's is stale
        self.server: QLocalServer | None = None

    def acquire(self) -> bool:
        """True: this is the only Ember on this data folder (now listening for later launches).
        False: another one runs; it has been asked to show its window."""
        if not self.lock.tryLock(0):
            self._ask_running_instance()
            return False
        QLocalServer.removeServer(self.name)  # a socket file left by a killed process
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._on_connection)
        self.server.listen(self.name)
        return True

    def _ask_running_instance(self) -> None:
        """Connecting is the whole message: "show your window"."""
        socket = QLocalSocket()
        socket.connectToServer(self.name)
        if socket.waitForConnected(1000):
            socket.disconnectFromServer()

    def _on_connection(self) -> None:
        assert self.server is not None
        while (conn := self.server.nextPendingConnection()) is not None:
            conn.abort()
            conn.deleteLater()
            self.activated.emit()

    def release(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self.lock.unlock()


def bring_to_front(window: QWidget) -> None:
    """Another launch of Ember asked for this window (SingleInstance.activated)."""
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()
