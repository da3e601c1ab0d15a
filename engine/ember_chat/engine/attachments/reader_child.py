"""The reading process's side of attachments/isolated.py: what runs in the child that reads a file (or a
batch of small files) with the memory capped and the reader libraries' warnings collected, and answers
the parent over its pipe in reader_wire's plain data. Nothing here runs in Ember's own process but
`caps_address_space`, `too_big` and `DECODED_KINDS`, which both sides use."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections import Counter
from multiprocessing.connection import Connection

from ember_chat.engine.attachments.kinds import AttachmentKind, Limits, human_size, shown_name
from ember_chat.engine.attachments.reader_wire import MAX_LOGGED, send, send_done
from ember_chat.engine.errors import AttachmentError

_PROGRESS_STEP = 0.02  # the child reports progress in steps of this fraction
# the kinds whose reading is decoding their bytes (no parser: time and memory linear in the size): the
# kinds `FileReader.read_batch` reads many files of in one child
DECODED_KINDS = frozenset(
    (AttachmentKind.TEXT, AttachmentKind.MARKDOWN, AttachmentKind.CODE, AttachmentKind.CSV, AttachmentKind.JSON)
)


def caps_address_space() -> bool:
    """Whether a child can cap its own memory with RLIMIT_AS (Linux enforces it; macOS accepts it and
    ignores it; Windows has no `resource`)."""
    return sys.platform.startswith("linux")


class _Collect(logging.Handler):
    """The reader libraries' log records, counted, to be sent to the parent's log once."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.counts[record.getMessage()[:300]] += 1


def read_in_child(job: tuple[str, bytes], limits: Limits, out: Connection) -> None:
    from ember_chat.engine.attachments.extract import read_attachment_bytes

    name = shown_name(job[0])
    collected = _child_setup(limits)
    last = [-1.0]

    def report(fraction: float) -> None:
        if fraction - last[0] >= _PROGRESS_STEP or fraction >= 1.0:
            last[0] = fraction
            send(out, "progress", fraction=min(1.0, max(0.0, fraction)))

    try:
        result = read_attachment_bytes(job[0], job[1], limits, report)
        if collected.counts:
            send(out, "log", messages=collected.counts.most_common(MAX_LOGGED))
        send_done(out, result)
    except MemoryError:
        send(out, "error", message=too_big(name, limits))
    except AttachmentError as exc:
        send(out, "error", message=too_big(name, limits) if _hit_the_cap(limits) else str(exc)[:2000])
    except Exception as exc:  # anything else still ends in a sentence, not a hang
        said = too_big(name, limits) if _hit_the_cap(limits) else f"{name} could not be read ({str(exc)[:500]})."
        send(out, "error", message=said)
    finally:
        out.close()


def read_batch_in_child(job: list[tuple[str, bytes]], limits: Limits, out: Connection) -> None:
    """Each file of the batch in turn, each answered before the next is read: "done", "error" (its
    sentence), or "alone" for a file whose bytes are not of a kind a batch reads (a PDF named .md: it is
    not parsed here) or that ran out of memory here (alone, it has the whole limit)."""
    from ember_chat.engine.attachments.extract import read_attachment_bytes, sniff_kind

    collected = _child_setup(limits)
    try:
        for given, data in job:
            name = shown_name(given)
            collected.counts.clear()  # (a file's warnings go with its own answer only)
            try:
                if sniff_kind(name, data) not in DECODED_KINDS:
                    send(out, "alone")
                    continue
                result = read_attachment_bytes(name, data, limits)
            except MemoryError:
                send(out, "alone")
                continue
            except Exception as exc:  # (AttachmentError: its sentence; anything else: one too)
                if _hit_the_cap(limits):
                    send(out, "alone")
                else:
                    said = str(exc) if isinstance(exc, AttachmentError) else f"{name} could not be read ({exc})."
                    send(out, "error", message=said[:2000])
                continue
            if collected.counts:
                send(out, "log", messages=collected.counts.most_common(MAX_LOGGED))
                collected.counts.clear()
            send_done(out, result)
    finally:
        out.close()


def _child_setup(limits: Limits) -> _Collect:
    """The child's memory capped (where the platform enforces it), the reader libraries' warnings collected."""
    if caps_address_space():
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = limits.max_memory_bytes if hard == resource.RLIM_INFINITY else min(hard, limits.max_memory_bytes)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))  # (lowering is always allowed)
    collected = _Collect()
    for library in ("pypdf", "PIL", "docx"):
        logger = logging.getLogger(library)
        logger.addHandler(collected)
        logger.propagate = False  # (else Python's last-resort handler prints them to the terminal)
    return collected


def _hit_the_cap(limits: Limits) -> bool:
    """Whether this child came near its address-space cap: a C library that cannot allocate says so in
    its own words (lxml: "unknown error"; zlib: "insufficient memory"), not with a MemoryError."""
    if not caps_address_space():
        return False
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmPeak:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    return peak >= 0.9 * limits.max_memory_bytes


def too_big(name: str, limits: Limits) -> str:
    return (
        f"{name} needs more than {human_size(limits.max_memory_bytes)} of memory to read (a file built to "
        "inflate?), so Ember stopped reading it (attachment_read_memory_mb in Ember's settings.json sets this limit)."
    )
