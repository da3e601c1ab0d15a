"""The one way a worker thread hands something to the GUI thread: a mailbox. Any thread `post`s; the
GUI thread `collect`s what was posted, in the order posted, and hands it on.

Both the engine bridge (every batch of an answer's tokens) and the task runner (a task's events and
its result) go through it; each decides what an item is and how the GUI thread is woken:

- The bridge gives a `wake` (a queued signal): a post wakes the GUI thread only when no wake-up is
  waiting already, so whatever is posted while the GUI thread is busy is collected in one go. With an
  `interval`, a post that is not `urgent` wakes it at most that often (the bridge's token batching;
  its own timer collects what waits when no other post comes).
- The task runner gives none: a worker never touches a QObject (a runner deleted while a hung task
  still runs must stay harmless), so a GUI-thread timer collects while tasks are out.

Collecting is re-entrant without reordering: what the GUI thread has collected but not handled yet
waits in `inbox`, and a nested collect (a callback that runs an event loop) appends after it, so the
inner call goes on where the outer one was. A post costs one lock and one append (the bridge posts
every token), nothing more. After `close`, posts are dropped: nothing can deliver them any more."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

ItemT = TypeVar("ItemT")


class GuiMailbox(Generic[ItemT]):
    """Thread-safe post from any thread, coalesced wake-up, collected in order on the GUI thread."""

    def __init__(self, wake: Callable[[], None] | None = None, interval: float = 0.0) -> None:
        """`wake`: called (on the posting thread) to have the GUI thread collect; it must only queue
        that (a queued signal), never run it. `interval`: a post that is not urgent wakes at most this
        often (seconds; the GUI thread may change it)."""
        self._wake = wake
        self.interval = interval
        self._lock = threading.Lock()
        self._posted: list[ItemT] = []  # (under the lock)
        self._waiting = False  # a wake-up is queued and has not collected the items yet
        self._last_wake = 0.0
        self._closed = False
        self.inbox: deque[ItemT] = deque()  # GUI thread: collected, not handed on yet

    def post(self, item: ItemT, urgent: bool = True) -> None:
        """Any thread. Urgent: wake the GUI thread now unless a wake-up waits already; else at most
        every `interval` (what waits is collected with the next wake-up or by the owner's timer)."""
        now = time.perf_counter()
        with self._lock:
            if self._closed:
                return
            self._posted.append(item)
            if self._wake is None or self._waiting or (not urgent and now - self._last_wake < self.interval):
                return
            self._waiting = True
            self._last_wake = now
        self._wake()

    def collect(self) -> deque[ItemT]:
        """GUI thread: move what was posted to the end of `inbox` and return it (the caller pops from
        its left); the next post wakes the GUI thread again."""
        with self._lock:
            items, self._posted = self._posted, []
            self._waiting = False
        self.inbox.extend(items)
        return self.inbox

    def close(self) -> None:
        """Later posts are dropped (and wake nothing). What was posted before can still be collected."""
        with self._lock:
            self._closed = True
