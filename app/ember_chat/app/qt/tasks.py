"""Background work for the GUI without cross-thread Qt objects: callables run on a thread pool, and a
GUI-thread timer hands their results to callbacks (in the GUI thread)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from ember_chat.engine.errors import EmberError


class TaskRunner(QObject):
    settled = Signal()  # a task's callback has run (tests wait on this)

    def __init__(self, parent: QObject | None = None, workers: int = 2) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ember-task")
        self._pending: list[tuple[Future[Any], Callable[[Any], None], Callable[[str], None]]] = []
        self._timer = QTimer(self)
        self._timer.setInterval(30)
        self._timer.timeout.connect(self._poll)

    def run(self, fn: Callable[[], Any], on_done: Callable[[Any], None], on_error: Callable[[str], None]) -> None:
        self._pending.append((self._pool.submit(fn), on_done, on_error))
        self._timer.start()

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def _poll(self) -> None:
        still = []
        for fut, on_done, on_error in self._pending:
            if not fut.done():
                still.append((fut, on_done, on_error))
                continue
            exc = fut.exception()
            if exc is None:
                on_done(fut.result())
            elif isinstance(exc, EmberError):
                on_error(str(exc))
            else:
                on_error(self.tr("Unexpected error: {error}").format(error=repr(exc)))
            self.settled.emit()
        self._pending = still
        if not still:
            self._timer.stop()

    def shutdown(self) -> None:
        self._timer.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()
