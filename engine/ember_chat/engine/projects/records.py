"""Projects: a folder of the chat list with instructions, defaults (model, preset, tools, context length,
embedding model, reranker) and knowledge — files and folders on the user's disk, named by path.

Kept in the chat database (schema 6, storage/project_tables.py for the rows), on the store's connection
and lock (`ProjectStore(store)`). A project IS its folder: the folder's name is the project's, deleting the
folder deletes the project (its undo brings both back, organise.py), and unmaking a project leaves the
folder and its chats as they are. Nothing here opens, reads or removes a knowledge file: removing a source
or unmaking a project forgets the path; only Ember's own index of it (`<data>/projects/<folder id>/`) goes.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.organise import Folder
from ember_chat.engine.storage.paths import PROJECTS_FOLDER
from ember_chat.engine.storage.project_tables import (
    MAX_ICON,
    MAX_INSTRUCTIONS,
    drop_knowledge,
    insert_project,
    insert_source,
    project_folder_of_chat,
    project_name_key,
    tools_column,
    tools_of,
)
from ember_chat.engine.storage.rows import transaction
from ember_chat.engine.storage.titles import clean_name, stored_name

__all__ = ["MAX_INSTRUCTIONS", "KnowledgeSource", "Project", "ProjectStore", "SourceKind"]

SourceKind = Literal["folder", "file"]


@dataclass(frozen=True)
class KnowledgeSource:
    """A file or folder of a project's knowledge. `paused`: not indexed nor watched until resumed.
    `from_import`: it came with an imported chat (a path another computer named): paused until the user
    confirms it (`ProjectStore.set_paused(id, False)`), never read before."""

    id: int
    path: str
    kind: SourceKind
    added_at: float
    paused: bool
    from_import: bool = False


@dataclass(frozen=True)
class Project:
    folder_id: int
    name: str
    icon: str
    instructions: str
    model: str | None
    preset: str | None
    tools: tuple[str, ...]  # tool server names enabled in its chats; empty: as the global setting
    context_length: int | None
    embedding_model: str | None
    reranker: str | None
    sources: tuple[KnowledgeSource, ...]


_TEXT = ("icon", "instructions")
_NAMES = ("model", "preset", "embedding_model", "reranker")
_FIELDS = frozenset({"name", "tools", "context_length", *_TEXT, *_NAMES})


class ProjectStore:
    """The projects of one chat store, on its connection and lock (safe to share between threads)."""

    def __init__(self, store: ConversationStore) -> None:
        self._store = store
        self._db, self._lock = store.shared_connection()
        self._clock = store.clock

    # ----- reading
    def projects(self) -> list[Project]:
        """Every project, in the chat list's order of their folders (a folder's subfolders after it)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT p.*, f.name FROM projects p JOIN folders f ON f.id = p.folder_id"
                " LEFT JOIN folders top ON top.id = f.parent_id"
                " ORDER BY COALESCE(top.position, f.position), COALESCE(f.parent_id, f.id),"
                " f.parent_id IS NOT NULL, f.position, f.id"
            ).fetchall()
            return [self._project_of(r) for r in rows]

    def project(self, folder_id: int) -> Project:
        """The project of this folder; StoreError with a sentence when the folder is not (or no longer) one."""
        with self._lock:
            row = self._db.execute(
                "SELECT p.*, f.name FROM projects p JOIN folders f ON f.id = p.folder_id WHERE p.folder_id = ?",
                (folder_id,),
            ).fetchone()
            if row is None:
                raise StoreError("This project no longer exists; its folder may have been deleted or made plain.")
            return self._project_of(row)

    def is_project(self, folder_id: int) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM projects WHERE folder_id = ?", (folder_id,)).fetchone() is not None

    def of_chat(self, conversation_id: int) -> Project | None:
        """The project a chat is in (its folder, or the folder that folder is in), or None."""
        with self._lock:
            folder_id = project_folder_of_chat(self._db, conversation_id)
            return self.project(folder_id) if folder_id is not None else None

    def source(self, source_id: int) -> KnowledgeSource:
        with self._lock:
            row = self._db.execute("SELECT * FROM project_sources WHERE id = ?", (source_id,)).fetchone()
        if row is None:
            raise StoreError("This knowledge source is no longer in its project.")
        return _source_of(row)

    def knowledge_folder(self, folder_id: int) -> Path:
        """Where this project's knowledge index is kept: `<data folder>/projects/<folder id>/` (beside
        the chat database, as AppPaths.project_folder names it)."""
        return self._store.path.parent / PROJECTS_FOLDER / str(int(folder_id))

    # ----- making and unmaking
    def make_project(
        self,
        folder_id: int,
        *,
        icon: str = "",
        instructions: str = "",
        model: str | None = None,
        preset: str | None = None,
        tools: tuple[str, ...] = (),
        context_length: int | None = None,
        embedding_model: str | None = None,
        reranker: str | None = None,
    ) -> Project:
        """Make an existing folder a project (its chats stay in it and become the project's)."""
        settings = _checked(
            {
                "icon": icon,
                "instructions": instructions,
                "model": model,
                "preset": preset,
                "tools": tools,
                "context_length": context_length,
                "embedding_model": embedding_model,
                "reranker": reranker,
            }
        )
        with transaction(self._db, self._lock):
            folder = self._store.organise.folder(folder_id)  # (StoreError: it no longer exists)
            if self.is_project(folder_id):
                raise StoreError(f"“{folder.name}” is a project already.")
            self._name_free(folder.name, folder_id)
            # (an index left by an earlier project that had this folder id is deleted: insert_project)
            insert_project(self._db, folder_id, self._clock(), **settings)  # type: ignore[arg-type]
        return self.project(folder_id)

    def create(self, name: str, parent_id: int | None = None, **settings: object) -> Project:
        """A new folder (at the end of the top level, or in `parent_id`) made a project; `settings` as
        make_project takes them."""
        unknown = set(settings) - (_FIELDS - {"name"})
        if unknown:
            raise TypeError(f"ProjectStore.create() got unexpected settings: {', '.join(sorted(unknown))}")
        with transaction(self._db, self._lock):
            self._name_free(name)
            folder: Folder = self._store.organise.create_folder(name, parent_id)
            return self.make_project(folder.id, **settings)  # type: ignore[arg-type]

    def _name_free(self, name: str, folder_id: int | None = None) -> None:
        """StoreError when the name is empty (said of a project, not of its folder) or another project has
        it (ignoring case): the CLI, the API and a chat file name a project by its name."""
        if not clean_name(name):
            raise StoreError("A project needs a name; type one and try again.")
        wanted = project_name_key(name)
        taken = next(
            (p for p in self.projects() if p.folder_id != folder_id and project_name_key(p.name) == wanted), None
        )
        if taken is not None:
            raise StoreError(f"There is a project named “{taken.name}” already: give this one another name.")

    def unmake(self, folder_id: int) -> None:
        """The project becomes a plain folder again: its chats stay in it; its instructions, defaults and
        the list of its knowledge are forgotten (the files themselves are never touched), and Ember's
        index of that knowledge is deleted."""
        with transaction(self._db, self._lock):
            self.project(folder_id)
            self._db.execute("DELETE FROM projects WHERE folder_id = ?", (folder_id,))  # (its sources cascade)
        drop_knowledge(self.knowledge_folder(folder_id))

    def update(self, folder_id: int, **changes: object) -> Project:
        """Change a project's `name` (its folder's), icon, instructions or defaults (model, preset, tools,
        context_length, embedding_model, reranker; None for a default: as the global setting)."""
        unknown = set(changes) - _FIELDS
        if unknown:
            raise TypeError(f"ProjectStore.update() got unexpected changes: {', '.join(sorted(unknown))}")
        name = changes.pop("name", None)
        settings = _checked(changes)
        with transaction(self._db, self._lock):
            current = self.project(folder_id)
            if name is not None:
                # (checked when it is another name: two projects named alike before this check can be saved)
                if project_name_key(str(name)) != project_name_key(current.name):
                    self._name_free(str(name), folder_id)
                self._store.organise.rename_folder(folder_id, str(name))
            for column, value in settings.items():
                stored = tools_column(value) if column == "tools" else value  # type: ignore[arg-type]
                self._db.execute(f"UPDATE projects SET {column} = ? WHERE folder_id = ?", (stored, folder_id))
        return self.project(folder_id)

    # ----- knowledge
    def add_source(self, folder_id: int, path: str | os.PathLike[str]) -> KnowledgeSource:
        """Add a file or a folder to the project's knowledge, by its absolute path (it is read by the
        indexer, never copied); StoreError with a sentence when it does not exist, is neither a file nor a
        folder, or is in the project already, itself or inside a folder of it (its files are read from
        there). A folder holding sources of the project takes their place: they are taken out, in the
        same transaction (`covered` says which, beforehand; the indexer gives their files, unchanged and
        unread, to the folder)."""
        absolute = _absolute(path)
        try:
            is_dir = os.path.isdir(absolute)
            is_file = not is_dir and os.path.isfile(absolute)
            exists = is_dir or is_file or os.path.lexists(absolute)
        except (OSError, ValueError) as exc:
            raise StoreError(f"{absolute} cannot be added to the project: {exc}.") from None
        if not exists:
            raise StoreError(f"{absolute} does not exist (it may have been moved, or its drive disconnected).")
        if not (is_dir or is_file):
            raise StoreError(f"{absolute} is neither a file nor a folder, so it cannot be a project's knowledge.")
        with transaction(self._db, self._lock):
            self._make_room(self.project(folder_id), absolute, is_dir)
            kind = "folder" if is_dir else "file"
            source_id = insert_source(
                self._db, folder_id, absolute, kind, self._clock(), paused=False, from_import=False
            )
            return self.source(source_id)

    def _make_room(self, project: Project, path: str, is_dir: bool, source_id: int | None = None) -> None:
        """StoreError when `path` is a source of the project already, itself or inside a folder of it (its
        files would be read twice); the sources inside it (a folder) taken out. `source_id`: the source
        confirmed as `path`, not compared with itself."""
        keys = _keys(path)
        others = [s for s in project.sources if s.id != source_id]
        same = next((s for s in others if _same(_of(s), keys)), None)
        if same is not None:
            also = "" if same.path == path else f" (as {same.path})"
            raise StoreError(f"{path} is in the project “{project.name}” already{also}.")
        holder = next((s for s in others if s.kind == "folder" and _inside(keys, _of(s))), None)
        if holder is not None:  # (its files would be read twice: as the holder's and as this one's)
            raise StoreError(_held(path, holder, project.name))
        for inner in (s for s in others if is_dir and _inside(_of(s), keys)):
            self._db.execute("DELETE FROM project_sources WHERE id = ?", (inner.id,))

    def covered(self, folder_id: int, path: str | os.PathLike[str]) -> list[KnowledgeSource]:
        """The project's sources inside `path` (a folder): those `add_source(path)` takes out."""
        keys = _keys(_absolute(path))
        return [s for s in self.project(folder_id).sources if _inside(_of(s), keys)]

    def remove_source(self, source_id: int) -> None:
        """Forget a knowledge source (its passages leave the index when the indexer runs next); the file
        or folder on disk is never touched."""
        with transaction(self._db, self._lock):
            self.source(source_id)
            self._db.execute("DELETE FROM project_sources WHERE id = ?", (source_id,))

    def set_paused(self, source_id: int, paused: bool) -> KnowledgeSource:
        """Pause (not indexed nor watched) or resume a source; resuming one that came from an import is the
        user's confirmation of it."""
        with transaction(self._db, self._lock):
            source = self.source(source_id)
            if paused:
                self._db.execute("UPDATE project_sources SET paused = 1 WHERE id = ?", (source_id,))
            else:
                if source.from_import:  # (confirmed: checked as a path added is, now that it may be looked up)
                    folder = self._db.execute(
                        "SELECT folder_id FROM project_sources WHERE id = ?", (source_id,)
                    ).fetchone()[0]
                    self._make_room(self.project(folder), source.path, source.kind == "folder", source_id)
                self._db.execute("UPDATE project_sources SET paused = 0, from_import = 0 WHERE id = ?", (source_id,))
            return self.source(source_id)

    def _project_of(self, row: sqlite3.Row) -> Project:
        sources = self._db.execute(
            "SELECT * FROM project_sources WHERE folder_id = ? ORDER BY id", (row["folder_id"],)
        ).fetchall()
        return Project(
            folder_id=row["folder_id"],
            name=stored_name(row["name"]),
            icon=row["icon"],
            instructions=row["instructions"],
            model=row["model"],
            preset=row["preset"],
            tools=tools_of(row["tools"]),
            context_length=row["context_length"],
            embedding_model=row["embedding_model"],
            reranker=row["reranker"],
            sources=tuple(_source_of(s) for s in sources),
        )


def _source_of(row: sqlite3.Row) -> KnowledgeSource:
    kind: SourceKind = "file" if row["kind"] == "file" else "folder"
    return KnowledgeSource(row["id"], row["path"], kind, row["added_at"], bool(row["paused"]), bool(row["from_import"]))


def _checked(settings: dict[str, object]) -> dict[str, object]:
    """The settings given, checked (TypeError for a caller's mistake, StoreError for what a user typed)."""
    out: dict[str, object] = {}
    for key, value in settings.items():
        if key in _TEXT:
            if not isinstance(value, str):
                raise TypeError(f"A project's {key} is text, not {type(value).__name__}.")
            value = value.strip() if key == "icon" else value
            if key == "icon" and len(value) > MAX_ICON:
                raise StoreError(
                    f"A project's icon is an emoji or a few characters, at most {MAX_ICON} (this one has "
                    f"{len(value)}); choose a shorter one and try again."
                )
            if key == "instructions" and len(value) > MAX_INSTRUCTIONS:
                raise StoreError(
                    f"A project's instructions go into every chat's prompt: keep them under {MAX_INSTRUCTIONS:,} "
                    f"characters (these have {len(value):,})."
                )
        elif key in _NAMES:
            if value is not None and not isinstance(value, str):
                raise TypeError(f"A project's {key} is a name or None, not {type(value).__name__}.")
            value = value.strip() or None if isinstance(value, str) else None
        elif key == "tools":
            if not isinstance(value, tuple | list) or not all(isinstance(t, str) for t in value):
                raise TypeError("A project's tools are a tuple of tool server names.")
            value = tuple(dict.fromkeys(value))
        elif key == "context_length" and value is not None and (type(value) is not int or value <= 0):
            raise StoreError("A project's context length is a whole number of tokens above 0, or the default.")
        out[key] = value
    return out


def _absolute(path: str | os.PathLike[str]) -> str:
    return os.path.normpath(os.path.abspath(os.path.expanduser(os.fspath(path))))


def _held(path: str, holder: KnowledgeSource, project: str) -> str:
    """Why `path`, inside the folder `holder`, is not added: a true sentence whatever the holder's state."""
    if holder.from_import:
        return (
            f"{path} is inside {holder.path}, which came with an imported chat into the project “{project}” "
            f"and is not confirmed yet: check and confirm {holder.path} to read its files."
        )
    if holder.paused:
        return f"{path} is inside {holder.path}, paused in the project “{project}”: resume it to read its files."
    return (
        f"{path} is inside {holder.path}, which is in the project “{project}” already: its files are read from there."
    )


def _keys(path: str, resolve: bool = True) -> tuple[str, ...]:
    """`path` (absolute, normalised) as compared with another: as given and, `resolve`, with its links
    resolved (a link to a folder of the project is that folder), each in the case the file system ignores
    (Windows, macOS: case-folded). Only the path being added (or confirmed) is resolved: the project's
    sources are compared as they were added (`_of`), never looked up again on disk (a source on a network
    share that stopped answering would hold the store, and the window, while the link is followed); a path
    that came with an imported chat and is not confirmed yet is never looked up either."""
    given = (path, os.path.realpath(path)) if resolve else (path,)
    fold = sys.platform in ("win32", "darwin")
    return tuple(os.path.normcase(p).casefold() if fold else os.path.normcase(p) for p in given)


def _of(source: KnowledgeSource) -> tuple[str, ...]:
    return _keys(source.path, resolve=False)


def _same(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether the `_keys` `a` and `b` name the same file or folder (any of each: as given, or resolved)."""
    return any(x == y for x in a for y in b)


def _inside(path: tuple[str, ...], folder: tuple[str, ...]) -> bool:
    """Whether the `_keys` `path` are inside `folder` (not `folder` itself): any of each, as given or resolved."""
    return any(p.startswith(f.rstrip(os.sep) + os.sep) for p in path for f in folder)
