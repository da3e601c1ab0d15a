"""The GUI's one background idiom: a callable runs on a worker thread, and its result (or error) is
handed to a callback on the GUI thread. The GUI thread never waits on a task.

- Latest wins: a task submitted with a `key` makes the earlier task with that key stale. A stale task
  that has not started never runs; one that has is interrupted where it can be (its `cancel` hook)
  and its result is dropped, never delivered. So a fast double search shows the last one's result.
- Workers are daemon threads started on demand (up to `workers` at a time) that end when there is
  nothing left to do, so an idle runner holds no thread, and a hung task (a server that never
  answers) can neither block the window's close nor the process's exit.
- A task may say how it goes (`run_reporting`): each event it reports is handed to its `on_progress`
  on the GUI thread, in the order reported and before its result; none once it went stale. A task
  that lasts as long as the user wants (a comparison's streams) asks for a thread of its own
  (`own_thread`), outside the `workers`, so short tasks are never held up behind it.
- `shutdown()` drops what is pending and interrupts what runs, without waiting for it; `join()`
  waits (tests, and whoever must know every thread has ended).

Results go back without cross-thread Qt objects: a worker only posts to a `GuiMailbox` (the bridge's
way back too) without waking anything; a GUI-thread timer, running only while tasks are out, collects
what has been reported and what has finished, from that one queue (so a task's events come before its
result). A worker never touches a QObject, so a runner deleted while a hung task still runs is harmless."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from PySide6.QtCore import QObject, QTimer, Signal

from ember_chat.app.engine_link.gui_mailbox import GuiMailbox
from ember_chat.engine.errors import EmberError

_names = itertools.count(1)
_DONE = object()  # in the runner's outbox: the task has finished (its result or error is on it)
EventT = TypeVar("EventT")  # what a reporting task reports


class Task:
    """One submitted callable. `cancel()` makes it stale: it never runs if it has not started, its
    `cancel` hook (given to `TaskRunner.run`) is called if it has, and its result is dropped."""

    def __init__(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None],
        on_error: Callable[[str], None] | None,
        key: str | None,
        cancel: Callable[[], None] | None,
    ) -> None:
        self.fn = fn
        self.on_done = on_done
        self.on_error = on_error
        self.key = key
        self._cancel_hook = cancel
        self._lock = threading.Lock()
        self.on_progress: Callable[[Any], None] | None = None  # (a reporting task's, see TaskRunner.run_reporting)
        self.started = False
        self.stale = False
        self.result: Any = None
        self.error: BaseException | None = None
        self._ended = threading.Event()  # `fn` has returned, or never will run

    def cancel(self) -> None:
        with self._lock:
            if self.stale:
                return
            self.stale = True
            hook = self._cancel_hook if self.started else None
            if not self.started:
                self._ended.set()  # (skipped by the worker, or dropped from the queue)
        if hook is not None:
            with contextlib.suppress(Exception):  # interrupting is best effort; the result is dropped anyway
                hook()

    def _start(self) -> bool:
        """Called by the worker: False when the task went stale before it started (it is skipped)."""
        with self._lock:
            if self.stale:
                return False
            self.started = True
            return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until `fn` has returned or will never run (tests, teardown; never the GUI in normal
        use); False if it still runs after `timeout` seconds. Says nothing of its delivery."""
        return self._ended.wait(timeout)


class TaskRunner(QObject):
    settled = Signal()  # a task's callback has run (tests wait on this)

    def __init__(self, parent: QObject | None = None, workers: int = 2) -> None:
        super().__init__(parent)
        self._workers = max(1, workers)
        self._lock = threading.Lock()
        self._queue: deque[Task] = deque()  # submitted, not started
        # what the GUI thread has to hand on, in order: (task, an event it reported) or (task, _DONE);
        # no wake-up (a worker never touches a QObject): the timer collects
        self._mailbox: GuiMailbox[tuple[Task, object]] = GuiMailbox()
        self._out: list[Task] = []  # submitted, not yet delivered or dropped (GUI thread only)
        self._latest: dict[str, Task] = {}
        self._threads: set[threading.Thread] = set()  # workers that take tasks
        self._started: list[threading.Thread] = []  # every worker not yet seen ended (for `join`)
        self._busy = 0  # workers running a task now
        self._closed = False
        self._timer = QTimer(self)
        self._timer.setInterval(15)
        self._timer.timeout.connect(self._collect)

    # ----- submitting (GUI thread)
    def run(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None],
        on_error: Callable[[str], None] | None = None,
        *,
        key: str | None = None,
        cancel: Callable[[], None] | None = None,
        own_thread: bool = False,
    ) -> Task:
        """Run `fn()` off the GUI thread; `on_done(result)` or `on_error(message)` then runs on the GUI
        thread (an EmberError's own message, else "Unexpected error: …"; without `on_error` the error
        is dropped). `key`: latest wins (see the module). `cancel`: called from the GUI thread to
        interrupt `fn` when the task goes stale while it runs (e.g. close its HTTP client).
        `own_thread`: run on a thread of its own, not one of the `workers` (a task that may last as
        long as the user wants)."""
        return self._submit(Task(fn, on_done, on_error, key, cancel), own_thread)

    def run_reporting(
        self,
        fn: Callable[[Callable[[EventT], None]], Any],
        on_progress: Callable[[EventT], None],
        on_done: Callable[[Any], None],
        on_error: Callable[[str], None] | None = None,
        *,
        key: str | None = None,
        cancel: Callable[[], None] | None = None,
        own_thread: bool = False,
    ) -> Task:
        """`run`, for a task that says how it goes: `fn(report)` runs off the GUI thread, and each
        `report(event)` it makes (from any thread, while it runs) is handed to `on_progress(event)` on
        the GUI thread, in the order reported, all before `on_done` or `on_error`. Nothing is handed
        on once the task went stale (cancelled, superseded, the runner shut down)."""
        task = Task(lambda: None, on_done, on_error, key, cancel)

        def report(event: EventT) -> None:
            self._mailbox.post((task, event))  # (a stale task's events are dropped at delivery)

        task.fn = lambda: fn(report)
        task.on_progress = on_progress
        return self._submit(task, own_thread)

    def _submit(self, task: Task, own_thread: bool) -> Task:
        if self._closed:
            task.stale = True
            task._ended.set()
            return task
        if task.key is not None:
            previous = self._latest.get(task.key)
            if previous is not None:
                previous.cancel()
            self._latest[task.key] = task
        self._out.append(task)
        with self._lock:
            if own_thread:
                thread = threading.Thread(target=self._run_alone, args=(task,), name=f"ember-task-{next(_names)}")
                thread.daemon = True
                spawn = True
            else:
                self._queue.append(task)
                idle = len(self._threads) - self._busy  # about to take the next task
                spawn = len(self._threads) < self._workers and len(self._queue) > idle
                if spawn:
                    thread = threading.Thread(target=self._work, name=f"ember-task-{next(_names)}", daemon=True)
                    self._threads.add(thread)
            if spawn:
                self._started = [t for t in self._started if t.is_alive()] + [thread]
        if spawn:
            thread.start()
        self._timer.start()
        return task

    def cancel(self, key: str) -> None:
        """Make the task with this key stale (see `Task.cancel`), if there is one."""
        task = self._latest.pop(key, None)
        if task is not None:
            task.cancel()

    def cancel_all(self) -> None:
        """Every task out goes stale: nothing pending runs, running ones are interrupted, no result
        is delivered. The runner stays usable."""
        with self._lock:
            self._queue.clear()
        for task in list(self._out):
            task.cancel()
        self._out.clear()
        self._latest.clear()

    def pending(self, key: str) -> bool:
        """The latest task with this key has not been delivered or cancelled yet."""
        task = self._latest.get(key)
        return task is not None and not task.stale

    @property
    def busy(self) -> bool:
        """Some task's result has not been delivered yet (stale ones do not count)."""
        return any(not t.stale for t in self._out)

    # ----- the workers (their own threads)
    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            with self._lock:
                if not self._queue:
                    self._threads.discard(me)
                    return
                task = self._queue.popleft()
                self._busy += 1
            self._execute(task)
            with self._lock:
                self._busy -= 1

    def _run_alone(self, task: Task) -> None:
        """A task's own thread (`own_thread`): it runs that task, then ends."""
        self._execute(task)

    def _execute(self, task: Task) -> None:
        try:
            if task._start():
                task.result = task.fn()
        except BaseException as exc:  # delivered as data; nothing dies on a worker
            task.error = exc
        if task.started:
            self._mailbox.post((task, _DONE))
        task._ended.set()

    # ----- delivering (GUI thread)
    def _collect(self) -> None:
        out = self._mailbox.inbox
        # (collected again whenever handed on: what is posted meanwhile goes with this tick, in order)
        while out or self._mailbox.collect():
            task, event = out.popleft()
            if event is _DONE:
                self._deliver(task)
            elif not task.stale and task.on_progress is not None:
                task.on_progress(event)
        self._out = [t for t in self._out if not t.stale]  # a stale task is not waited for
        if not self._out:
            self._timer.stop()

    def _deliver(self, task: Task) -> None:
        with contextlib.suppress(ValueError):
            self._out.remove(task)
        if task.key is not None and self._latest.get(task.key) is task:
            del self._latest[task.key]
        if task.stale:
            return
        task.stale = True  # delivered once
        exc = task.error
        if exc is None:
            task.on_done(task.result)
        elif task.on_error is not None:
            if isinstance(exc, EmberError):
                task.on_error(str(exc))
            else:
                task.on_error(self.tr("Unexpected error: {error}").format(error=repr(exc)))
        self.settled.emit()

    # ----- the end
    def shutdown(self) -> None:
        """No more tasks; what is pending never runs, what runs is interrupted and its result dropped.
        Does not wait for any thread (see `join`)."""
        self._closed = True
        self._timer.stop()
        self._mailbox.close()  # (nothing is collected any more)
        self.cancel_all()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every worker thread has ended (tests, teardown); False if some still run after
        `timeout` seconds. Never called by the GUI in normal use."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                threads = [t for t in self._started if t.is_alive()]
                self._started = threads
            if not threads:
                return True
            for t in threads:
                t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
                if t.is_alive():
                    return False
