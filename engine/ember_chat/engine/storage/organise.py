"""Chats kept in order (schema 5): folders nested one level, pins, the archive and the Trash, each change a
user may regret given back as an `Undo` that `Organiser.undo` reverses exactly: the same rows with the
same ids (a row whose id a newer row took since comes back under a new one, with what refers to it).

`store.organise` is made by the store. Organising is not activity: it never changes a chat's
`updated_at`, so the list's order by newest activity stays. A chat in the Trash keeps its folder, pin and
archive, and goes back to them when restored; the Trash is emptied for good after `TRASH_DAYS`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage import message_delete, privacy, project_tables
from ember_chat.engine.storage.records import Conversation, conversation_of
from ember_chat.engine.storage.rows import Row, batches, free_ids, insert_rows, rows_where_in, transaction
from ember_chat.engine.storage.titles import clean_name, clean_title, stored_name

TRASH_DAYS = 30  # chats in the Trash longer than this are deleted for good when the store opens
NO_UNDO = "This can no longer be undone: "


@dataclass(frozen=True)
class Folder:
    id: int
    name: str
    parent_id: int | None
    position: int
    collapsed: bool


@dataclass(frozen=True)
class Undo:
    """What reverses one change: `label` is the sentence for the banner ("Moved 3 chats to “Work”.");
    the payload is for `Organiser.undo` only."""

    label: str
    payload: tuple[object, ...] = field(repr=False, compare=False, default=())


def _folder_of(row: sqlite3.Row | Row) -> Folder:
    return Folder(row["id"], stored_name(row["name"]), row["parent_id"], row["position"], bool(row["collapsed"]))


class Organiser:
    """Folders, pins, archive, Trash and message deletion, on the store's connection and lock."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, clock: Callable[[], float], path: Path) -> None:
        self._db = db
        self._lock = lock
        self._clock = clock
        self._path = path  # the database file (the privacy sweep finds the attachments folder beside it)
        self._swept_at_close: set[int] | None = None  # files of deleted messages, for the sweep at close
        self._sweep_left: str | None = None  # what another connection held up of the last sweep (privacy.py)
        # An undo's payload names rows by their ids when it was made. An undo that puts rows back under new
        # ids (their ids were taken since) is noted here, so older undos name those rows by their new ids:
        self._changes = 0  # numbers each undoable change (its payload's second item)
        self._renamed: list[tuple[int, str, dict[int, int]]] = []  # (change that deleted, table, old -> new)
        self._gone: dict[tuple[str, int], int] = {}  # (table, id) deleted by a change not undone: its number

    # ----- folders
    def folders(self) -> list[Folder]:
        """Every folder, by position, then id (subfolders with their parent_id)."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM folders ORDER BY position, id").fetchall()
        return [_folder_of(r) for r in rows]

    def folder(self, folder_id: int) -> Folder:
        with self._lock:
            row = self._db.execute("SELECT * FROM folders WHERE id = ?", (folder_id,)).fetchone()
        if row is None:
            raise StoreError("This folder no longer exists; it may have been deleted.")
        return _folder_of(row)

    def folder_created_at(self, folder_id: int) -> float | None:
        """When the folder was made (None: there is none): what tells it from a folder made later with its id
        (a deleted folder's id may be given again)."""
        with self._lock:
            row = self._db.execute("SELECT created_at FROM folders WHERE id = ?", (folder_id,)).fetchone()
        return None if row is None else float(row[0])

    def create_folder(self, name: str, parent_id: int | None = None) -> Folder:
        name = _folder_name(name)
        with transaction(self._db, self._lock):
            self._check_parent(parent_id, None)
            cur = self._db.execute(
                "INSERT INTO folders (name, parent_id, position, created_at) VALUES (?, ?,"
                " (SELECT COALESCE(MAX(position) + 1, 0) FROM folders WHERE parent_id IS ?), ?)",
                (name, parent_id, parent_id, self._clock()),
            )
            return self.folder(int(cur.lastrowid or 0))

    def rename_folder(self, folder_id: int, name: str) -> Folder:
        name = _folder_name(name)
        with transaction(self._db, self._lock):
            self.folder(folder_id)
            self._db.execute("UPDATE folders SET name = ? WHERE id = ?", (name, folder_id))
        return self.folder(folder_id)

    def set_collapsed(self, folder_id: int, collapsed: bool) -> None:
        with self._lock:
            self._db.execute("UPDATE folders SET collapsed = ? WHERE id = ?", (int(collapsed), folder_id))

    def move_folder(self, folder_id: int, parent_id: int | None, position: int) -> None:
        """Put a folder under `parent_id` (None: the top level) at `position` among its new siblings."""
        with transaction(self._db, self._lock):
            self.folder(folder_id)
            self._check_parent(parent_id, folder_id)
            if (
                parent_id is not None
                and self._db.execute("SELECT 1 FROM folders WHERE parent_id = ? LIMIT 1", (folder_id,)).fetchone()
            ):
                raise StoreError("Folders nest one level: a folder with folders inside stays at the top.")
            ids = [
                r[0]
                for r in self._db.execute(
                    "SELECT id FROM folders WHERE parent_id IS ? AND id != ? ORDER BY position, id",
                    (parent_id, folder_id),
                )
            ]
            ids.insert(max(0, min(position, len(ids))), folder_id)
            self._db.execute("UPDATE folders SET parent_id = ? WHERE id = ?", (parent_id, folder_id))
            self._db.executemany("UPDATE folders SET position = ? WHERE id = ?", list(enumerate(ids)))

    def delete_folder(self, folder_id: int) -> Undo:
        """The folder and its subfolders go; their chats go to the Trash (undo brings all back). A project
        among them goes with its folder (its rows cascade), undo brings it back with its knowledge sources;
        its knowledge index stays on disk until the privacy sweep finds it deleted for good."""
        with transaction(self._db, self._lock):
            top = self.folder(folder_id)
            folders = rows_where_in(self._db, "folders", "id", [folder_id])
            folders += rows_where_in(self._db, "folders", "parent_id", [folder_id])
            projects = project_tables.snapshot(self._db, [f["id"] for f in folders])
            kept = rows_where_in(self._db, "conversations", "folder_id", [f["id"] for f in folders])
            chats = tuple((c["id"], c["folder_id"], c["deleted_at"]) for c in kept)
            now = self._clock()
            self._db.executemany(
                "UPDATE conversations SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
                [(now, c[0]) for c in chats],
            )
            self._db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))  # (subfolders cascade)
            change = self._deleted("folders", [f["id"] for f in folders])
        live = sum(1 for c in kept if c["deleted_at"] is None)
        kind = "project" if any(p["folder_id"] == folder_id for p in projects[0]) else "folder"
        label = f"Deleted the {kind} “{top.name}”."
        if live:
            label = f"Deleted the {kind} “{top.name}”; {_count(live)} went to the Trash."
        return Undo(label, ("folder", change, tuple(folders), chats, projects))

    def _check_parent(self, parent_id: int | None, moving: int | None) -> None:
        if parent_id is None:
            return
        if parent_id == moving:
            raise StoreError("Folders nest one level: a folder cannot go inside itself.")
        parent = self.folder(parent_id)
        if parent.parent_id is not None:
            raise StoreError("Folders nest one level: a folder inside a folder cannot hold folders.")

    # ----- chats
    def move_chats(self, ids: Iterable[int], folder_id: int | None) -> Undo:
        ids = list(ids)
        if folder_id is None:
            label = f"Moved {self._named(ids)} out of {self._left(ids)}."
        else:
            label = f"Moved {self._named(ids)} to “{self.folder(folder_id).name}”."
        return self._set_column(ids, "folder_id", folder_id, label)

    def set_pinned(self, ids: Iterable[int], pinned: bool) -> Undo:
        ids = list(ids)
        label = f"{'Pinned' if pinned else 'Unpinned'} {self._named(ids)}."
        return self._set_column(ids, "pinned", int(pinned), label)

    def archive_chats(self, ids: Iterable[int], archived: bool) -> Undo:
        ids = list(ids)
        if archived:
            return self._set_column(ids, "archived_at", self._clock(), f"Archived {self._named(ids)}.")
        return self._set_column(ids, "archived_at", None, f"Moved {self._named(ids)} out of the archive.")

    def trash_chats(self, ids: Iterable[int]) -> Undo:
        ids = list(ids)
        return self._set_column(ids, "deleted_at", self._clock(), f"Moved {self._named(ids)} to the Trash.")

    def _set_column(self, ids: list[int], column: str, value: object, label: str) -> Undo:
        with transaction(self._db, self._lock):
            self._changes += 1
            change = self._changes
            old = tuple((r["id"], r[column]) for r in rows_where_in(self._db, "conversations", "id", ids))
            for batch in batches(ids):
                marks = ",".join("?" * len(batch))
                self._db.execute(f"UPDATE conversations SET {column} = ? WHERE id IN ({marks})", (value, *batch))
        return Undo(label, ("column", change, column, old))

    def _left(self, ids: list[int]) -> str:
        """What chats moved out of leave: "the project “P”" when all were in that one project (to the user a
        project is no folder), else "its folder" / "their folders"."""
        with self._lock:
            places = {r["folder_id"] for r in rows_where_in(self._db, "conversations", "id", ids)}
            place = next(iter(places)) if len(places) == 1 else None
            project = place is not None and bool(
                self._db.execute("SELECT 1 FROM projects WHERE folder_id = ?", (place,)).fetchone()
            )
        if place is not None and project:
            return f"the project “{self.folder(place).name}”"
        return "its folder" if len(ids) == 1 else "their folders"

    def _named(self, ids: list[int]) -> str:
        """“Title” for one chat, "3 chats" for more."""
        if len(ids) == 1:
            with self._lock:
                row = self._db.execute("SELECT title FROM conversations WHERE id = ?", (ids[0],)).fetchone()
            if row is not None:
                return f"“{clean_title(row[0])}”"
        return _count(len(ids))

    # ----- the Trash
    def trashed(self) -> list[Conversation]:
        """The chats in the Trash, newest deletion first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM conversations WHERE deleted_at >= 0 ORDER BY deleted_at DESC, id DESC"
            ).fetchall()
        return [conversation_of(r) for r in rows]

    def trash_count(self) -> int:
        """How many chats are in the Trash."""
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM conversations WHERE deleted_at >= 0").fetchone()
        return int(row[0])

    def restore_chats(self, ids: Iterable[int]) -> int:
        """Take chats out of the Trash (back to their folder, pin and archive); how many came back."""
        count = 0
        with transaction(self._db, self._lock):
            for batch in batches(ids):
                marks = ",".join("?" * len(batch))
                cur = self._db.execute(
                    f"UPDATE conversations SET deleted_at = NULL WHERE deleted_at >= 0 AND id IN ({marks})",
                    batch,
                )
                count += cur.rowcount
        return count

    def empty_trash(self, older_than_days: float | None = None) -> int:
        """Delete for good the chats in the Trash (only those there longer than `older_than_days` when
        given), then sweep their text out of the file; how many were deleted."""
        where, args = "deleted_at >= 0", ()  # (< 0: an import's chats not shown yet, import_staging.py)
        if older_than_days is not None:
            where, args = "deleted_at >= 0 AND deleted_at <= ?", (self._clock() - older_than_days * 86400.0,)
        with self._lock:
            ids = [r[0] for r in self._db.execute(f"SELECT id FROM conversations WHERE {where}", args)]
        return self.purge_chats(ids)

    def delete_all_chats(self) -> int:
        """Every chat, the Trash included, deleted for good (folders stay), then the privacy sweep."""
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT id FROM conversations")]
        return self.purge_chats(ids)

    def purge_chats(self, ids: Iterable[int]) -> int:
        """Delete these chats for good (in the Trash or not), then the privacy sweep; how many went."""
        ids = list(ids)
        count = 0
        with transaction(self._db, self._lock):
            files = privacy.attachments_of(self._db, ids)
            for batch in batches(ids):
                marks = ",".join("?" * len(batch))
                self._db.execute(f"DELETE FROM messages WHERE conversation_id IN ({marks})", batch)
                count += self._db.execute(f"DELETE FROM conversations WHERE id IN ({marks})", batch).rowcount
        if count:  # (SQLite gives their ids to new chats: an older undo must not take a new chat for one)
            self._deleted("conversations", ids)
        if count:  # (a file a deleted message had stays while that delete can be undone: swept at close)
            self._sweep_left = privacy.sweep(self._db, self._lock, self._path, files - (self._swept_at_close or set()))
        else:  # (a deleted project's knowledge index goes with its purge even when it held no chats)
            privacy.drop_deleted_projects(self._db, self._lock, self._path)
        return count

    # ----- messages
    def delete_messages(self, message_id: int) -> Undo:
        """A message and everything below it in its branch (tool records, attachment links, sources and
        comparisons with them); the chat's active leaf moves to what is left."""
        with transaction(self._db, self._lock):
            snapshot = message_delete.delete(self._db, message_id)
            files = {r["attachment_id"] for r in snapshot.rows["message_attachments"]}
            self._swept_at_close = (self._swept_at_close or set()) | files
            change = 0
            for table, ids in message_delete.deleted_ids(snapshot).items():
                change = self._deleted(table, ids, change)
        n = len(snapshot.rows["messages"])
        label = "Deleted a message." if n == 1 else f"Deleted {n} messages."
        return Undo(label, ("messages", change, snapshot))

    def sweep_if_messages_were_deleted(self) -> None:
        """At close: deleted messages could be undone until now; the privacy sweep takes their words (and
        the files only they used) out of the database file."""
        with self._lock:
            files, self._swept_at_close = self._swept_at_close, None
            if files is not None:
                self._sweep_left = privacy.sweep(self._db, self._lock, self._path, files)
            self.finish_sweep()

    @property
    def sweep_pending(self) -> bool:
        """True while deleted words may still be in the WAL: another reader held up the last sweep."""
        return self._sweep_left is not None

    def finish_sweep(self) -> bool:
        """Finish a sweep another connection held up (call when it may be gone: a backup ended, at idle);
        True when nothing is left."""
        with self._lock:
            if self._sweep_left is not None:
                self._sweep_left = privacy.compact(self._db, self._lock, self._sweep_left)
            return self._sweep_left is None

    # ----- undo
    def undo(self, undo: Undo) -> None:
        """Reverse the change `undo` came from, exactly (ids kept); StoreError with a sentence when it
        can no longer be (what it would bring back is gone for good, or its place is taken)."""
        kind = undo.payload[0] if undo.payload else None
        try:
            with transaction(self._db, self._lock):
                if kind == "column":
                    _, change, column, old = undo.payload
                    self._undo_column(self._ids_now(change), str(column), old)  # type: ignore[arg-type]
                elif kind == "folder":
                    _, change, folders, chats, projects = undo.payload
                    self._put_folders_back(change, folders, chats, projects)  # type: ignore[arg-type]
                elif kind == "messages":
                    _, change, snapshot = undo.payload
                    self._ids_now(change)("conversations", snapshot.conversation_id, True)  # (its chat purged?)
                    renamed = message_delete.put_back(self._db, snapshot, self._ids_now(change))  # type: ignore[arg-type]
                    self._put_back(change, message_delete.deleted_ids(snapshot), renamed)  # type: ignore[arg-type]
                else:
                    raise StoreError(NO_UNDO + "it does not come from this chat database.")
        except sqlite3.IntegrityError as exc:
            raise StoreError(NO_UNDO + _why(str(exc))) from None

    def _deleted(self, table: str, ids: list[int], change: int = 0) -> int:
        """Note rows an undoable change deleted (their ids may be given to new rows); its number."""
        if not change:
            self._changes += 1
            change = self._changes
        self._gone.update(((table, i), change) for i in ids)
        return change

    def _put_back(self, change: int, ids: dict[str, list[int]], renamed: dict[str, dict[int, int]]) -> None:
        for table, old in ids.items():
            for i in old:
                if self._gone.get((table, i)) == change:
                    del self._gone[(table, i)]
        self._renamed.extend((change, table, new) for table, new in renamed.items() if new)

    def _ids_now(self, change: int) -> message_delete.IdsNow:
        """For the payload of change number `change`: a row it names, by its id now (its id then, or the
        one an undo since gave it back under); None, or StoreError when `required`, if it was deleted since."""

        def now(table: str, old: int, required: bool) -> int | None:
            new = old
            for deleted_by, t, ids in self._renamed:
                if t == table and deleted_by > change:
                    new = ids.get(new, new)
            if self._gone.get((table, new), 0) > change:
                if required:
                    raise StoreError(NO_UNDO + "what it belonged to (a message, a folder or a chat) was deleted since.")
                return None
            return new

        return now

    def _put_folders_back(
        self,
        change: int,
        folders: tuple[Row, ...],
        chats: tuple[tuple[int, int, float | None], ...],
        projects: project_tables.Snapshot,
    ) -> None:
        """The folders with their ids (a new id where a folder made since took one), their chats in them,
        the projects among them with their knowledge sources."""
        ids = free_ids(self._db, "folders", [f["id"] for f in folders])
        now = self._ids_now(change)
        for f in sorted(folders, key=lambda f: f["parent_id"] is not None):  # (the parent first)
            parent = f["parent_id"]
            parent = ids[parent] if parent in ids else None if parent is None else now("folders", parent, True)
            insert_rows(self._db, "folders", [{**f, "id": ids[f["id"]], "parent_id": parent}])
        project_tables.put_back(self._db, projects, ids)
        self._db.executemany(
            "UPDATE conversations SET folder_id = ?, deleted_at = ? WHERE id = ?",
            [(ids.get(f, f), d, cid) for cid, f, d in chats if now("conversations", cid, False) is not None],
        )
        self._put_back(change, {"folders": list(ids)}, {"folders": {o: n for o, n in ids.items() if o != n}})

    def _undo_column(self, now: message_delete.IdsNow, column: str, old: tuple[tuple[int, object], ...]) -> None:
        done = 0
        for cid, value in old:
            if now("conversations", cid, False) is None:
                continue  # deleted for good since (a new chat may have its id now)
            if column == "folder_id" and isinstance(value, int):
                value = now("folders", value, True)
            done += self._db.execute(f"UPDATE conversations SET {column} = ? WHERE id = ?", (value, cid)).rowcount
        if old and not done:
            raise StoreError(NO_UNDO + "the chats were deleted for good since.")


def _why(error: str) -> str:
    if "FOREIGN KEY" in error:
        return "what it belonged to (a folder or a chat) was deleted since."
    return "the chat changed since (new messages or folders took its place)."


def _folder_name(name: str) -> str:
    name = clean_name(name)  # (a project's name too: no format character makes it look like another's)
    if not name:
        raise StoreError("A folder needs a name; type one and try again.")
    return name


def _count(n: int) -> str:
    return "1 chat" if n == 1 else f"{n} chats"
