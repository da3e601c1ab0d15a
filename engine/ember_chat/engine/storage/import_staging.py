"""Chats an import is still writing: hidden by a staging marker until the import shows them all at once.

An import (importing.py) writes its chats in short transactions, a batch at a time, so the store's lock
is never held for the whole import. Its chats carry `deleted_at` = minus the time the import began (a
negative number: never a Trash time), which every list already leaves out (`deleted_at IS NULL`), and
the Trash's queries too (`deleted_at >= 0`, organise.py). One short last transaction sets it back to
NULL: all the chats appear together. A cancel or a failure deletes them again (`discard`); what an
import killed in the middle left (a crash, a power cut) is deleted when a store opens later
(`purge_stale`, from the store's __init__), once no import can still be writing it: imports that began
more than STALE_S ago (another process may be importing into the same file right now)."""

from __future__ import annotations

import logging
import sqlite3
import threading

from ember_chat.engine.storage.privacy import attachments_of
from ember_chat.engine.storage.rows import batches, transaction

__all__ = ["STALE_S", "discard", "marker", "purge_stale", "show"]

STALE_S = 3600.0  # an import still writing after an hour is taken for dead

log = logging.getLogger(__name__)


def marker(started_at: float) -> float:
    """The `deleted_at` of the chats of an import begun at `started_at` (a negative number)."""
    return -max(started_at, 1.0)


def show(db: sqlite3.Connection, lock: threading.RLock, mark: float) -> int:
    """The import's chats appear (one short transaction); how many."""
    with transaction(db, lock):
        return db.execute("UPDATE conversations SET deleted_at = NULL WHERE deleted_at = ?", (mark,)).rowcount


def discard(db: sqlite3.Connection, lock: threading.RLock, mark: float) -> None:
    """Delete what the import staged under `mark`."""
    _delete(db, lock, "deleted_at = ?", (mark,))


def purge_stale(db: sqlite3.Connection, lock: threading.RLock, now: float) -> None:
    """Delete what imports begun more than STALE_S before `now` left staged (housekeeping at open:
    never raises)."""
    try:
        _delete(db, lock, "deleted_at < 0 AND deleted_at > ?", (-(now - STALE_S),))
    except sqlite3.Error as exc:
        log.warning("Chats left by an import that did not finish were not removed at open: %s", exc)


def _delete(db: sqlite3.Connection, lock: threading.RLock, where: str, args: tuple[float, ...]) -> None:
    with transaction(db, lock):
        ids = [r[0] for r in db.execute(f"SELECT id FROM conversations WHERE {where}", args)]
        if not ids:
            return
        files = attachments_of(db, ids)
        for batch in batches(ids):
            marks = ",".join("?" * len(batch))
            db.execute(f"DELETE FROM messages WHERE conversation_id IN ({marks})", batch)
            db.execute(f"DELETE FROM conversations WHERE id IN ({marks})", batch)
        for batch in batches(sorted(files)):  # the attachments only these chats used (their blobs: the importer's)
            marks = ",".join("?" * len(batch))
            db.execute(
                f"DELETE FROM attachments WHERE id IN ({marks})"
                " AND id NOT IN (SELECT attachment_id FROM message_attachments)",
                batch,
            )
