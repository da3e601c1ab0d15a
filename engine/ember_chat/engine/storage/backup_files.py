"""The backups folder's files (`<db folder>/backups`): a copy written whole under a name that says when
and why (`chats-20261204-210915-000000-daily.sqlite3`, UTC), what a copy holds read from the file, the
oldest pruned, and the attachment files the copies refer to kept beside them. Also the copy made before
a schema migration (schema.py calls it). The manager that makes and restores backups: backups.py."""

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

log = logging.getLogger(__name__)

MANUAL = "manual"
DAILY = "daily"
BEFORE_MIGRATION = "before migration"
BEFORE_RESTORE = "before restore"
DEFAULT_KEEP = 10
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
        info = write_copy(db, folder, BEFORE_MIGRATION, time.time())
        keep_files(info.path, path.parent)
        prune(folder, DEFAULT_KEEP, lambda b: b.reason == BEFORE_MIGRATION)
    except (OSError, sqlite3.Error) as exc:
        log.warning(
            "The chat database %s could not be backed up before its update from schema %d: %s", path, version, exc
        )
        return None
    log.info("chat database backed up before its update from schema %d: %s", version, info.path)
    return info


# ----- files
def listed(folder: Path) -> list[BackupInfo]:
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
        db = open_read_only(path, immutable=True)
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            columns = {r[1] for r in db.execute("PRAGMA table_info(conversations)")}
            if "deleted_at" in columns:  # (a negative deleted_at: an import's chats still hidden, not the Trash)
                shown, trashed = db.execute(
                    "SELECT count(*) FILTER (WHERE deleted_at IS NULL), count(*) FILTER (WHERE deleted_at >= 0)"
                    " FROM conversations"
                ).fetchone()
                chats, trashed = int(shown), int(trashed)
            else:
                chats = int(db.execute("SELECT count(*) FROM conversations").fetchone()[0])
        except sqlite3.Error:
            chats = version = None
            trashed = 0
        finally:
            db.close()
    return BackupInfo(path, created, size, chats, version, match[2].replace("-", " "), trashed)


def write_copy(
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


def copy_into(path: Path, db: sqlite3.Connection) -> None:
    source = open_read_only(path, immutable=True)
    try:
        source.backup(db)
    finally:
        source.close()


def prune(folder: Path, keep: int, counted: Callable[[BackupInfo], bool]) -> None:
    backups = listed(folder)  # (each read once: listing opens every copy)
    gone = [b for b in backups if counted(b)][max(1, keep) :]
    for old in gone:
        with contextlib.suppress(FileNotFoundError):
            old.path.unlink()
    files = folder / "attachments"
    if files.is_dir():
        wanted: set[str] = set()
        for b in backups:
            if b not in gone:
                wanted |= _attachment_hashes(b.path)
        for kept in files.glob("??/*"):
            if kept.name not in wanted:
                with contextlib.suppress(OSError):
                    kept.unlink()


# ----- attachment files (the data folder's `attachments/ab/abcdef…`, see engine/attachments/store.py)
def _attachment_hashes(backup: Path) -> set[str]:
    try:
        db = open_read_only(backup, immutable=True)
        try:
            rows = db.execute("SELECT DISTINCT sha256 FROM attachments").fetchall()
        finally:
            db.close()
    except sqlite3.Error:  # damaged, or from before attachments
        return set()
    return {r[0] for r in rows if isinstance(r[0], str) and _SHA256.match(r[0])}


def keep_files(backup: Path, data_dir: Path) -> None:
    """Keep the attachment files this backup refers to beside the backups. One that cannot be kept is
    logged: the backup itself is whole."""
    try:
        for sha in _attachment_hashes(backup):
            _link_or_copy(data_dir / "attachments" / sha[:2] / sha, backup.parent / "attachments" / sha[:2] / sha)
    except OSError as exc:
        log.warning("attachment files of backup %s could not all be kept: %s", backup, exc)


def put_files_back(backup: Path, data_dir: Path) -> None:
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


def open_read_only(path: Path, *, immutable: bool) -> sqlite3.Connection:
    """`immutable`: a backup, which nothing writes (no locks, nothing created beside it); else the live
    database, read beside the store's own connection (WAL)."""
    uri = Path(path).resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
    return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
