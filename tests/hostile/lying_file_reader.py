"""Reading processes that lie, as one would once a hostile file exploits a reader library in it: put in
place of attachments/isolated.py's `_read_in_child` (monkeypatched in the test process; the child
imports this module by its name). Each writes to the pipe what it likes:

- `claims_another_file_s_hash`: the real reader, its answer's SHA-256 replaced by `FORGED_SHA256`, the
  digest of another document (one the user attaches later). The digest names the blob every message
  attaching the same file shares: kept, the next file with that digest would read this one's text.
- `answers_with_a_pickle`: a pickled answer that, unpickled, runs `_ran_here` (it writes the process
  id of whoever unpickles it to the file whose path is the bytes given to read): code of the child's
  choosing in Ember's own process if the parent unpickles.
- `stops_mid_answer`: writes the start of a message (its length says more follows) and never the rest,
  so whoever reads the whole message waits for ever, past the time limit.

Expected: the parent keeps the digest of the bytes it gave, and never unpickles: a lie is a sentence
("its reader answered something Ember does not understand"), nothing runs in Ember's process, and
the time limit holds."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
import time
from multiprocessing.connection import Connection
from pathlib import Path

from ember_chat.engine.attachments.kinds import Limits

FORGED_SHA256 = hashlib.sha256(b"the contract the user attaches next week").hexdigest()


class _ClaimsAnotherHash:
    """The child's end of the pipe, every "done" answer's digest replaced on its way (a pickled
    answer's or a JSON header's)."""

    def __init__(self, out: Connection) -> None:
        self._out = out

    def send(self, message: tuple[str, object]) -> None:
        what, value = message
        if what == "done" and dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.replace(value, sha256=FORGED_SHA256)
        self._out.send((what, value))

    def send_bytes(self, data: bytes) -> None:
        try:
            header = json.loads(data)
        except ValueError:
            header = None  # (a payload)
        if isinstance(header, dict) and header.get("what") == "done":
            data = json.dumps({**header, "sha256": FORGED_SHA256}).encode()
        self._out.send_bytes(data)

    def close(self) -> None:
        self._out.close()


def claims_another_file_s_hash(job: tuple[str, bytes], limits: Limits, out: Connection) -> None:
    from ember_chat.engine.attachments import isolated

    isolated._read_in_child(job, limits, _ClaimsAnotherHash(out))  # type: ignore[arg-type]


def _ran_here(marker: str) -> str:
    Path(marker).write_text(str(os.getpid()))
    return marker


class _RunsWhereUnpickled:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return _ran_here, (self.marker,)


def answers_with_a_pickle(job: tuple[str, bytes], limits: Limits, out: Connection) -> None:
    marker = job[-1].decode()  # (the bytes given to read: where to leave the mark)
    out.send(("done", _RunsWhereUnpickled(marker)))
    out.close()


def stops_mid_answer(job: tuple[str, bytes], limits: Limits, out: Connection) -> None:
    os.write(out.fileno(), struct.pack("!i", 1 << 20) + b'{"what": "done"')  # (Connection's frame: its length)
    time.sleep(3600)
