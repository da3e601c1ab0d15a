"""A request's `"ember": {"project": NAME}`: the project of the data folder's chat database by that name,
its knowledge for the request (`ServedProjects.open`); an unknown name is a 400 naming it (never the
projects there are: a client learns no other project's name).

What a project needs across requests is kept until the server stops (`close()`): its index, open; the
embedding model and reranker it names, loaded at its first request (projects/rankers.py: one that cannot
be loaded is said in each answer's `ember.knowledge.problems`, and tried again when the project names
another model or the server starts again); the view of its active sources (projects/active.py). The
index is opened again when its file is another (same path, another inode: the project unmade and made
again, or deleted and its folder id reused) or the project's sources changed. The models are loaded
outside the lock every request takes (one load per project at a time): a request for another project
never waits on a load."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ember_chat.engine.errors import StoreError
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.projects.active import ActiveIndex, active_sources
from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
from ember_chat.engine.projects.rankers import Rankers, Resolve, load_rankers
from ember_chat.engine.projects.records import Project, ProjectStore
from ember_chat.engine.projects.turn import ProjectKnowledge, project_named, shown_name
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths

log = logging.getLogger(__name__)


@dataclass
class _Kept:
    """One project's parts kept across requests."""

    index: KnowledgeIndex
    file: tuple[int, int]  # the index file's (st_dev, st_ino) when opened
    sources: tuple[tuple[int, str], ...]  # the project's sources (id, path) then
    active: ActiveIndex
    rankers: Rankers | None = None


class ServedProjects:
    """The projects a server answers in: those of `paths`' chat database: `store` (the window's, left
    open), else one opened at the first request that names a project and closed with `close()`.
    `resolve`: a model's name as a project stores it -> its file (default: the models folder of the
    settings in `paths`)."""

    def __init__(
        self,
        paths: AppPaths,
        store: ConversationStore | None = None,
        resolve: Resolve | None = None,
    ) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self._given = store
        self._store = store
        self._resolve = resolve
        self._kept: dict[int, _Kept] = {}
        self._loading: dict[int, threading.Lock] = {}  # per project: one load of its index and models at a time
        self._retired: list[Rankers] = []  # (models a project named before: a request may still use them)
        self._retired_indexes: list[KnowledgeIndex] = []  # (likewise: closed with the server)

    def open(self, name: str) -> ProjectKnowledge:
        """The knowledge of the project named `name` for one request (the caller closes it; what it
        holds of the project stays open here)."""
        with self._lock:
            project = self._named(name)
            gate = self._loading.setdefault(project.folder_id, threading.Lock())
            resolve = self._resolver()
        with gate:  # (this project's: its index opened and its models loaded outside self._lock)
            try:
                kept = self._current(project)
            except StoreError as exc:  # (its file damaged: the log has its path, the answer the reason)
                log.warning("%s", exc)
                raise ApiError(500, _unreadable(exc, project, knowledge_path(self.paths, project.folder_id)),
                               "server_error", code="knowledge_unreadable") from None  # fmt: skip
            if kept.rankers is None or not kept.rankers.serves(project):
                rankers = load_rankers(project, resolve)
                with self._lock:
                    if kept.rankers is not None:
                        self._retired.append(kept.rankers)
                    kept.rankers = rankers
            with self._lock:
                if kept.active.active != active_sources(project):
                    kept.active = ActiveIndex(kept.index, active_sources(project))
                r = kept.rankers
                active = kept.active
        assert r is not None
        return ProjectKnowledge(project, kept.index, r.embed, r.rerank, problems=r.problems, active=active,
                                owns_index=False)  # fmt: skip

    def _current(self, project: Project) -> _Kept:
        """The project's kept index: opened again when its file or the project's sources are not those
        it was opened for (the old one retired: a request may still read it)."""
        path = knowledge_path(self.paths, project.folder_id)
        sources = tuple((s.id, str(s.path)) for s in project.sources)
        with self._lock:
            kept = self._kept.get(project.folder_id)
        if kept is not None and kept.file == _file_of(path) and kept.sources == sources:
            return kept
        index = KnowledgeIndex(path)
        made = _Kept(index, _file_of(path) or (-1, -1), sources, ActiveIndex(index, active_sources(project)))
        with self._lock:
            if kept is not None:
                self._retired_indexes.append(kept.index)
                made.rankers = kept.rankers  # (the models the project names: kept unless it names others)
            self._kept[project.folder_id] = made
        return made

    def _named(self, name: str) -> Project:
        if self._store is None:
            if not self.paths.database.exists():
                raise ApiError(400, f"There is no project named “{shown_name(name)}”.", param="ember.project")
            self._store = ConversationStore(self.paths.database)
        try:
            return project_named(ProjectStore(self._store), name, list_known=False)
        except StoreError as exc:
            raise ApiError(400, str(exc), param="ember.project") from None

    def _resolver(self) -> Resolve:
        if self._resolve is None:
            from ember_chat.engine.models.library import ModelLibrary
            from ember_chat.engine.storage.settings import SettingsFile

            folder = SettingsFile(self.paths.settings_file).load().models_folder(self.paths.default_models_dir)
            self._resolve = ModelLibrary(folder).resolve
        return self._resolve

    def close(self) -> None:
        """Close what was kept (the server has stopped: no request uses it any more)."""
        with self._lock:
            store, self._store = self._store, self._given
            kept, self._kept = list(self._kept.values()), {}
            retired, self._retired = self._retired, []
            indexes, self._retired_indexes = self._retired_indexes, []
        for k in kept:
            if k.rankers is not None:
                k.rankers.close()
            k.index.close()
        for index in indexes:
            index.close()
        for rankers in retired:
            rankers.close()
        if store is not None and store is not self._given:
            store.close()


def _unreadable(exc: StoreError, project: Project, path: Path) -> str:
    """Why the project's index cannot be opened, for a client: the project's name, never a local path
    (an OSError's own text names one: only its reason is said)."""
    cause = exc.__cause__
    if isinstance(cause, OSError):
        return f"The knowledge index of the project “{project.name}” cannot be opened: {cause.strerror or 'an error'}."
    return str(exc).replace(
        f"The project's knowledge index {path}", f"The knowledge index of the project “{project.name}”"
    )


def _file_of(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at `path`, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


__all__ = ["ServedProjects"]
