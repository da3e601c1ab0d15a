"""The projects an import brought chats into (importing.py), as its report names them: the project a
chat's export carries, or the one a project's export names first, found by its name or made again
(project_tables.folder_for_import). The window's banner and `ember-chat chats import` say from this
where the chats went and which knowledge paths wait for the user's confirmation."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ember_chat.engine.storage.import_plan import PlannedProject
from ember_chat.engine.storage.project_tables import folder_for_import
from ember_chat.engine.storage.rows import transaction

__all__ = ["ImportedProject", "imported_projects", "place_projects"]


@dataclass(frozen=True)
class ImportedProject:
    folder_id: int
    name: str  # as this chat store has it (a project here already keeps its own name)
    made: bool  # made by this import; else joined: one of that name was here, and it was left as it was
    project: bool  # a project; False: made a plain folder again (in the window) while the import ran
    chats: int  # the file's chats that went into it
    folders: int  # its knowledge folders that came in with an import, paused until the user confirms them
    files: int  # ... and its knowledge files


def place_projects(
    db: sqlite3.Connection, lock: threading.RLock, projects: Sequence[PlannedProject], made: dict[str, int]
) -> list[int]:
    """The projects a project's export names on their own (first, before its chats), each found by its
    name or made, in one short transaction; their folder ids. `made` notes those made (by name), once
    committed."""
    batch: dict[str, int] = {}
    with transaction(db, lock):
        ids = [folder_for_import(db, project, batch) for project in projects]
    made.update(batch)
    return ids


def imported_projects(
    db: sqlite3.Connection, lock: threading.RLock, chats_in: Mapping[int, int], made: Collection[int]
) -> tuple[ImportedProject, ...]:
    """For each folder in `chats_in` (folder id → the import's chats in it, in the file's order) what it
    is now; `made`: the folders the import made."""
    out = []
    with lock:
        for folder_id, chats in chats_in.items():
            row = db.execute(
                "SELECT f.name, p.folder_id IS NOT NULL FROM folders f LEFT JOIN projects p ON p.folder_id = f.id"
                " WHERE f.id = ?",
                (folder_id,),
            ).fetchone()
            if row is None:  # (deleted meanwhile, in the window)
                continue
            waiting = dict(
                db.execute(
                    "SELECT kind, COUNT(*) FROM project_sources WHERE folder_id = ? AND paused AND from_import"
                    " GROUP BY kind",
                    (folder_id,),
                ).fetchall()
            )
            out.append(
                ImportedProject(
                    folder_id,
                    str(row[0]),
                    folder_id in made,
                    bool(row[1]),
                    chats,
                    int(waiting.get("folder", 0)),
                    int(waiting.get("file", 0)),
                )
            )
    return tuple(out)
