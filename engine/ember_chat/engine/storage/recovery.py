"""Opening the chat database whatever state it is in, so a damaged file never stops Ember.

- Damaged (not a database, truncated, malformed), a migration that fails, or a schema from a newer
  Ember: the file (with its -wal/-shm) is moved aside with a timestamp, every conversation and
  message SQLite can still read is copied into a fresh database, and the notice says what happened
  and where the old file is.
- Locked by another program, or a folder that cannot be written: nothing is moved (the file is not
  damaged); this session keeps its chats in memory and the notice says why and what to do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember_chat.engine.storage.conversations import ConversationStore, StoreError

log = logging.getLogger(__name__)

CONVERSATION_COLUMNS = ("id", "title", "model", "system_prompt", "params", "created_at", "updated_at", "active_leaf")
MESSAGE_COLUMNS = ("id", "conversation_id", "parent_id", "role", "content", "metrics", "complete", "created_at")
_NOT_DAMAGED = ("database is locked", "unable to open database file", "readonly database", "disk i/o error")


@dataclass(frozen=True)
class OpenedStore:
    store: ConversationStore
    notice: str | None = None  # what happened, for the user; None when all was well
    moved_to: Path | None = None
    recovered_conversations: int = 0
    recovered_messages: int = 0


def open_conversations(path: Path) -> OpenedStore:
    try:
        store = ConversationStore(path)
        problem = store.integrity_problem()
        if problem is None:
            return OpenedStore(store)
        store.close()
        return _move_aside_and_recover(path, f"it is damaged: {problem}")
    except StoreError as exc:
        cause = str(exc.__cause__ or exc).lower()
        if any(s in cause for s in _NOT_DAMAGED):
            log.warning("chat database %s unusable: %s", path, exc)
            return OpenedStore(
                ConversationStore(Path(":memory:")),
                f"The chat database {path} cannot be used right now ({exc.__cause__ or exc}). Chats of this "
                "session are kept in memory only: close any other program using it, check the folder can be "
                "written, and restart Ember.",
            )
        return _move_aside_and_recover(path, str(exc))


def _move_aside_and_recover(path: Path, why: str) -> OpenedStore:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.stem}.damaged-{stamp}{path.suffix}")
    for suffix in ("", "-wal", "-shm"):  # the WAL belongs to the file: it moves with it
        src = Path(f"{path}{suffix}")
        if src.exists():
            os.replace(src, Path(f"{aside}{suffix}"))
    store = ConversationStore(path)
    conversations, messages = _read_what_can_be_read(aside)
    n_conv, n_msg = store.restore(conversations, messages)
    notice = (
        f"The chat database could not be opened ({why}). It was moved to {aside}; "
        f"{n_conv} chats with {n_msg} messages could be read from it and were recovered."
        if n_conv or n_msg
        else f"The chat database could not be opened ({why}). It was moved to {aside}; nothing in it could be "
        "read, so Ember starts with an empty chat list."
    )
    log.warning("%s", notice)
    return OpenedStore(store, notice, aside, n_conv, n_msg)


def _rows(db: sqlite3.Connection, table: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every row SQLite can still read: all at once, else one by one (a damaged page loses only its rows)."""
    try:
        have = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
    except sqlite3.DatabaseError:
        return []
    wanted = [c for c in columns if c in have]
    if "id" not in wanted:
        return []
    select = f"SELECT {', '.join(wanted)} FROM {table}"
    try:
        return [dict(zip(wanted, row, strict=True)) for row in db.execute(select + " ORDER BY id")]
    except sqlite3.DatabaseError:
        pass
    try:
        top = db.execute(f"SELECT max(id) FROM {table}").fetchone()[0] or 0
    except sqlite3.DatabaseError:
        top = 100_000
    out = []
    for rowid in range(1, int(top) + 1):
        with contextlib.suppress(sqlite3.DatabaseError):
            row = db.execute(select + " WHERE id = ?", (rowid,)).fetchone()
            if row is not None:
                out.append(dict(zip(wanted, row, strict=True)))
    return out


def _read_what_can_be_read(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.DatabaseError:
        return [], []
    try:
        db.execute("PRAGMA query_only=ON")
        return _rows(db, "conversations", CONVERSATION_COLUMNS), _rows(db, "messages", MESSAGE_COLUMNS)
    except sqlite3.DatabaseError:
        return [], []
    finally:
        db.close()
