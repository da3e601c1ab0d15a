"""The project tables of the chat database (schema 6: `projects`, `project_sources`) as rows.

The projects themselves (`Project`, `ProjectStore`) are engine/projects/records.py, a layer above the
store. The store's own modules move whole rows, and do it here: a deleted folder's undo (organise.py)
puts its project and knowledge rows back exactly, the export carries a chat's project and the import
makes it again (export.py, importing.py), and the privacy sweep removes the knowledge index of a
project deleted for good (privacy.py). A knowledge source is a path on the user's disk: nothing here
ever opens, reads or removes it."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ember_chat.engine.storage.import_plan import PlannedProject
from ember_chat.engine.storage.paths import PROJECTS_FOLDER
from ember_chat.engine.storage.rows import Row, free_ids, insert_rows, rows_where_in, transaction
from ember_chat.engine.storage.titles import clean_name, stored_name

log = logging.getLogger(__name__)

KINDS = ("folder", "file")
MAX_NAME = 200  # characters of an imported project's (folder's) name
MAX_ICON = 16  # characters: one emoji (with its modifiers), or none
MAX_INSTRUCTIONS = 100_000  # characters of a project's instructions (they go into every chat's prompt)


def project_folder_of_chat(db: sqlite3.Connection, conversation_id: int) -> int | None:
    """The folder id of the project a chat is in (its folder's, else that folder's parent's), or None."""
    row = db.execute(
        "SELECT f.id, f.parent_id FROM conversations c JOIN folders f ON f.id = c.folder_id WHERE c.id = ?",
        (conversation_id,),
    ).fetchone()
    if row is None:
        return None
    for folder_id in (row[0], row[1]):
        if folder_id is not None and db.execute("SELECT 1 FROM projects WHERE folder_id = ?", (folder_id,)).fetchone():
            return int(folder_id)
    return None


def project_chats(db: sqlite3.Connection, folder_id: int) -> list[int]:
    """The chats of the project of folder `folder_id` (in it or in a folder inside it; archived ones too,
    never the Trash's), newest activity first: what its export holds."""
    rows = db.execute(
        "SELECT id FROM conversations WHERE deleted_at IS NULL"
        " AND folder_id IN (SELECT id FROM folders WHERE id = ? OR parent_id = ?) ORDER BY updated_at DESC, id DESC",
        (folder_id, folder_id),
    )
    return [int(r[0]) for r in rows]


def insert_project(
    db: sqlite3.Connection,
    folder_id: int,
    created_at: float,
    *,
    icon: str = "",
    instructions: str = "",
    model: str | None = None,
    preset: str | None = None,
    tools: Sequence[str] = (),
    context_length: int | None = None,
    embedding_model: str | None = None,
    reranker: str | None = None,
) -> None:
    """A project's row for folder `folder_id`, made now (a new project: made, created or imported). The
    folder's id may be one a project deleted for good had (folders' ids are reused): an index left at
    `<data>/projects/<folder id>/` is that project's, not this one's, and is deleted here."""
    drop_stale_knowledge(db, folder_id)
    db.execute(
        "INSERT INTO projects (folder_id, icon, instructions, model, preset, tools, context_length,"
        " embedding_model, reranker, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            folder_id,
            icon,
            instructions,
            model,
            preset,
            tools_column(tools),
            context_length,
            embedding_model,
            reranker,
            created_at,
        ),
    )


def insert_source(
    db: sqlite3.Connection, folder_id: int, path: str, kind: str, added_at: float, *, paused: bool, from_import: bool
) -> int:
    """A knowledge source's row (the path as given: it is never opened here); its id."""
    cur = db.execute(
        "INSERT INTO project_sources (folder_id, path, kind, added_at, paused, from_import) VALUES (?, ?, ?, ?, ?, ?)",
        (folder_id, path, kind, added_at, int(paused), int(from_import)),
    )
    return int(cur.lastrowid or 0)


def tools_column(tools: Sequence[str]) -> str:
    """A project's tool server names as its `tools` column holds them (a JSON list)."""
    return json.dumps(list(tools), ensure_ascii=False)


def tools_of(value: object) -> tuple[str, ...]:
    """The `tools` column (a JSON list of tool server names) as a tuple; anything else: none."""
    try:
        names = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return ()
    return tuple(n for n in names if isinstance(n, str)) if isinstance(names, list) else ()


# ----- a deleted folder's undo (organise.py)
Snapshot = tuple[tuple[Row, ...], tuple[Row, ...]]  # (projects rows, project_sources rows)


def snapshot(db: sqlite3.Connection, folder_ids: Iterable[int]) -> Snapshot:
    """The project and knowledge rows of these folders, as they are (before a delete cascades them away)."""
    ids = list(folder_ids)
    return tuple(rows_where_in(db, "projects", "folder_id", ids)), tuple(
        rows_where_in(db, "project_sources", "folder_id", ids)
    )


def put_back(db: sqlite3.Connection, rows: Snapshot, folder_ids: dict[int, int]) -> None:
    """The rows of `snapshot` again, each project under its folder's id now (`folder_ids`: old -> new),
    each source with its id (a new one where a source added since took it)."""
    projects, sources = rows
    for p in projects:
        old = p["folder_id"]
        new = folder_ids.get(old, old)
        if new != old:  # (its id was taken since: its index goes with it, unless a project has that id now)
            _move_knowledge(db, old, new)
    insert_rows(db, "projects", [{**p, "folder_id": folder_ids.get(p["folder_id"], p["folder_id"])} for p in projects])
    ids = free_ids(db, "project_sources", [s["id"] for s in sources])
    insert_rows(
        db,
        "project_sources",
        [{**s, "id": ids[s["id"]], "folder_id": folder_ids.get(s["folder_id"], s["folder_id"])} for s in sources],
    )


# ----- export (export.py)
def exported(db: sqlite3.Connection, folder_id: int) -> dict[str, Any] | None:
    """A project as a chat's export carries it: its name, icon, instructions, defaults and the paths of
    its knowledge (never the files' text); None when the folder is not a project."""
    row = db.execute(
        "SELECT p.*, f.name FROM projects p JOIN folders f ON f.id = p.folder_id WHERE p.folder_id = ?", (folder_id,)
    ).fetchone()
    if row is None:
        return None
    sources = db.execute("SELECT path, kind FROM project_sources WHERE folder_id = ? ORDER BY id", (folder_id,))
    return {
        "name": stored_name(row["name"]),
        "icon": row["icon"],
        "instructions": row["instructions"],
        "model": row["model"],
        "preset": row["preset"],
        "tools": list(tools_of(row["tools"])),
        "context_length": row["context_length"],
        "embedding_model": row["embedding_model"],
        "reranker": row["reranker"],
        "knowledge": [{"path": s[0], "kind": s[1]} for s in sources],
    }


# ----- import (importing.py)


def project_name_key(name: str) -> str:
    """A project's name as two names that look alike compare (the CLI, the API and a chat file name a
    project by it): cleaned as a folder's name is kept (titles.clean_name: no format characters, a
    zero-width space or a bidi control, any run of white space one space), one Unicode form (NFC: é
    typed one way or another), case ignored."""
    return unicodedata.normalize("NFC", clean_name(name)).casefold()


def folder_for_import(db: sqlite3.Connection, project: PlannedProject, made: dict[str, int]) -> int:
    """The folder a chat of this project goes into: the project of that name, else a new folder made the
    project (noted in `made`), with the file's instructions and defaults and its knowledge paths paused.
    A project here already is left as it is, and a plain folder of that name, wherever it is, is never
    taken: a file never changes what the user has (its instructions and knowledge would answer the
    user's older chats in it). Folder names may repeat: the new project sits beside the plain folder."""
    wanted = project_name_key(project.name)
    projects = db.execute("SELECT f.id, f.name FROM folders f JOIN projects p ON p.folder_id = f.id ORDER BY f.id")
    same = next((int(fid) for fid, name in projects if project_name_key(name) == wanted), None)
    if same is not None:  # (a project whose name looks alike: 'café  research' is “Café research”)
        return same
    now = time.time()
    cur = db.execute(
        "INSERT INTO folders (name, parent_id, position, created_at) VALUES (?, NULL,"
        " (SELECT COALESCE(MAX(position) + 1, 0) FROM folders WHERE parent_id IS NULL), ?)",
        (project.name, now),
    )
    folder_id = int(cur.lastrowid or 0)
    insert_project(
        db,
        folder_id,
        now,
        icon=project.icon,
        instructions=project.instructions,
        model=project.model,
        preset=project.preset,
        tools=project.tools,
        context_length=project.context_length,
        embedding_model=project.embedding_model,
        reranker=project.reranker,
    )
    for path, kind in project.knowledge:  # (paths only: never opened, paused until the user confirms each)
        insert_source(db, folder_id, path, kind, now, paused=True, from_import=True)
    made[project.name] = folder_id
    return folder_id


def drop_imported_folders(db: sqlite3.Connection, lock: threading.RLock, folder_ids: Iterable[int]) -> None:
    """The project folders an import that did not finish made, deleted again (with their projects) unless
    a chat was put in one meanwhile."""
    with transaction(db, lock):
        db.executemany(
            "DELETE FROM folders WHERE id = ? AND NOT EXISTS (SELECT 1 FROM conversations WHERE folder_id = ?)",
            [(i, i) for i in folder_ids],
        )


# ----- the privacy sweep (privacy.py)
def drop_unused_knowledge(db: sqlite3.Connection, folder: Path) -> int:
    """Remove the knowledge indexes in `folder` (`<data>/projects/<folder id>/`) of projects that are no
    longer in the database (deleted for good, or made plain folders again); how many went. Only Ember's
    own files are there: the user's knowledge files are elsewhere and never touched. One that cannot be
    removed is logged."""
    try:
        entries = [e for e in folder.iterdir() if e.name.isdigit()]
    except FileNotFoundError:
        return 0
    except OSError as exc:
        log.warning("The projects' knowledge indexes in %s could not be listed: %s", folder, exc)
        return 0
    kept = {str(r[0]) for r in db.execute("SELECT folder_id FROM projects")}
    removed = 0
    for entry in entries:
        if entry.name not in kept and drop_knowledge(entry):
            removed += 1
    return removed


def knowledge_folder(db: sqlite3.Connection, folder_id: int) -> Path | None:
    """Where the knowledge index of the project of folder `folder_id` is kept (`<data>/projects/<id>/`,
    beside the chat database); None for a database kept in memory (it has no data folder)."""
    for row in db.execute("PRAGMA database_list"):
        if row[1] == "main":
            return Path(row[2]).parent / PROJECTS_FOLDER / str(int(folder_id)) if row[2] else None
    return None


def drop_stale_knowledge(db: sqlite3.Connection, folder_id: int) -> None:
    """An index left at this folder id's place by a project deleted for good, deleted (see insert_project)."""
    folder = knowledge_folder(db, folder_id)
    if folder is not None:
        drop_knowledge(folder)


def _move_knowledge(db: sqlite3.Connection, old: int, new: int) -> None:
    """A project put back under a new folder id: its index moved there from its old id's place (the old
    id is a plain folder's now), or, when a project has the old id now (the index there is that one's),
    whatever is at the new place deleted (the project is indexed again)."""
    source, target = knowledge_folder(db, old), knowledge_folder(db, new)
    if source is None or target is None or not drop_knowledge(target):
        return
    if db.execute("SELECT 1 FROM projects WHERE folder_id = ?", (old,)).fetchone() is not None:
        return
    try:
        if source.is_dir() and not source.is_symlink():
            source.rename(target)
    except OSError as exc:
        log.warning("The knowledge index %s could not be moved to %s: %s", source, target, exc)


def drop_knowledge(path: Path) -> bool:
    """Remove one project's knowledge index folder (a link there: the link only, never what it points
    at); False when it could not be (logged)."""
    try:
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
        else:
            shutil.rmtree(path)
        return True
    except FileNotFoundError:
        return True
    except OSError as exc:
        log.warning("The knowledge index %s could not be deleted: %s", path, exc)
        return False
