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
import logging
import os
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.schema import SCHEMA_VERSION, migrate

log = logging.getLogger(__name__)

MANUAL = "manual"
DAILY = "daily"
BEFORE_MIGRATION = "before migration"
BEFORE_RESTORE = "before restore"
DEFAULT_KEEP = 10
_APART = (BEFORE_MIGRATION, BEFORE_RESTORE)  # counted apart: daily and manual copies never remove the last one
DAY_S = 24 * 3600.0
_STEP_PAGES = 1024  # 4 MiB at SQLite's usual page size: a cancel is seen between steps
_STALE_PART_S = 3600.0  # a temporary copy this old was left by a run that ended mid-copy
_NAME = re.compile(r"^chats-(\d{8}-\d{6}-\d{6})-([a-z0-9-]+)\.sqlite3$")
_TIME = "%Y%m%d-%H%M%S-%f"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Progress = Callable[[int, int], None]  # (pages copied, pages in all)


class BackupCancelled(StoreError):
    """A backup stopped before it was complete; nothing was kept of it."""


@dataclass(frozen=True)
class BackupInfo:
    path: Path
    created_at: float  # seconds since the epoch
    size: int  # bytes
    chats: int | None  # chats in it (the Trash not counted); None: the file cannot be read (damaged)
    schema_version: int | None  # None: damaged
    reason: str  # "manual", "daily", "before migration", "before restore"
    trashed: int = 0  # chats in it that are in the Trash (a restore brings them back there)

    @property
    def in_file(self) -> int | None:
        """Every chat the file holds, the Trash's included ("Backed up 6 chats" of a file holding 7 read
        as a chat lost); None: damaged. An import's chats still hidden when it was copied are not
        chats (a store opening the file deletes them)."""
        return None if self.chats is None else self.chats + self.trashed


def backup_folder(database: Path) -> Path:
    return Path(database).parent / "backups"


def backup_before_migration(db: sqlite3.Connection, path: Path, version: int) -> BackupInfo | None:
    """Called by schema.migrate before an existing database migrates. A copy that cannot be written (no
    room, a folder that cannot be written) is logged and the migration goes on: it runs in transactions
    of its own, and refusing to open the chats would cost the user more than the copy protects."""
    folder = backup_folder(path)
    try:
        info = _write(db, folder, BEFORE_MIGRATION, time.time())
        _keep_files(info.path, path.parent)
        _prune(folder, DEFAULT_KEEP, lambda b: b.reason == BEFORE_MIGRATION)
    except (OSError, sqlite3.Error) as exc:
        log.warning(
            "The chat database %s could not be backed up before its update from schema %d: %s", path, version, exc
        )
        return None
    log.info("chat database backed up before its update from schema %d: %s", version, info.path)
    return info


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
        return _listed(self.folder)

    def backup(
        self, reason: str = MANUAL, *, progress: Progress | None = None, cancel: threading.Event | None = None
    ) -> BackupInfo:
        """A copy of the database as it is now (while the window keeps writing), then the oldest beyond
        `keep` are removed. `cancel` set: BackupCancelled, nothing kept."""
        self._check_on_disk()
        with self._lock:
            source = _open_read_only(self.store.path, immutable=False)
            try:
                source.execute("BEGIN")  # one snapshot for every step: a write meanwhile never restarts the copy
                source.execute("SELECT count(*) FROM sqlite_master").fetchone()
                info = _write(source, self.folder, reason, self._clock(), progress, cancel)
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
            _keep_files(info.path, self.store.path.parent)
            _prune(self.folder, self.keep, lambda b: b.reason not in _APART)
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
            _put_files_back(info.path, self.store.path.parent)
            # Only now that the restore succeeded, and never the copy just restored: undoing a restore
            # restores a "before restore" copy, which pruning first would delete before it was read (with
            # keep 1, the only copy of the chats the undo was to bring back).
            restored = info.path.resolve()
            _prune(self.folder, self.keep, lambda b: b.reason == BEFORE_RESTORE and b.path.resolve() != restored)
        return aside

    def _restore_into(self, info: BackupInfo, db: sqlite3.Connection, lock: threading.RLock) -> BackupInfo:
        """The copy set aside, then the backup in the live connection (StoreError: the chats put back)."""
        with lock:
            try:
                # under the store's lock: no write falls between this copy and the restore
                aside = _write(db, self.folder, BEFORE_RESTORE, self._clock())
            except (OSError, sqlite3.Error) as exc:
                raise StoreError(
                    f"The current chats could not be set aside before the restore ({exc}), so nothing was restored. "
                    "Check there is free space in the backups folder."
                ) from exc
            _keep_files(aside.path, self.store.path.parent)
            try:
                _copy_into(info.path, db)
                migrate(db, self.store.path, before=None)  # (the backup is a copy already)
            except (sqlite3.Error, StoreError) as exc:
                _copy_into(aside.path, db)
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
        db = _open_read_only(path, immutable=True)
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


# ----- files
def _listed(folder: Path) -> list[BackupInfo]:
    infos = [_info(p) for p in folder.iterdir() if _NAME.match(p.name)]
    return sorted(infos, key=lambda b: (b.created_at, b.path.name), reverse=True)


def _info(path: Path) -> BackupInfo:
    match = _NAME.match(path.name)
    assert match is not None
    created = datetime.strptime(match[1], _TIME).replace(tzinfo=UTC).timestamp()
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    chats = version = None
    trashed = 0
    with contextlib.suppress(sqlite3.Error):
        db = _open_read_only(path, immutable=True)
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            columns = {r[1] for r in db.execute("PRAGMA table_info(conversations)")}
            if "deleted_at" in columns:  # (a negative deleted_at: an import's chats still hidden, not the Trash)
                listed, trashed = db.execute(
                    "SELECT count(*) FILTER (WHERE deleted_at IS NULL), count(*) FILTER (WHERE deleted_at >= 0)"
                    " FROM conversations"
                ).fetchone()
                chats, trashed = int(listed), int(trashed)
            else:
                chats = int(db.execute("SELECT count(*) FROM conversations").fetchone()[0])
        except sqlite3.Error:
            chats = version = None
            trashed = 0
        finally:
            db.close()
    return BackupInfo(path, created, size, chats, version, match[2].replace("-", " "), trashed)


def _write(
    source: sqlite3.Connection,
    folder: Path,
    reason: str,
    created_at: float,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> BackupInfo:
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_parts(folder)
    final = _free_name(folder, created_at, reason)
    part = final.with_name(final.name + ".part")

    def step(_status: int, remaining: int, total: int) -> None:
        if progress is not None:
            progress(total - remaining, total)
        if cancel is not None and cancel.is_set():
            raise BackupCancelled("The backup was cancelled; nothing was kept of it.")

    target = sqlite3.connect(part, isolation_level=None)
    try:
        source.backup(target, pages=_STEP_PAGES, progress=step)
        target.execute("PRAGMA journal_mode=DELETE")  # a file that stands alone
        target.close()
        part.rename(final)  # (a name no file has: nothing is replaced)
    except BaseException:
        target.close()
        with contextlib.suppress(OSError):
            part.unlink()
        raise
    return _info(final)


def _copy_into(path: Path, db: sqlite3.Connection) -> None:
    source = _open_read_only(path, immutable=True)
    try:
        source.backup(db)
    finally:
        source.close()


def _prune(folder: Path, keep: int, counted: Callable[[BackupInfo], bool]) -> None:
    for old in [b for b in _listed(folder) if counted(b)][max(1, keep) :]:
        with contextlib.suppress(FileNotFoundError):
            old.path.unlink()
    files = folder / "attachments"
    if files.is_dir():
        wanted: set[str] = set()
        for b in _listed(folder):
            wanted |= _attachment_hashes(b.path)
        for kept in files.glob("??/*"):
            if kept.name not in wanted:
                with contextlib.suppress(OSError):
                    kept.unlink()


# ----- attachment files (the data folder's `attachments/ab/abcdef…`, see engine/attachments/store.py)
def _attachment_hashes(backup: Path) -> set[str]:
    try:
        db = _open_read_only(backup, immutable=True)
        try:
            rows = db.execute("SELECT DISTINCT sha256 FROM attachments").fetchall()
        finally:
            db.close()
    except sqlite3.Error:  # damaged, or from before attachments
        return set()
    return {r[0] for r in rows if isinstance(r[0], str) and _SHA256.match(r[0])}


def _keep_files(backup: Path, data_dir: Path) -> None:
    """Keep the attachment files this backup refers to beside the backups. One that cannot be kept is
    logged: the backup itself is whole."""
    try:
        for sha in _attachment_hashes(backup):
            _link_or_copy(data_dir / "attachments" / sha[:2] / sha, backup.parent / "attachments" / sha[:2] / sha)
    except OSError as exc:
        log.warning("attachment files of backup %s could not all be kept: %s", backup, exc)


def _put_files_back(backup: Path, data_dir: Path) -> None:
    try:
        for sha in _attachment_hashes(backup):
            _link_or_copy(backup.parent / "attachments" / sha[:2] / sha, data_dir / "attachments" / sha[:2] / sha)
    except OSError as exc:
        log.warning("attachment files of backup %s could not all be put back: %s", backup, exc)


def _link_or_copy(source: Path, target: Path) -> None:
    """A file is never changed once written (content-addressed), so a hard link is a copy that costs
    nothing; another file system gets a real copy (to a temporary name first)."""
    if target.exists() or not source.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except FileExistsError:
        return
    except OSError:
        part = target.with_name(f".part-{target.name}")
        shutil.copyfile(source, part)
        os.replace(part, target)


def _free_name(folder: Path, created_at: float, reason: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", reason.lower()).strip("-") or MANUAL
    when = datetime.fromtimestamp(created_at, UTC)
    while True:
        path = folder / f"chats-{when.strftime(_TIME)}-{slug}.sqlite3"
        if not path.exists() and not path.with_name(path.name + ".part").exists():
            return path
        when += timedelta(microseconds=1)


def _remove_stale_parts(folder: Path) -> None:
    now = time.time()
    for part in folder.glob("chats-*.sqlite3.part"):
        with contextlib.suppress(OSError):
            if now - part.stat().st_mtime > _STALE_PART_S:
                part.unlink()


def _open_read_only(path: Path, *, immutable: bool) -> sqlite3.Connection:
    """`immutable`: a backup, which nothing writes (no locks, nothing created beside it); else the live
    database, read beside the store's own connection (WAL)."""
    uri = Path(path).resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
    return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
