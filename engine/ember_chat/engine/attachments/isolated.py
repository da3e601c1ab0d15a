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
- the child's answer is plain data (`_receive`): a JSON header, then the text's and the image's raw
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
import json
import logging
import multiprocessing
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from pathlib import Path

from ember_chat.engine.attachments.extract import read_file_bytes
from ember_chat.engine.attachments.kinds import (
    DEFAULT_LIMITS,
    MB,
    AttachmentKind,
    Extracted,
    Limits,
    Progress,
    human_size,
    shown_name,
)
from ember_chat.engine.attachments.reader_turns import ReadersBusy, Requester, busy_sentence, turns
from ember_chat.engine.errors import AttachmentError

log = logging.getLogger(__name__)

POLL_S = 0.05  # how often the waiting thread checks the clock, the child's memory and cancellation
_PROGRESS_STEP = 0.02  # the child reports progress in steps of this fraction
# imported once in the fork server, so that every child starts with them loaded
_PRELOAD = [
    "ember_chat.engine.attachments.extract",
    "ember_chat.engine.attachments.formats",
    "pypdf",
    "fontTools.cffLib",  # pypdf imports it on the first CFF font without a ToUnicode map (LaTeX maths)
    "docx",
    "PIL.Image",
    "charset_normalizer",
]
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
        if self._stopped():
            raise ReadingStopped(f"Reading {name} was stopped.")
        ctx = _ctx()
        receiver, sender = ctx.Pipe(duplex=False)
        child = ctx.Process(  # type: ignore[attr-defined]  # (every context has Process)
            target=_read_in_child, args=((name, data), self.limits, sender), daemon=True, name=f"ember-read {name}"
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
        # a child that stops halfway through a message holds this thread in recv_bytes, past every
        # check below: another thread kills it at the deadline (its pipe then ends)
        watchdog = threading.Timer(self.limits.max_seconds, _kill, (child,))
        watchdog.daemon = True
        watchdog.start()
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
                    message = _receive(receiver, self.limits)
                except EOFError:
                    child.join(1)
                    if time.monotonic() >= deadline:  # (the watchdog's)
                        raise AttachmentError(_too_slow(name, self.limits)) from None
                    raise AttachmentError(_died(name, child.exitcode, self.limits)) from None
                except _Garbled as exc:
                    if time.monotonic() >= deadline:  # (the watchdog's: the pipe ended inside a message)
                        raise AttachmentError(_too_slow(name, self.limits)) from None
                    log.warning("%s: the reading process answered what Ember does not read (%s)", name, exc)
                    raise AttachmentError(
                        f"{name} could not be read: its reader answered something Ember does not understand."
                    ) from None
                if isinstance(message, _Progress):
                    if progress is not None:
                        progress(message.fraction)
                elif isinstance(message, _Logged):
                    _log_once(name, message.messages)
                elif isinstance(message, _Done):
                    answered = True
                    return _extracted(name, data, message)
                else:
                    answered = True
                    raise AttachmentError(message.message)
        finally:
            watchdog.cancel()
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


# ----- what the child answers: plain data, never a pickle
_MAX_HEADER = 16 * MB  # a header is small (a PDF's page offsets are its largest part: 100,000 pages ~ 1 MB)
_MIME = re.compile(r"[\w.+-]{1,100}/[\w.+-]{1,150}")


class _Garbled(ValueError):
    """The child's answer is not what `_send` writes (a reader exploited in it, or a bug)."""


@dataclass(frozen=True)
class _Progress:
    fraction: float


@dataclass(frozen=True)
class _Logged:
    messages: list[tuple[str, int]]


@dataclass(frozen=True)
class _Failed:
    message: str


@dataclass(frozen=True)
class _Done:
    kind: AttachmentKind
    mime: str
    text: str
    pages: tuple[int, ...]
    image: bytes | None
    claimed_sha256: str | None  # what the child says the file's digest is: compared, never kept


_Message = _Progress | _Logged | _Failed | _Done


def _send(out: Connection, what: str, payload: bytes | None = None, **fields: object) -> None:
    """The child's side of `_receive`: one JSON header, and after a "done" one its payload's bytes."""
    out.send_bytes(json.dumps({"what": what, **fields}).encode("utf-8"))
    if payload is not None:
        out.send_bytes(payload)


def _receive(receiver: Connection, limits: Limits) -> _Message:
    """The child's next message, read as bytes and checked field by field (`_Garbled` if anything is
    off). EOFError when the child is gone. A payload can be at most the child's memory limit: it could
    not have held more."""
    try:
        header = json.loads(receiver.recv_bytes(_MAX_HEADER), parse_constant=_no_constant)
    except OSError as exc:  # (a message over the length given: "bad message length")
        raise _Garbled(f"a header over {human_size(_MAX_HEADER)}") from exc
    except (ValueError, RecursionError) as exc:  # (not JSON, or not UTF-8)
        raise _Garbled(f"a header that is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise _Garbled("a header that is not an object")
    what = header.get("what")
    if what == "progress":
        fraction = header.get("fraction")
        if type(fraction) not in (int, float) or not 0.0 <= fraction <= 1.0:
            raise _Garbled("a progress that is not a fraction")
        return _Progress(float(fraction))
    if what == "log":
        messages = header.get("messages")
        if not isinstance(messages, list) or len(messages) > _MAX_LOGGED:
            raise _Garbled("a log that is not a short list")
        for pair in messages:
            if not (isinstance(pair, list) and len(pair) == 2 and _is_text(pair[0], 1000) and _is_count(pair[1])):
                raise _Garbled("a log entry that is not a message and its count")
        return _Logged([(message, count) for message, count in messages])
    if what == "error":
        message = header.get("message")
        if not _is_text(message, 4000):
            raise _Garbled("an error that is not a sentence")
        return _Failed(message)
    if what == "done":
        return _done(header, receiver, limits)
    raise _Garbled(f"a message of kind {what!r}"[:80])


def _done(header: dict[str, object], receiver: Connection, limits: Limits) -> _Done:
    try:
        kind = AttachmentKind(header.get("kind"))
    except ValueError:
        raise _Garbled("a kind Ember does not know") from None
    mime, pages, claimed = header.get("mime"), header.get("pages"), header.get("sha256")
    text_bytes, image_bytes = header.get("text_bytes"), header.get("image_bytes")
    if not isinstance(mime, str) or not _MIME.fullmatch(mime):
        raise _Garbled("a MIME type that is not one")
    if not (_is_count(text_bytes) and (image_bytes is None or _is_count(image_bytes))):
        raise _Garbled("payload lengths that are not counts")
    if (image_bytes is not None) != (kind is AttachmentKind.IMAGE) or (image_bytes is not None and text_bytes):
        raise _Garbled("an image where there is none, or text with an image")
    total = text_bytes + (image_bytes or 0)
    if total > limits.max_memory_bytes:
        raise _Garbled("a payload larger than the reader's memory limit")
    try:
        payload = receiver.recv_bytes(total)
    except OSError as exc:
        raise _Garbled("a payload of another length than its header said") from exc
    if len(payload) != total:
        raise _Garbled("a payload of another length than its header said")
    try:
        text = payload[:text_bytes].decode("utf-8", "surrogatepass")  # (as the child encoded it)
    except UnicodeDecodeError:
        raise _Garbled("a text that is not UTF-8") from None
    if not (isinstance(pages, list) and all(_is_count(p) and p <= len(text) for p in pages)):
        raise _Garbled("page offsets that are not offsets into the text")
    if pages != sorted(pages):
        raise _Garbled("page offsets out of order")
    if claimed is not None and not (isinstance(claimed, str) and re.fullmatch(r"[0-9a-f]{64}", claimed)):
        raise _Garbled("a SHA-256 that is not one")
    image = payload[text_bytes:] if image_bytes is not None else None
    return _Done(kind, mime, text, tuple(pages), image, claimed)


def _extracted(name: str, data: bytes, done: _Done) -> Extracted:
    """The file read: its name, size and digest from the bytes given to the child, never from it."""
    digest = hashlib.sha256(data).hexdigest()
    if done.claimed_sha256 is not None and done.claimed_sha256 != digest:
        log.warning("%s: its reading process claimed another file's SHA-256; the file's own is kept", name)
    return Extracted(name, done.kind, done.mime, len(data), digest, done.text, done.pages, done.image)


_MAX_LOGGED = 100  # distinct warnings of the reader libraries sent for one file (the child keeps the most frequent)


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0  # (never a bool: True is an int)


def _is_text(value: object, longest: int) -> bool:
    return isinstance(value, str) and len(value) <= longest


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


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


def _read_in_child(job: tuple[str, bytes], limits: Limits, out: Connection) -> None:
    from ember_chat.engine.attachments.extract import read_attachment_bytes

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
            _send(out, "progress", fraction=min(1.0, max(0.0, fraction)))

    try:
        result = read_attachment_bytes(job[0], job[1], limits, report)
        if collected.counts:
            _send(out, "log", messages=collected.counts.most_common(_MAX_LOGGED))
        text = result.text.encode("utf-8", "surrogatepass")  # (a lone surrogate a reader let through)
        _send(
            out,
            "done",
            text + (result.image or b""),
            kind=str(result.kind),
            mime=result.mime,
            pages=list(result.pages),
            sha256=result.sha256,
            text_bytes=len(text),
            image_bytes=None if result.image is None else len(result.image),
        )
    except MemoryError:
        _send(out, "error", message=_too_big(name, limits))
    except AttachmentError as exc:
        _send(out, "error", message=_too_big(name, limits) if _hit_the_cap(limits) else str(exc)[:2000])
    except Exception as exc:  # anything else still ends in a sentence, not a hang
        said = _too_big(name, limits) if _hit_the_cap(limits) else f"{name} could not be read ({str(exc)[:500]})."
        _send(out, "error", message=said)
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
