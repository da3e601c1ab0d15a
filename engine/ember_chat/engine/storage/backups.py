"""Backups of the chat database: copies made with SQLite's online backup API, kept in `<db folder>/backups`.

- A copy is written to a temporary name (`….part`), then renamed: a copy that is listed is whole. It is a
  database on its own (journal mode DELETE: no -wal beside it). Its name says when and why it was made
  (`chats-20261204-210915-000000-daily.sqlite3`, UTC); its chats and schema are read from the file.
- The newest `keep` are kept; the copies made before a schema migration, and those a restore set aside,
  are counted apart (each kind its newest `keep`), so daily copies never remove the last one made before
  an update, nor the chats a restore said it kept aside.
- A manual or daily copy reads the database through its own read-only connection holding one snapshot
  for every step, so it can run on a worker thread while the window keeps writing (WAL); it can be
  cancelled between steps.
- A restore first copies the current database aside ("before restore"), then copies the backup INTO the
  store's own connection (`backup.backup(live)`), so every holder of that connection (the store, its tool
  records, the attachment store) goes on working with the restored rows; then migrates it to this
  Ember's schema. A damaged backup is listed (chats None) and refused for a restore with a sentence.
  The older "before restore" copies beyond `keep` are pruned only once the restore has succeeded, and
  the copy just restored (an undo of a restore) is never among them.
- The attachment files a backup's chats refer to are kept beside the backups (`backups/attachments`,
  content-addressed like the data folder's: hard links where the file system allows, else copies), so
  a restored chat has its files even after they were pruned; those no backup refers to any more go
  when backups are pruned. A restore puts back the files its chats lack.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.backup_files import (
    BEFORE_MIGRATION,
    BEFORE_RESTORE,
    DAILY,
    DEFAULT_KEEP,
    MANUAL,
    BackupInfo,
    Progress,
    backup_folder,
    copy_into,
    keep_files,
    listed,
    open_read_only,
    prune,
    put_files_back,
    write_copy,
)
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.schema import SCHEMA_VERSION, migrate

_APART = (BEFORE_MIGRATION, BEFORE_RESTORE)  # counted apart: daily and manual copies never remove the last one
DAY_S = 24 * 3600.0


class BackupManager:
    """The backups of one store's database. `keep` may be changed (the setting `backups_keep`); it applies
    at the next backup. One backup or restore at a time per manager."""

    def __init__(
        self,
        store: ConversationStore,
        folder: Path | None = None,
        keep: int = DEFAULT_KEEP,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.in_memory = str(store.path) == ":memory:"
        self.folder = Path(folder) if folder is not None else backup_folder(store.path)
        self.keep = keep
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def keep(self) -> int:
        return self._keep

    @keep.setter
    def keep(self, value: int) -> None:
        self._keep = max(1, int(value))

    def backups(self) -> list[BackupInfo]:
        """Newest first; a damaged file is listed with chats None."""
        if self.in_memory or not self.folder.is_dir():
            return []
        return listed(self.folder)

    def backup(
        self, reason: str = MANUAL, *, progress: Progress | None = None, cancel: threading.Event | None = None
    ) -> BackupInfo:
        """A copy of the database as it is now (while the window keeps writing), then the oldest beyond
        `keep` are removed. `cancel` set: BackupCancelled, nothing kept."""
        self._check_on_disk()
        with self._lock:
            source = open_read_only(self.store.path, immutable=False)
            try:
                source.execute("BEGIN")  # one snapshot for every step: a write meanwhile never restarts the copy
                source.execute("SELECT count(*) FROM sqlite_master").fetchone()
                info = write_copy(source, self.folder, reason, self._clock(), progress, cancel)
            except sqlite3.Error as exc:
                raise StoreError(f"The chats could not be backed up to {self.folder} ({exc}).") from exc
            except OSError as exc:
                raise StoreError(
                    f"The chats could not be backed up to {self.folder} ({exc.strerror or exc}). "
                    "Check there is free space and that the folder can be written."
                ) from exc
            finally:
                source.close()
                with contextlib.suppress(sqlite3.Error):  # (a delete's sweep this copy's snapshot held up)
                    self.store.organise.finish_sweep()
            keep_files(info.path, self.store.path.parent)
            prune(self.folder, self.keep, lambda b: b.reason not in _APART)
            return info

    def daily(self, *, cancel: threading.Event | None = None) -> BackupInfo | None:
        """A backup when the newest readable one is older than a day (or there is none); else None. A
        database without chats (a new user's) is not copied."""
        if self.in_memory or not self._has_chats():
            return None
        newest = max((b.created_at for b in self.backups() if b.chats is not None), default=None)
        if newest is not None and self._clock() - newest < DAY_S:
            return None
        return self.backup(DAILY, cancel=cancel)

    def restore(self, info: BackupInfo) -> BackupInfo:
        """Copy the current database aside ("before restore"), then the backup into the store's own
        connection, migrated to this Ember's schema. Returns the copy set aside. A backup that cannot be
        restored is refused before anything changes."""
        self._check_on_disk()
        problem = restore_problem(info.path)
        if problem is not None:
            raise StoreError(problem)
        db, lock = self.store.shared_connection()
        with self._lock:
            aside = self._restore_into(info, db, lock)
            put_files_back(info.path, self.store.path.parent)
            # Only now that the restore succeeded, and never the copy just restored: undoing a restore
            # restores a "before restore" copy, which pruning first would delete before it was read (with
            # keep 1, the only copy of the chats the undo was to bring back).
            restored = info.path.resolve()
            prune(self.folder, self.keep, lambda b: b.reason == BEFORE_RESTORE and b.path.resolve() != restored)
        return aside

    def _restore_into(self, info: BackupInfo, db: sqlite3.Connection, lock: threading.RLock) -> BackupInfo:
        """The copy set aside, then the backup in the live connection (StoreError: the chats put back)."""
        with lock:
            try:
                # under the store's lock: no write falls between this copy and the restore
                aside = write_copy(db, self.folder, BEFORE_RESTORE, self._clock())
            except (OSError, sqlite3.Error) as exc:
                raise StoreError(
                    f"The current chats could not be set aside before the restore ({exc}), so nothing was restored. "
                    "Check there is free space in the backups folder."
                ) from exc
            keep_files(aside.path, self.store.path.parent)
            try:
                copy_into(info.path, db)
                migrate(db, self.store.path, before=None)  # (the backup is a copy already)
            except (sqlite3.Error, StoreError) as exc:
                copy_into(aside.path, db)
                raise StoreError(
                    f"The backup {info.path.name} could not be restored ({exc}). Your chats are as they were."
                ) from exc
            self.store.tools.interrupt_waiting()  # a consent card that waited when the copy was made: over
        return aside

    def _has_chats(self) -> bool:
        db, lock = self.store.shared_connection()
        with lock:
            return bool(db.execute("SELECT EXISTS (SELECT 1 FROM conversations)").fetchone()[0])

    def _check_on_disk(self) -> None:
        if self.in_memory:
            raise StoreError(
                "The chats of this session are kept in memory only (the chat database could not be opened), "
                "so they cannot be backed up or restored. Restart Ember once the database can be used."
            )


def restore_problem(path: Path) -> str | None:
    """Why this file cannot be restored, in a sentence; None when it can."""
    try:
        db = open_read_only(path, immutable=True)
        try:
            check = db.execute("PRAGMA quick_check(1)").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except sqlite3.Error as exc:
        check, version, tables = str(exc), 0, set()
    if check != "ok":
        return (
            f"The backup {path.name} cannot be restored: it is damaged ({check}). Choose another backup; "
            "your chats are unchanged."
        )
    if version > SCHEMA_VERSION:
        return (
            f"The backup {path.name} was made by a newer Ember (schema {version}); update Ember to restore it. "
            "Your chats are unchanged."
        )
    if version < 1 or not {"conversations", "messages"} <= tables:
        return f"The backup {path.name} cannot be restored: it is not an Ember chat database. Your chats are unchanged."
    return None
