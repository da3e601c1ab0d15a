"""Python's cyclic garbage collector runs on the GUI thread only (app/qt/gc_guard.py): a worker making
garbage past every threshold triggers no collection on its own thread (where destroying Qt objects can
deadlock against the GUI thread: seen in CI), and the GUI thread's timer collects it."""

from __future__ import annotations

import gc
import threading

from pytestqt.qtbot import QtBot

from ember_chat.app.qt.gc_guard import MainThreadGc


def test_garbage_is_collected_on_the_gui_thread_and_never_on_a_worker(qtbot: QtBot) -> None:
    on_main: list[bool] = []

    def started(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            on_main.append(threading.current_thread() is threading.main_thread())

    guard = MainThreadGc(interval_ms=10)
    gc.callbacks.append(started)
    try:
        assert not gc.isenabled()

        def churn() -> None:  # cycles past every generation's threshold
            for _ in range(50_000):
                cycle: list[object] = []
                cycle.append(cycle)

        worker = threading.Thread(target=churn)
        worker.start()
        worker.join()
        assert on_main == []  # no collection ran on the worker
        qtbot.waitUntil(lambda: bool(on_main), timeout=5000)  # the GUI thread's timer collected
        assert all(on_main)
        assert gc.get_count()[0] < gc.get_threshold()[0]
    finally:
        gc.callbacks.remove(started)
        guard.deleteLater()
