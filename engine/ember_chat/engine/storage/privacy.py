"""The privacy sweep after chats are deleted for good: nothing of them is left to read in the files.

The store runs with `PRAGMA secure_delete=ON` (freed pages are zeroed). After a hard delete: the files
only the deleted chats used go (their rows, passages and blobs), the full-text indexes are merged
(`optimize` drops the deleted words from their segments), the WAL is checkpointed and truncated, the
file is rebuilt (`VACUUM`), and the WAL truncated again. While another connection reads a snapshot from
before the delete (a backup's copy, `ember-chat chats` in another process) the WAL cannot be emptied: the
sweep is left pending and finished later (`Organiser.finish_sweep`: when a backup ends, at close).

The saved conversation caches (KV snapshots, `<data folder>/kv-snapshots/*.kvsnap`) hold the tokens of
the chats they were made from, and a snapshot belongs to its tokens, not to a chat: one may hold several
chats' words (a chat's prefix restored and extended by another, an API client sending a chat again), and
this process may have no model to read them with (`ember-chat chats rm --purge`, the Trash emptied at
open). So every sweep removes them all: a cache only saves time, a chat that comes back is read again.
A running window also drops its copies in memory and the model's live sequences
(EngineService.forget_conversations). Backups are the user's own copies: a sweep never touches them.

A project's knowledge index (`<data folder>/projects/<folder id>/`) holds passages of the user's files:
a sweep removes those of projects no longer in the database (their folder deleted, its undo not taken
before the purge). A project an older undo brings back after that indexes its knowledge again. The
user's own files, the knowledge sources, are never touched."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from ember_chat.engine.storage.paths import (
    KV_SNAPSHOT_FOLDER,
    KV_SNAPSHOT_SUFFIX,
    KV_SNAPSHOT_TMP_SUFFIX,
    PROJECTS_FOLDER,
)
from ember_chat.engine.storage.project_tables import drop_unused_knowledge
from ember_chat.engine.storage.rows import batches, transaction

log = logging.getLogger(__name__)


def attachments_of(db: sqlite3.Connection, conversation_ids: Iterable[int]) -> set[int]:
    """The attachments linked to these chats' messages."""
    out: set[int] = set()
    for batch in batches(conversation_ids):
        marks = ",".join("?" * len(batch))
        out.update(
            r[0]
            for r in db.execute(
                "SELECT DISTINCT ma.attachment_id FROM message_attachments ma JOIN messages m"
                f" ON m.id = ma.message_id WHERE m.conversation_id IN ({marks})",
                batch,
            )
        )
    return out


def sweep(db: sqlite3.Connection, lock: threading.RLock, path: Path, attachments: Iterable[int] = ()) -> str | None:
    """`attachments`: those the deleted chats used; the ones no message refers to any more go (a file
    attached to a message not sent yet is never among them). Returns what is left to do (`compact`'s
    step) when another connection held it up, else None."""
    with lock:
        gone: list[str] = []
        with transaction(db, lock):
            for batch in batches(attachments):
                marks = ",".join("?" * len(batch))
                unused = db.execute(
                    f"SELECT id, sha256 FROM attachments WHERE id IN ({marks})"
                    " AND id NOT IN (SELECT attachment_id FROM message_attachments)",
                    batch,
                ).fetchall()
                db.executemany("DELETE FROM attachments WHERE id = ?", [(r[0],) for r in unused])
                gone.extend(r[1] for r in unused)
            kept = {r[0] for r in db.execute("SELECT DISTINCT sha256 FROM attachments")}
            db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            db.execute("INSERT INTO attachment_chunks_fts(attachment_chunks_fts) VALUES ('optimize')")
        left = compact(db, lock, VACUUM)
    blobs = path.parent / "attachments"  # (as AttachmentStore.blob_path)
    for sha in set(gone) - kept:
        with contextlib.suppress(FileNotFoundError):
            (blobs / sha[:2] / sha).unlink()
    if str(path) != ":memory:":  # (a store kept in memory has no data folder of its own)
        drop_conversation_caches(path.parent / KV_SNAPSHOT_FOLDER)
    drop_deleted_projects(db, lock, path)
    return left


def drop_deleted_projects(db: sqlite3.Connection, lock: threading.RLock, path: Path) -> int:
    """Remove the knowledge indexes of projects no longer in the database at `path` (see the module's doc);
    how many went."""
    if str(path) == ":memory:":
        return 0
    with lock:
        return drop_unused_knowledge(db, path.parent / PROJECTS_FOLDER)


def drop_conversation_caches(folder: Path) -> int:
    """Remove the saved conversation caches' files in `folder` (whole ones and those being written; see
    the module's doc, and SnapshotStore.clear, which calls it too); how many went. One that cannot be
    removed is logged: the chats are deleted all the same."""
    try:
        files = [p for p in folder.iterdir() if p.name.endswith((KV_SNAPSHOT_SUFFIX, KV_SNAPSHOT_TMP_SUFFIX))]
    except FileNotFoundError:
        return 0
    except OSError as exc:
        log.warning("The saved conversation caches in %s could not be listed to delete them: %s", folder, exc)
        return 0
    removed = 0
    for file in files:
        try:
            file.unlink()
            removed += 1
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("The saved conversation cache %s could not be deleted: %s", file, exc)
    return removed


VACUUM = "vacuum"  # what is left of a sweep: the file to rebuild and the WAL to empty
CHECKPOINT = "checkpoint"  # the WAL to empty (another reader's snapshot held it)


def compact(db: sqlite3.Connection, lock: threading.RLock, step: str) -> str | None:
    """Rebuild the file (from `VACUUM`) and empty the WAL; what is left to do when another connection holds
    it up (a reader's snapshot keeps the WAL's frames, a writer the VACUUM), else None."""
    with lock:
        try:
            if step == VACUUM:
                _checkpoint(db)
                db.execute("VACUUM")
            busy = _checkpoint(db)
        except sqlite3.OperationalError as exc:  # another process writes: done later
            log.warning("The chat database could not be compacted after a delete: %s", exc)
            return step
    if busy:
        log.info("Another reader holds the chat database's WAL: it is emptied later")
        return CHECKPOINT
    return None


def _checkpoint(db: sqlite3.Connection) -> bool:
    """Copy the WAL into the file and empty it; True (busy) when a reader's snapshot kept it from being
    emptied. Never waits for that reader (a backup's copy may take minutes)."""
    wait = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout = 0")
    try:
        return bool(db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(wait)}")
