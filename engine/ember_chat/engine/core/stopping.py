"""Stopping work that cannot watch an event itself (a backend's generation, an engine job, a remote
stream) when a cancel event is set: shared by the benchmark lab and model comparisons."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_POLL_S = 0.05  # how often a stop is repeated while the cancel event stays set


@contextmanager
def stopping_on(cancel: threading.Event, stop: Callable[[], None]) -> Iterator[None]:
    """While the body runs, call `stop()` as soon as `cancel` is set, and again every 50 ms after
    (a stop that lands just before a request starts, which a backend forgets, is repeated); a remote
    stream is closed at once even while the server is still on the prompt. Joined on exit."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if cancel.wait(STOP_POLL_S):
                stop()
                done.wait(STOP_POLL_S)

    watcher = threading.Thread(target=watch, name="cancel-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
