"""Reading a big file in a process of its own. Extraction is Python (pypdf spends ~1 s on a 300-page
PDF), and a thread running Python holds the interpreter's lock: the window's thread then waits for it
at every Python call it makes while painting, up to the switch interval each time — 50-80 ms stalls
measured while a 300-page PDF was read on a worker thread (`python -m bench.gui_attach`). A child
process has its own interpreter; the thread that waits for it only sleeps on a pipe.

Small files are read in the calling thread: starting a process costs more than reading them."""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.connection import Connection
from pathlib import Path

from ember_chat.engine.attachments.extract import read_attachment
from ember_chat.engine.attachments.kinds import DEFAULT_LIMITS, Extracted, Limits, Progress
from ember_chat.engine.errors import AttachmentError

IN_PROCESS_BYTES = 512 * 1024  # files at least this big are read in a child process
_PROGRESS_STEP = 0.02  # the child reports progress in steps of this fraction


def read_attachment_isolated(
    path: Path | str, limits: Limits = DEFAULT_LIMITS, progress: Progress | None = None
) -> Extracted:
    """`read_attachment`, in a child process for a big file (same result, same errors)."""
    path = Path(path)
    try:
        big = path.is_file() and path.stat().st_size >= IN_PROCESS_BYTES
    except OSError:
        big = False  # (read_attachment says what is wrong with it)
    if not big:
        return read_attachment(path, limits, progress)
    ctx = multiprocessing.get_context("spawn")  # (fork would copy a threaded GUI process)
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_read_in_child, args=(str(path), limits, sender), daemon=True)
    child.start()
    sender.close()  # (the child holds its end: EOF here when it exits)
    try:
        while True:
            try:
                what, value = receiver.recv()
            except EOFError:
                raise AttachmentError(f"{path.name} could not be read: the reader stopped unexpectedly.") from None
            if what == "progress":
                if progress is not None:
                    progress(value)
            elif what == "done":
                return value
            else:
                raise AttachmentError(value)
    finally:
        receiver.close()
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join()


def _read_in_child(path: str, limits: Limits, out: Connection) -> None:
    last = [-1.0]

    def report(fraction: float) -> None:
        if fraction - last[0] >= _PROGRESS_STEP or fraction >= 1.0:
            last[0] = fraction
            out.send(("progress", fraction))

    try:
        out.send(("done", read_attachment(path, limits, report)))
    except AttachmentError as exc:
        out.send(("error", str(exc)))
    except Exception as exc:  # anything else still ends in a sentence, not a hang
        out.send(("error", f"{os.path.basename(path)} could not be read ({exc})."))
    finally:
        out.close()
