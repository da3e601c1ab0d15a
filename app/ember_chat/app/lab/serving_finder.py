"""The Serving tab's Find servers: the usual ports of this computer (127.0.0.1 only, never the network)
asked for a model server on a worker, as `bench serve --find` (targets.find_servers); what answered is
listed to pick from, and said. Its button, list and note sit where the panel lays them out; the one
picked is told by `picked` (its URL)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QPushButton

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.engine.bench.serving.targets import USUAL_PORTS, FoundServer, find_servers


class ServerFinder(QObject):
    picked = Signal(str)  # the base URL of the server picked in the list

    def __init__(self, tasks: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        # Servers on this computer's usual ports (bench serve --find): probed on 127.0.0.1 only
        from ember_chat.engine.serve.config import DEFAULT_PORT

        self.ports: dict[int, str] = {**USUAL_PORTS, DEFAULT_PORT: "Ember"}
        self.button = QPushButton(self.tr("Find servers"))
        self.button.setAccessibleName(self.tr("Find servers on this computer"))
        self.button.setToolTip(
            self.tr("Ask the usual ports of this computer (127.0.0.1 only, never the network) for a model server")
        )
        self.button.clicked.connect(self.find)
        self.found: list[FoundServer] = []
        self.list = QComboBox()  # what answered; picking one aims the run at it
        self.list.setAccessibleName(self.tr("Servers found"))
        self.list.setToolTip(self.tr("Pick one to load-test it"))
        self.list.activated.connect(self.use_found)
        self.list.hide()
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)  # (a server's model names are not markup)
        self.note.setAccessibleName(self.tr("What was found"))
        self.note.hide()

    def find(self) -> None:
        """Ask this computer's usual ports for a model server, on a worker (targets.find_servers: 127.0.0.1
        only); what answered is listed to pick from, and said."""
        ports = dict(self.ports)
        self.button.setEnabled(False)
        self.note.setText(self.tr("Asking 127.0.0.1 at ports {ports}…").format(ports=", ".join(map(str, ports))))
        self.note.show()
        self.tasks.run(
            lambda: find_servers(ports),
            lambda found: self._found(found, ports),
            self._find_failed,
            own_thread=True,  # (a run may hold the worker: finding must not wait for it)
        )

    def _find_failed(self, message: str) -> None:
        self.button.setEnabled(True)
        self.note.setText(message)

    def _found(self, found: list[FoundServer], ports: dict[int, str]) -> None:
        self.button.setEnabled(True)
        self.found = found
        self.list.clear()
        tried = ", ".join(str(p) for p in ports)
        if not found:
            self.list.hide()
            self.note.setText(
                self.tr("No server answers GET /v1/models on 127.0.0.1 at ports {ports}.").format(ports=tried)
            )
            return
        self.list.addItem(self.tr("{n} found: pick one").format(n=len(found)), None)
        for i, server in enumerate(found):
            self.list.addItem(self.found_words(server), i)
        self.list.show()
        self.note.setText(
            self.tr("{n} answered on this computer (127.0.0.1, ports {ports} tried): pick one to load-test it.").format(
                n=len(found), ports=tried
            )
        )

    def found_words(self, server: FoundServer) -> str:
        """'http://127.0.0.1:8080/v1 (usually llama-server, llamacpp): model, model' (names bounded)."""
        about = [self.tr("usually {what}").format(what=server.usually)] if server.usually else []
        about += [server.engine[:40]] if server.engine else []
        if server.needs_key:
            served = self.tr("needs an API key to list its models")
        else:
            names = [m[:60] for m in server.models[:4]] + (["…"] if len(server.models) > 4 else [])
            served = ", ".join(names) or self.tr("no model listed")
        around = f" ({', '.join(about)})" if about else ""
        return f"{server.base_url}{around}: {served}"

    def use_found(self, index: int) -> None:
        """Tell the server picked in the list of those found (its URL: `picked`)."""
        picked = self.list.itemData(index)
        if picked is None:
            return
        self.picked.emit(self.found[int(picked)].base_url)
