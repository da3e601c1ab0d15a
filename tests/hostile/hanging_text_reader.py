"""Reading processes whose reader hangs or inflates on one text file, as a reader library with a bug
would: put in place of attachments/isolated.py's `_read_in_child` and `_read_batch_in_child`
(monkeypatched in the test process; the child imports this module by its name). In the child, the real
extraction (extract.read_attachment_bytes) is wrapped: a file whose bytes hold `HANG` never finishes,
one whose bytes hold `INFLATE` allocates until the child's memory cap (RLIMIT_AS, the real limit) makes
it fail; every other file is read as Ember reads it.

Expected: in a batch, the file that hangs makes the batch's process reach its time limit: it is said too
slow (not read again) and the files after it are read in a new batch; the one that inflates is read
again alone, with its own sentence (too much memory); every other file of the batch is read. One whose bytes
hold `SLOW` is read after SLOW_S seconds (a file that takes most of a short time limit)."""

from __future__ import annotations

import time
from multiprocessing.connection import Connection

from ember_chat.engine.attachments.kinds import MB, Extracted, Limits, Progress

HANG = b"HANG"
INFLATE = b"INFLATE"
SLOW = b"SLOW"  # read after SLOW_S: most of a short time limit, not all of it
SLOW_S = 0.8


def _wrap_reader() -> None:
    """extract.read_attachment_bytes, in this child only, made to hang or inflate on the marked files."""
    from ember_chat.engine.attachments import extract

    real = extract.read_attachment_bytes

    def reads_badly(name: str, data: bytes, limits: Limits, progress: Progress | None = None) -> Extracted:
        if HANG in data:
            time.sleep(3600)
        if SLOW in data:
            time.sleep(SLOW_S)
        if INFLATE in data:
            held = []
            while True:  # (calloc'd pages: address space, not resident memory, until the cap)
                held.append(bytes(64 * MB))
        return real(name, data, limits, progress)

    extract.read_attachment_bytes = reads_badly


def reads_one(job: tuple[str, bytes], limits: Limits, out: Connection) -> None:
    from ember_chat.engine.attachments import isolated

    _wrap_reader()
    isolated._read_in_child(job, limits, out)


def reads_a_batch(job: list[tuple[str, bytes]], limits: Limits, out: Connection) -> None:
    from ember_chat.engine.attachments import isolated

    _wrap_reader()
    isolated._read_batch_in_child(job, limits, out)


SWAP = b"SWAP"  # answered with the text of the batch's last file (an exploited reader writing another's)
HUGE = b"HUGE"  # answered with 64 MB of text for a few bytes (an exploited reader making Ember hold memory)


def lies_in_a_batch(job: list[tuple[str, bytes]], limits: Limits, out: Connection) -> None:
    """A batch's reader that lies about the marked files and answers every other one as Ember reads it."""
    from ember_chat.engine.attachments.extract import read_attachment_bytes
    from ember_chat.engine.attachments.reader_wire import send, send_done

    try:
        for name, data in job:
            if SWAP in data:
                send_done(out, read_attachment_bytes(job[-1][0], job[-1][1], limits))
            elif HUGE in data:
                text = b"x" * (64 * MB)
                send(out, "done", text, kind="text", mime="text/plain", pages=[], sha256=None, text_bytes=len(text),
                     image_bytes=None)  # fmt: skip
            else:
                send_done(out, read_attachment_bytes(name, data, limits))
    finally:
        out.close()
