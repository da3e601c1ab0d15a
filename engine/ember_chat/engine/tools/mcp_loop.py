"""The asyncio loop the MCP client runs on: one background thread, never the GUI thread. Callers on
other threads submit coroutines and wait on concurrent futures."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop in a thread of its own, started on first use and joined by `close`."""

    def __init__(self, name: str = "ember-mcp") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run `coro` on the loop; the future gives its result (or exception)."""
        with self._lock:
            if self._loop is None:
                self._start()
            loop = self._loop
        assert loop is not None
        return asyncio.run_coroutine_threadsafe(coro, loop)

    def call_soon(self, callback: Any, *args: Any) -> None:
        """Call `callback(*args)` on the loop's thread (asyncio and anyio objects are set there)."""
        with self._lock:
            loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(callback, *args)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def in_loop(self) -> bool:
        return self._thread is threading.current_thread()

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._loop = loop
        self._thread.start()
        ready.wait()

    def close(self) -> None:
        """Cancel what still runs on the loop, stop it and join its thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def wind_down() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(wind_down(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
