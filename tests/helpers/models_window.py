"""The model tests of the window: a fake engine whose loads wait for the test, the Model Manager's files."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.errors import LoadCancelled
from ember_chat.engine.inference.backend import ModelDescription
from tests.helpers.fake_backend import FakeBackend

WAIT_S = 10.0


class HeldLoads(FakeBackend):
    """A FakeBackend whose load of each file waits until the test releases it (`release(name)`),
    then honours the cancel event it was given; the model it describes is named after the file, and
    its thread count (part of the badge) is `threads[name]`."""

    def __init__(self, threads: dict[str, int] | None = None) -> None:
        super().__init__(n_tokens=3)
        self.threads = threads or {}
        self._lock = threading.Lock()
        self._gates: dict[str, threading.Event] = defaultdict(threading.Event)
        self._entered: dict[str, threading.Event] = defaultdict(threading.Event)
        self._name: str | None = None

    def gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates[name]

    def entered(self, name: str) -> threading.Event:
        with self._lock:
            return self._entered[name]

    def release(self, *names: str) -> None:
        for name in names:
            self.gate(name).set()

    def release_all(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:
            gate.set()

    def load(
        self, ref: ModelRef, progress: Callable[[float], None] | None = None, cancel: threading.Event | None = None
    ) -> ModelDescription:
        assert isinstance(ref, LoadConfig)
        name = ref.path.name
        self._loaded = False
        self.entered(name).set()
        assert self.gate(name).wait(WAIT_S), f"the test never released the load of {name}"
        if cancel is not None and cancel.is_set():
            raise LoadCancelled(f"Loading {name} was cancelled.")
        self._name = name
        return super().load(ref, progress, cancel)

    @property
    def description(self) -> ModelDescription | None:
        if not self._loaded or self._name is None:
            return None
        threads = self.threads.get(self._name, 1)
        return ModelDescription(self._name, "CPU", self.n_ctx, quantization="F32", threads=threads, gpu_layers=0)


TIMEOUT = 60_000


def open_files(qtbot: QtBot, mm: object, repo: str) -> None:
    with qtbot.waitSignal(mm.files_shown, timeout=TIMEOUT):
        mm.discover_tab.open_repo(repo)


def select_quant(mm: object, quant: str) -> None:
    for r in range(mm.files.rowCount()):
        if mm.files.item(r, 0).text().startswith(quant):
            mm.files.selectRow(r)
            return
    raise AssertionError(quant)
