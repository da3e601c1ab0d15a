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
  not mean 64 times the memory limit); a read waits for its turn (reader_turns.py), its clock starting with its child.
  Turns go in order of arrival (`Turns`), and API requests, someone else's files, never hold more than
  `MAX_READERS - 1` of them: the window's attachments, imports and the CLI always find one free. An API
  request's file waits a bounded time for its turn, then is `ReadersBusy` (a 503 with Retry-After);
- any error in the child is one sentence naming the file, never an exception from a library;
- many small files (a project's notes) can be read in one child, each in turn (`read_batch`), each
  with the limits of one file (its clock starts when the one before it is answered): only files whose
  reading is decoding (DECODED_KINDS, as their bytes say: a PDF named .md is left to be read alone),
  each answered before the next is read; a file that takes the whole time limit there is too slow (it
  had the time it would have alone: not read again), and those after it are read in a new batch; a
  file that fails the batch otherwise (too big, the child gone) is read again alone, as are those after
  it, so each has its own sentence;
- the child's answer is plain data (reader_wire.py): a JSON header, then the text's and the image's raw
  bytes, each checked here. It is never unpickled: a reader library exploited in the child would run
  code in Ember's own process. The file's SHA-256 (the name of the blob every message attaching the
  same file shares) is computed here from the bytes the child was given, never taken from its answer.
  The child gets bytes, never a path: the parent reads the file (`read_file_bytes`).

Extraction is also Python (pypdf spends ~1 s on a 300-page PDF) that would hold the interpreter's lock
the window's thread needs to paint; in a child it does not. Where the platform has it, children are
forked from a small server process started once with the readers imported (multiprocessing's
"forkserver"), so a child starts in milliseconds instead of the ~0.6 s of a fresh interpreter
("spawn", used on Windows). Never plain fork: it would copy a threaded GUI process."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.context import BaseContext
from pathlib import Path

from ember_chat.engine.attachments.extract import read_file_bytes
from ember_chat.engine.attachments.kinds import (
    DEFAULT_LIMITS,
    Extracted,
    Limits,
    Progress,
    shown_name,
)
from ember_chat.engine.attachments.reader_child import DECODED_KINDS, caps_address_space, too_big
from ember_chat.engine.attachments.reader_child import read_batch_in_child as _read_batch_in_child
from ember_chat.engine.attachments.reader_child import read_in_child as _read_in_child
from ember_chat.engine.attachments.reader_turns import ReadersBusy, Requester, busy_sentence, turns
from ember_chat.engine.attachments.reader_wire import (
    ChildMessage,
    Garbled,
    ReadAlone,
    ReadDone,
    ReadFailed,
    ReadLogged,
    ReadProgress,
    extracted,
    receive,
)
from ember_chat.engine.errors import AttachmentError, ReaderFailed

log = logging.getLogger(__name__)

POLL_S = 0.05  # how often the waiting thread checks the clock, the child's memory and cancellation
# imported once in the fork server, so that every child starts with them loaded
_PRELOAD = [
    "ember_chat.engine.attachments.reader_child",
    "ember_chat.engine.attachments.extract",
    "ember_chat.engine.attachments.formats",
    "pypdf",
    "fontTools.cffLib",  # pypdf imports it on the first CFF font without a ToUnicode map (LaTeX maths)
    "docx",
    "PIL.Image",
    "charset_normalizer",
]
Answered = Callable[[int, Extracted | AttachmentError], None]  # a batch's file (its number) and its answer
_context_lock = threading.Lock()
_context: BaseContext | None = None


class ReadingStopped(AttachmentError):
    """The read was cancelled (`FileReader.cancel`, or `cancelled()` turned true); its child is gone."""


class _TooSlow(AttachmentError):
    """The child ran past the time limit of the file it was reading (killed)."""


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
    process id while it runs (tests check that it is gone). `requester`: whose file it is (its share
    of the readers); `turn_wait_s`: how long it may wait for its turn before `ReadersBusy` (None: until
    it comes, or the read is cancelled)."""

    def __init__(
        self,
        limits: Limits = DEFAULT_LIMITS,
        cancelled: Callable[[], bool] | None = None,
        requester: Requester = Requester.LOCAL,
        turn_wait_s: float | None = None,
    ) -> None:
        self.limits = limits
        self.requester = requester
        self.turn_wait_s = turn_wait_s
        self._cancelled = cancelled
        self._stop = threading.Event()
        self.pid: int | None = None

    def cancel(self) -> None:
        self._stop.set()

    def read_path(self, path: Path | str, progress: Progress | None = None) -> Extracted:
        """`read_attachment(path)`, in a child process: the same result, the same sentences. The file
        is opened and its bytes taken here, a plain read within the size limit (the digest is then of
        the very bytes the child reads); all of `progress` is the child's reading of them."""
        path = Path(path)
        if self._stopped():
            raise ReadingStopped(f"Reading {path.name} was stopped.")
        return self.read_bytes(path.name, read_file_bytes(path, self.limits), progress)

    def read_bytes(self, name: str, data: bytes, progress: Progress | None = None) -> Extracted:
        """`read_attachment_bytes(name, data)`, in a child process."""
        shown = shown_name(name)
        with self._turn(shown):
            return self._in_child(shown, data, progress)

    def read_batch(
        self, files: Sequence[tuple[str, bytes]], answered: Answered | None = None
    ) -> list[Extracted | AttachmentError]:
        """Small files of the kinds whose reading is decoding (`DECODED_KINDS`: their names say so), read
        in ONE child process, each in turn: what `read_bytes` would give for each, in order (a file's
        sentence as an AttachmentError). Each file has the limits of one (its clock starts when the
        file before it is answered; one process's memory: its files are small and decoding is linear).
        A file on which the batch's process reaches the time limit is too slow (it had all the time it
        would have alone: it is not read again) and the files after it are read in a new batch; a file
        that is not what its name says (a PDF named .md) or that runs out of memory is read again alone;
        if the batch's process fails or dies otherwise, the files it had not answered are each read again
        alone, so that a bad one is named and the others are read. `answered(i, answer)`: files[i]'s
        answer, each once, as it comes (in the order they come). Only ReadingStopped (the reads under way
        killed) and ReadersBusy (no turn came) are raised."""
        shown = [shown_name(name) for name, _ in files]
        answers: list[Extracted | AttachmentError | None] = []  # None: read it alone
        slow_at: int | None = None  # the file the batch's process ran out of its time on
        if len(files) > 1:
            label = f"{shown[0]} and {len(files) - 1} more"
            take = self._batch_answer(shown, files, answers, answered)
            answered_at: list[float] = []  # when each answer came: the next file's clock starts there

            def timed(message: ChildMessage) -> bool:
                if isinstance(message, (ReadDone, ReadFailed, ReadAlone)):  # (as it arrives: not after
                    answered_at.append(time.monotonic())  # `answered` has stored it, on the next file's time)
                return take(message)

            def most() -> int:  # (the next answer's file decoded, at most)
                return decoded_at_most(files[min(len(answers), len(files) - 1)][1])

            with self._turn(shown[0]):
                try:
                    self._run_child(
                        label,
                        _read_batch_in_child,
                        list(files),
                        timed,
                        most,
                        lambda: answered_at[-1] if answered_at else None,
                    )
                except ReadingStopped:
                    raise
                except _TooSlow:  # (the file it was on had its whole time: too slow, as alone)
                    slow_at = len(answers)
                    log.info("A batch of %d files to read ran out of time on file %d", len(files), slow_at + 1)
                except AttachmentError as exc:  # (the batch's process failed: the files it did not answer, alone)
                    log.info("A batch of %d files to read failed after %d of them (%s)", len(files), len(answers), exc)
        rest: list[Extracted | AttachmentError] = []  # the files after the one too slow: in a new batch
        if slow_at is not None:  # (its turn given back: the new batch takes one of its own)
            answers.append(AttachmentError(_too_slow(shown[slow_at], self.limits)))
            if answered is not None:
                answered(slow_at, answers[slow_at])
            after = slow_at + 1
            rest = self.read_batch(files[after:], None if answered is None else _shifted(answered, after))
        answers += [None] * (len(files) - len(answers) - len(rest))
        done: list[Extracted | AttachmentError] = []
        for at, ((name, data), answer) in enumerate(zip(files, [*answers, *rest], strict=True)):
            if answer is None:
                try:
                    answer = self.read_bytes(name, data)
                except (ReadingStopped, ReadersBusy):  # (no sentence of the file's own: it stays pending)
                    raise
                except AttachmentError as exc:
                    answer = exc
                if answered is not None:
                    answered(at, answer)
            done.append(answer)
        return done

    # ----- the waiting side
    @contextlib.contextmanager
    def _turn(self, name: str) -> Iterator[None]:
        """Its turn (see MAX_READERS), held while its child runs."""
        deadline = None if self.turn_wait_s is None else time.monotonic() + self.turn_wait_s
        if not turns.take(self.requester, self._stopped, deadline):
            if self._stopped():
                raise ReadingStopped(f"Reading {name} was stopped.")
            raise ReadersBusy(busy_sentence(name, self.requester, self.turn_wait_s or 0.0))
        try:
            yield
        finally:
            turns.give_back(self.requester)

    def _in_child(self, name: str, data: bytes, progress: Progress | None) -> Extracted:
        answer: list[Extracted | AttachmentError] = []

        def take(message: ChildMessage) -> bool:
            if isinstance(message, ReadProgress):
                if progress is not None:
                    progress(message.fraction)
                return False
            if isinstance(message, ReadLogged):
                _log_once(name, message.messages)
                return False
            if isinstance(message, ReadDone):
                answer.append(extracted(name, data, message))
            elif isinstance(message, ReadFailed):
                answer.append(AttachmentError(message.message))
            else:  # (a batch's answer: not one a reader of one file gives)
                raise Garbled("a batch's answer from the reader of one file")
            return True

        self._run_child(name, _read_in_child, (name, data), take)
        [result] = answer
        if isinstance(result, AttachmentError):
            raise result
        return result

    @staticmethod
    def _batch_answer(
        shown: list[str],
        files: Sequence[tuple[str, bytes]],
        answers: list[Extracted | AttachmentError | None],
        answered: Answered | None,
    ) -> Callable[[ChildMessage], bool]:
        """What takes a batch's messages: each file's answer appended to `answers` (`answered` told of
        those that are final: not those to be read alone); True after the last."""

        def take(message: ChildMessage) -> bool:
            at = len(answers)
            if at >= len(files):
                raise Garbled("more answers than files")
            if isinstance(message, ReadLogged):
                _log_once(shown[at], message.messages)
                return False
            if isinstance(message, ReadDone):
                if message.kind not in DECODED_KINDS or message.image is not None or message.pages:
                    raise Garbled("a batch's file read as what a batch does not read")
                if message.claimed_sha256 != hashlib.sha256(files[at][1]).hexdigest():
                    raise Garbled("an answer for another file than the one it was given")  # (never another's text)
                answers.append(extracted(shown[at], files[at][1], message))
            elif isinstance(message, ReadFailed):
                answers.append(AttachmentError(message.message))
            elif isinstance(message, ReadAlone):
                answers.append(None)
            else:
                raise Garbled("progress from a batch")
            answer = answers[at]
            if answered is not None and answer is not None:
                answered(at, answer)
            return len(answers) == len(files)

        return take

    def _run_child(
        self,
        name: str,
        target: Callable[..., None],
        job: object,
        take: Callable[[ChildMessage], bool],
        most: Callable[[], int] | None = None,
        began: Callable[[], float | None] | None = None,
    ) -> None:
        """`target(job, limits, pipe)` in a child process, each of its messages given to `take` until it
        returns True (the child has answered all it had to); AttachmentError with a sentence naming
        `name` when the child is too slow (_TooSlow), too big, dies or answers what Ember does not read.
        `most()`: the largest payload its next message may carry (else the memory limit); `began()`: when
        the file it reads now began (a batch's last answer; None: when the child started), its time limit
        counted from there."""
        if self._stopped():
            raise ReadingStopped(f"Reading {name} was stopped.")
        ctx = _ctx()
        try:
            receiver, sender = ctx.Pipe(duplex=False)
        except OSError as exc:  # (too many files open)
            raise ReaderFailed(f"{name} could not be read: no process could start to read it ({exc}).") from None
        child = ctx.Process(  # type: ignore[attr-defined]  # (every context has Process)
            target=target, args=(job, self.limits, sender), daemon=True, name=f"ember-read {name}"
        )
        try:
            child.start()
        except OSError as exc:  # (no process can be started: too many, no memory, the fork server gone)
            receiver.close()
            raise ReaderFailed(f"{name} could not be read: no process could start to read it ({exc}).") from None
        finally:
            sender.close()  # (the child holds its end: EOF here when it exits)
        self.pid = child.pid
        watch = None if caps_address_space() else _MemoryWatch(child.pid)
        started = time.monotonic()

        def deadline() -> float:
            since = None if began is None else began()
            return (started if since is None else since) + self.limits.max_seconds

        answered = False  # the child said how it ended: it is exiting by itself
        # a child that stops halfway through a message holds this thread in recv_bytes, past every
        # check below: another thread kills it at the deadline (its pipe then ends)
        ended = threading.Event()

        def watch_clock() -> None:
            while not ended.wait(max(0.0, deadline() - time.monotonic())):
                if time.monotonic() >= deadline():
                    _kill(child)
                    return

        watchdog = threading.Thread(target=watch_clock, name=f"ember-read-clock {name}", daemon=True)
        watchdog.start()
        try:
            while not answered:
                if self._stopped():
                    raise ReadingStopped(f"Reading {name} was stopped.")
                if time.monotonic() >= deadline():
                    raise _TooSlow(_too_slow(name, self.limits))
                if watch is not None and watch.rss() > self.limits.max_memory_bytes:
                    raise AttachmentError(too_big(name, self.limits))
                if not receiver.poll(POLL_S):
                    continue
                try:
                    answered = take(receive(receiver, self.limits, None if most is None else most()))
                except EOFError:
                    child.join(1)
                    if time.monotonic() >= deadline():  # (the watchdog's)
                        raise _TooSlow(_too_slow(name, self.limits)) from None
                    raise _died(name, child.exitcode, self.limits) from None
                except Garbled as exc:
                    if time.monotonic() >= deadline():  # (the watchdog's: the pipe ended inside a message)
                        raise _TooSlow(_too_slow(name, self.limits)) from None
                    log.warning("%s: the reading process answered what Ember does not read (%s)", name, exc)
                    raise AttachmentError(
                        f"{name} could not be read: its reader answered something Ember does not understand."
                    ) from None
        finally:
            ended.set()
            watchdog.join()
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
    requester: Requester = Requester.LOCAL,
    turn_wait_s: float | None = None,
) -> Extracted:
    """`read_attachment_bytes`, in a child process with the time and memory limits of `limits`
    (`requester`, `turn_wait_s`: see FileReader)."""
    return FileReader(limits, cancelled, requester, turn_wait_s).read_bytes(name, data, progress)


def decoded_at_most(data: bytes) -> int:
    """The most UTF-8 bytes a file of these bytes decodes to (3 for a byte of a single-byte code page,
    such as cp1252's €; fewer for UTF-8 and UTF-16), with room for what decoding adds: a batch's child
    that answers more is not believed (64 files must not make Ember hold 64 times the memory limit)."""
    return 4 * len(data) + 64


def _shifted(answered: Answered, by: int) -> Answered:
    """`answered` for a batch of the files from `by` on: its numbers those of the whole batch."""
    return lambda at, answer: answered(at + by, answer)


def _kill(child: multiprocessing.process.BaseProcess) -> None:
    with contextlib.suppress(OSError):
        child.kill()


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


def _died(name: str, exitcode: int | None, limits: Limits) -> AttachmentError:
    """Why a child ended without its answer: out of memory (the file's), else ReaderFailed (not the file's
    as far as Ember can tell: reading it again later may work)."""
    if exitcode is not None and exitcode < 0:  # killed by a signal: the kernel's OOM killer, a crash in C
        if caps_address_space():
            return AttachmentError(too_big(name, limits))
        return ReaderFailed(f"{name} could not be read: its reader crashed.")
    return ReaderFailed(f"{name} could not be read: the reader stopped unexpectedly.")


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
