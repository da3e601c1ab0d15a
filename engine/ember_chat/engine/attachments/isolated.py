"""Reading a file in a process of its own, with a time and a memory limit. Every file attached — in
the window, by `ember-chat run --attach`, in an API request's content parts — is read here: a file can
be small and still be slow to parse (HTML that Python's parser reads in quadratic time) or inflate
without bound (a PDF's compressed content stream, a DOCX's XML), and a reader library can fail in ways
nobody listed. In a child process none of that reaches the caller:

- time: the child is killed once `Limits.max_seconds` have passed;
- memory: on Linux the child caps its own address space (RLIMIT_AS) before it reads, so an allocation
  past `Limits.max_memory_bytes` fails inside it; where RLIMIT_AS is not enforced (macOS) or does not
  exist (Windows) the parent polls the child's resident size (psutil) and kills it past the limit;
- cancel: `FileReader.cancel()` (a chip's ✕, the window closing) or a `cancelled()` that turns true
  (the API client hung up, the server stops) kills it at the next poll;
- at most `MAX_READERS` children run at once in a process (64 API connections with a file each must
  not mean 64 times the memory limit); a read waits for its turn, its clock starting with its child;
- any error in the child is one sentence naming the file, never an exception from a library.

Extraction is also Python (pypdf spends ~1 s on a 300-page PDF) that would hold the interpreter's lock
the window's thread needs to paint; in a child it does not. Where the platform has it, children are
forked from a small server process started once with the readers imported (multiprocessing's
"forkserver"), so a child starts in milliseconds instead of the ~0.6 s of a fresh interpreter
("spawn", used on Windows). Never plain fork: it would copy a threaded GUI process."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from pathlib import Path

from ember_chat.engine.attachments.kinds import DEFAULT_LIMITS, Extracted, Limits, Progress, human_size, shown_name
from ember_chat.engine.errors import AttachmentError

log = logging.getLogger(__name__)

POLL_S = 0.05  # how often the waiting thread checks the clock, the child's memory and cancellation
_PROGRESS_STEP = 0.02  # the child reports progress in steps of this fraction
# imported once in the fork server, so that every child starts with them loaded
_PRELOAD = [
    "ember_chat.engine.attachments.extract",
    "ember_chat.engine.attachments.formats",
    "pypdf",
    "docx",
    "PIL.Image",
    "charset_normalizer",
]
MAX_READERS = max(2, min(4, os.cpu_count() or 2))
_turns = threading.BoundedSemaphore(MAX_READERS)
_context_lock = threading.Lock()
_context: BaseContext | None = None


class ReadingStopped(AttachmentError):
    """The read was cancelled (`FileReader.cancel`, or `cancelled()` turned true); its child is gone."""


def _ctx() -> BaseContext:
    global _context
    with _context_lock:
        if _context is None:
            if "forkserver" in multiprocessing.get_all_start_methods() and not getattr(sys, "frozen", False):
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(_PRELOAD)
                _context = ctx
            else:  # (Windows, and a frozen app, whose executable is not a Python to start a server with)
                _context = multiprocessing.get_context("spawn")
        return _context


class FileReader:
    """One file read in a child process. `read_path` or `read_bytes` runs on the calling (worker)
    thread and waits for the child; `cancel()` may be called from any thread. `pid` is the child's
    process id while it runs (tests check that it is gone)."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS, cancelled: Callable[[], bool] | None = None) -> None:
        self.limits = limits
        self._cancelled = cancelled
        self._stop = threading.Event()
        self.pid: int | None = None

    def cancel(self) -> None:
        self._stop.set()

    def read_path(self, path: Path | str, progress: Progress | None = None) -> Extracted:
        """`read_attachment(path)`, in a child process: the same result, the same sentences."""
        path = Path(path)
        return self._run(path.name, (str(path),), progress)

    def read_bytes(self, name: str, data: bytes, progress: Progress | None = None) -> Extracted:
        """`read_attachment_bytes(name, data)`, in a child process."""
        shown = shown_name(name)
        return self._run(shown, (name, data), progress)

    # ----- the waiting side
    def _run(self, name: str, job: tuple[str] | tuple[str, bytes], progress: Progress | None) -> Extracted:
        while not _turns.acquire(timeout=POLL_S):  # (its turn: see MAX_READERS)
            if self._stopped():
                raise ReadingStopped(f"Reading {name} was stopped.")
        try:
            return self._in_child(name, job, progress)
        finally:
            _turns.release()

    def _in_child(self, name: str, job: tuple[str] | tuple[str, bytes], progress: Progress | None) -> Extracted:
        if self._stopped():
            raise ReadingStopped(f"Reading {name} was stopped.")
        ctx = _ctx()
        receiver, sender = ctx.Pipe(duplex=False)
        child = ctx.Process(  # type: ignore[attr-defined]  # (every context has Process)
            target=_read_in_child, args=(job, self.limits, sender), daemon=True, name=f"ember-read {name}"
        )
        try:
            child.start()
        except OSError as exc:  # (no process can be started: too many, no memory)
            receiver.close()
            raise AttachmentError(f"{name} could not be read: no process could start to read it ({exc}).") from None
        finally:
            sender.close()  # (the child holds its end: EOF here when it exits)
        self.pid = child.pid
        watch = None if _caps_address_space() else _MemoryWatch(child.pid)
        deadline = time.monotonic() + self.limits.max_seconds
        answered = False  # the child said how it ended: it is exiting by itself
        try:
            while True:
                if self._stopped():
                    raise ReadingStopped(f"Reading {name} was stopped.")
                if time.monotonic() >= deadline:
                    raise AttachmentError(_too_slow(name, self.limits))
                if watch is not None and watch.rss() > self.limits.max_memory_bytes:
                    raise AttachmentError(_too_big(name, self.limits))
                if not receiver.poll(POLL_S):
                    continue
                try:
                    what, value = receiver.recv()
                except EOFError:
                    child.join(1)
                    raise AttachmentError(_died(name, child.exitcode, self.limits)) from None
                if what == "progress":
                    if progress is not None:
                        progress(value)
                elif what == "log":
                    _log_once(name, value)
                elif what == "done":
                    answered = True
                    return value
                else:
                    answered = True
                    raise AttachmentError(value)
        finally:
            receiver.close()
            _end(child, answered)
            self.pid = None

    def _stopped(self) -> bool:
        if self._stop.is_set():
            return True
        if self._cancelled is not None and self._cancelled():
            self._stop.set()
            return True
        return False


def read_attachment_isolated(
    path: Path | str,
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Extracted:
    """`read_attachment`, in a child process with the time and memory limits of `limits`."""
    return FileReader(limits, cancelled).read_path(path, progress)


def read_bytes_isolated(
    name: str,
    data: bytes,
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Extracted:
    """`read_attachment_bytes`, in a child process with the time and memory limits of `limits`."""
    return FileReader(limits, cancelled).read_bytes(name, data, progress)


def _end(child: multiprocessing.process.BaseProcess, answered: bool) -> None:
    """The child is gone (killed unless it is exiting after its answer) and reaped before this returns."""
    if answered:
        child.join(2)
    if child.is_alive():
        child.kill()
    child.join()
    with contextlib.suppress(ValueError):
        child.close()


def _too_slow(name: str, limits: Limits) -> str:
    seconds = f"{limits.max_seconds:g} second{'s' if limits.max_seconds != 1 else ''}"
    return (
        f"{name} took longer than {seconds} to read, so Ember stopped reading it "
        "(attachment_read_seconds in Ember's settings.json sets this limit)."
    )


def _too_big(name: str, limits: Limits) -> str:
    return (
        f"{name} needs more than {human_size(limits.max_memory_bytes)} of memory to read (a file built to "
        "inflate?), so Ember stopped reading it (attachment_read_memory_mb in Ember's settings.json sets this limit)."
    )


def _died(name: str, exitcode: int | None, limits: Limits) -> str:
    if exitcode is not None and exitcode < 0:  # killed by a signal: the kernel's OOM killer, a crash in C
        return _too_big(name, limits) if _caps_address_space() else f"{name} could not be read: its reader crashed."
    return f"{name} could not be read: the reader stopped unexpectedly."


def _log_once(name: str, messages: list[tuple[str, int]]) -> None:
    """The reader libraries' warnings for one file (pypdf: "fontTools is required…", once per page),
    each distinct one logged once with its count instead of printed to the terminal per page."""
    for message, count in messages:
        log.info("%s: %s%s", name, message, f" ({count:,} times)" if count > 1 else "")


class _MemoryWatch:
    """The child's resident size, polled from the parent where the child cannot cap itself."""

    def __init__(self, pid: int | None) -> None:
        import psutil

        self._process: psutil.Process | None = None
        with contextlib.suppress(psutil.Error):
            self._process = psutil.Process(pid)

    def rss(self) -> int:
        import psutil

        if self._process is None:
            return 0
        try:
            return int(self._process.memory_info().rss)
        except psutil.Error:
            return 0  # (gone: the pipe says so)


def _caps_address_space() -> bool:
    """Whether a child can cap its own memory with RLIMIT_AS (Linux enforces it; macOS accepts it and
    ignores it; Windows has no `resource`)."""
    return sys.platform.startswith("linux")


# ----- the child's side
class _Collect(logging.Handler):
    """The reader libraries' log records, counted, to be sent to the parent's log once."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.counts[record.getMessage()[:300]] += 1


def _read_in_child(job: tuple[str] | tuple[str, bytes], limits: Limits, out: Connection) -> None:
    from ember_chat.engine.attachments.extract import read_attachment, read_attachment_bytes

    name = shown_name(job[0])
    if _caps_address_space():
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = limits.max_memory_bytes if hard == resource.RLIM_INFINITY else min(hard, limits.max_memory_bytes)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))  # (lowering is always allowed)
    collected = _Collect()
    for library in ("pypdf", "PIL", "docx"):
        logger = logging.getLogger(library)
        logger.addHandler(collected)
        logger.propagate = False  # (else Python's last-resort handler prints them to the terminal)
    last = [-1.0]

    def report(fraction: float) -> None:
        if fraction - last[0] >= _PROGRESS_STEP or fraction >= 1.0:
            last[0] = fraction
            out.send(("progress", fraction))

    try:
        if len(job) == 1:
            result = read_attachment(job[0], limits, report)
        else:
            result = read_attachment_bytes(job[0], job[1], limits, report)
        if collected.counts:
            out.send(("log", sorted(collected.counts.items())))
        out.send(("done", result))
    except MemoryError:
        out.send(("error", _too_big(name, limits)))
    except AttachmentError as exc:
        out.send(("error", _too_big(name, limits) if _hit_the_cap(limits) else str(exc)))
    except Exception as exc:  # anything else still ends in a sentence, not a hang
        said = _too_big(name, limits) if _hit_the_cap(limits) else f"{name} could not be read ({exc})."
        out.send(("error", said))
    finally:
        out.close()


def _hit_the_cap(limits: Limits) -> bool:
    """Whether this child came near its address-space cap: a C library that cannot allocate says so in
    its own words (lxml: "unknown error"; zlib: "insufficient memory"), not with a MemoryError."""
    if not _caps_address_space():
        return False
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmPeak:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    return peak >= 0.9 * limits.max_memory_bytes
