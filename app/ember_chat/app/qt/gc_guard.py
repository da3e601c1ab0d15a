"""Python's cyclic garbage collector, run on the GUI thread only.

Left to itself, the collector runs on whichever thread happens to allocate when a threshold is crossed,
a worker's included. A cycle holding Qt objects (a window closed, a dialog, a lambda connected to a
signal) is then destroyed on that worker: ~QObject takes Qt's connection lock and waits for the
interpreter's lock, while the GUI thread holds the interpreter's lock and waits for Qt's connection lock
to connect a signal — the app hangs (seen in CI: a model-info task's allocation collected a window of an
earlier test while the GUI thread built a table). So the automatic collector is turned off, and a timer
on the GUI thread runs the same generational collection whenever the same thresholds are crossed."""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

CHECK_MS = 250  # how often the GUI thread looks at the allocation counts


class MainThreadGc(QObject):
    def __init__(self, parent: QObject | None = None, interval_ms: int = CHECK_MS) -> None:
        super().__init__(parent)
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect_due)
        self._timer.start()

    @staticmethod
    def collect_due() -> int:
        """The collection the automatic collector would have run by now (the oldest generation whose
        count passed its threshold, and the younger ones); the number of objects it freed."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        due = -1
        for generation in range(3):
            if counts[generation] > thresholds[generation]:
                due = generation
        return gc.collect(due) if due >= 0 else 0
