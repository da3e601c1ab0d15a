"""Opening the chat database whatever state it is in, so a damaged file never stops Ember.

- Damaged (not a database, truncated, malformed), a migration that fails, or a schema from a newer
  Ember: the file (with its -wal/-shm) is moved aside with a timestamp, every conversation and
  message SQLite can still read is copied into a fresh database, and the notice says what happened
  and where the old file is. A bad value in a row (params or metrics that are not JSON) costs only
  itself; the reading is bounded in time and in unreadable rows stepped over, and the notice says
  what it did not reach. If the file cannot be moved (another program has it open), it is left as
  it is and this session's chats are kept in memory.
- Locked by another program, or a folder that cannot be written: nothing is moved (the file is not
  damaged); this session keeps its chats in memory and the notice says why and what to do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.atomic import aside_path
from ember_chat.engine.storage.conversations import ConversationStore

log = logging.getLogger(__name__)

CONVERSATION_COLUMNS = ("id", "title", "model", "system_prompt", "params", "created_at", "updated_at", "active_leaf")
MESSAGE_COLUMNS = (
    "id",
    "conversation_id",
    "parent_id",
    "role",
    "content",
    "metrics",
    "complete",
    "created_at",
    "tool_calls",
)  # fmt: skip  (those a damaged file lacks, an older schema's, are left out)
_NOT_DAMAGED = (
    "database is locked",
    "unable to open database file",
    "readonly database",
    "disk i/o error",
    "database or disk is full",
)


SCAN_TIME_LIMIT_S = 30.0  # reading a damaged file never holds up the start longer than this
SCAN_SKIP_LIMIT = 100_000  # unreadable row numbers stepped over, per table, before giving up on the rest


@dataclass(frozen=True)
class OpenedStore:
    store: ConversationStore
    notice: str | None = None  # what happened, for the user; None when all was well
    moved_to: Path | None = None
    recovered_conversations: int = 0
    recovered_messages: int = 0
    repaired_values: int = 0  # bad values in recovered rows, left empty
    unread: str | None = None  # what the bounded reading of the damaged file did not reach, in words


def open_conversations(path: Path) -> OpenedStore:
    try:
        store = ConversationStore(path)
        problem = store.integrity_problem()
        if problem is None:
            return OpenedStore(store)
        store.close()
        return _move_aside_and_recover(path, f"it is damaged: {problem}")
    except StoreError as exc:  # (the failed open closed its connection: the file can be moved)
        cause = str(exc.__cause__ or exc).lower()
        if any(s in cause for s in _NOT_DAMAGED):
            log.warning("chat database %s unusable: %s", path, exc)
            return _in_memory(
                f"The chat database {path} cannot be used right now ({exc.__cause__ or exc}). Chats of this "
                "session are kept in memory only: close any other program using it, check the folder can be "
                "written, and restart Ember."
            )
        return _move_aside_and_recover(path, str(exc))


def _in_memory(notice: str) -> OpenedStore:
    return OpenedStore(ConversationStore(Path(":memory:")), notice)


def _move_aside_and_recover(path: Path, why: str) -> OpenedStore:
    aside = aside_path(path)
    moved: list[tuple[Path, Path]] = []
    try:
        for suffix in ("", "-wal", "-shm"):  # the WAL belongs to the file: it moves with it
            src = Path(f"{path}{suffix}")
            if src.exists():
                os.replace(src, Path(f"{aside}{suffix}"))
                moved.append((src, Path(f"{aside}{suffix}")))
    except OSError as exc:  # (another program has it open): put back what moved, touch nothing else
        for src, dst in reversed(moved):
            with contextlib.suppress(OSError):
                os.replace(dst, src)
        log.warning("chat database %s could not be moved aside: %s", path, exc)
        return _in_memory(
            f"The chat database could not be opened ({why}), and it could not be moved aside "
            f"({exc.strerror or exc}), so it was left as it is and nothing was recovered from it. Chats of this "
            "session are kept in memory only: close any other program using it and restart Ember."
        )
    store = ConversationStore(path)
    scan = _Scan(time.monotonic() + SCAN_TIME_LIMIT_S)
    conversations, messages = _read_what_can_be_read(aside, scan)
    restored = store.restore(conversations, messages)
    n_conv, n_msg = restored.chats, restored.messages
    notice = (
        f"The chat database could not be opened ({why}). It was moved to {aside}; "
        f"{n_conv} chats with {n_msg} messages could be read from it and were recovered."
        if n_conv or n_msg
        else f"The chat database could not be opened ({why}). It was moved to {aside}; nothing in it could be "
        "read, so Ember starts with an empty chat list."
    )
    if restored.repaired_values:
        notice += (
            f" {restored.repaired_values} damaged values in them (such as a message's metrics or a chat's "
            "settings) could not be used and were left empty."
        )
    if restored.left_out:
        notice += f" {restored.left_out} messages or chats that no longer fit (their chat was lost) were left out."
    unread = " and ".join(scan.unread) or None
    if unread:
        notice += (
            f" Reading the damaged file was stopped after {scan.why}, so {unread} were not recovered; "
            "they may still be in the file that was moved aside."
        )
    log.warning("%s", notice)
    return OpenedStore(store, notice, aside, n_conv, n_msg, restored.repaired_values, unread)


@dataclass
class _Scan:
    """The bounds of reading a damaged file: a deadline, and how many unreadable row numbers a table
    may step over; `unread` says what was not reached."""

    deadline: float
    unread: list[str] = field(default_factory=list)
    why: str = ""

    def out_of_time(self) -> bool:
        if time.monotonic() >= self.deadline:
            self.why = f"{SCAN_TIME_LIMIT_S:g} seconds"
            return True
        return False

    def stop(self, noun: str, next_id: int | None) -> None:
        self.unread.append(f"the {noun} from number {next_id} on" if next_id is not None else f"the {noun}")


def _rows(db: sqlite3.Connection, table: str, columns: tuple[str, ...], scan: _Scan, noun: str) -> list[dict[str, Any]]:
    """Every row SQLite can still read, in id order: all at once; where a damaged page stops that, the
    ids after it one by one until the reading goes on (a damaged page loses only its rows). Bounded by
    `scan`: a huge or badly damaged file cannot hold up the start."""
    try:
        have = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
    except sqlite3.DatabaseError:
        return []
    wanted = [c for c in columns if c in have]
    if "id" not in wanted:
        return []
    at_id = wanted.index("id")
    select = f"SELECT {', '.join(wanted)} FROM {table}"
    try:
        top = db.execute(f"SELECT max(id) FROM {table}").fetchone()[0]
    except sqlite3.DatabaseError:
        top = None  # (the last page is damaged): step on until the limit
    out: list[dict[str, Any]] = []
    next_id: int | None = None  # None: from the first row
    skipped = 0
    while True:
        if scan.out_of_time():
            scan.stop(noun, next_id)
            return out
        read_before = len(out)
        try:
            if next_id is None:
                cursor = db.execute(select + " ORDER BY id")
            else:
                cursor = db.execute(select + " WHERE id >= ? ORDER BY id", (next_id,))
            for row in cursor:
                out.append(dict(zip(wanted, row, strict=True)))
                next_id = int(row[at_id]) + 1
                if len(out) % 500 == 0 and scan.out_of_time():
                    scan.stop(noun, next_id)
                    return out
            return out  # the end of the table
        except sqlite3.DatabaseError:  # a damaged page
            if next_id is None:
                next_id = 1  # (Ember's ids start at 1) seek to the first one
            elif len(out) == read_before:  # this number cannot be read: step over it
                next_id += 1
                skipped += 1
            if top is not None and next_id > top:
                return out
            if skipped >= SCAN_SKIP_LIMIT:
                scan.why = scan.why or f"{SCAN_SKIP_LIMIT:,} unreadable {noun[:-1]} numbers"
                scan.stop(noun, next_id)
                return out


def _read_what_can_be_read(path: Path, scan: _Scan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.DatabaseError:
        return [], []
    try:
        db.execute("PRAGMA query_only=ON")
        return (
            _rows(db, "conversations", CONVERSATION_COLUMNS, scan, "chats"),
            _rows(db, "messages", MESSAGE_COLUMNS, scan, "messages"),
        )
    except sqlite3.DatabaseError:
        return [], []
    finally:
        db.close()
