"""A request's `"ember": {"project": NAME}`: the project of the data folder's chat database by that name,
its knowledge for the request (`ServedProjects.open`); an unknown name is a 400 naming it.

What a project needs across requests is kept until the server stops (`close()`): its index, open; the
embedding model and reranker it names, loaded at its first request (projects/rankers.py: one that cannot
be loaded is said in each answer's `ember.knowledge.problems`, and tried again when the project names
another model or the server starts again); the view of its active sources (projects/active.py)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ember_chat.engine.errors import StoreError
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.projects.active import ActiveIndex, active_sources
from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
from ember_chat.engine.projects.rankers import Rankers, Resolve, load_rankers
from ember_chat.engine.projects.records import Project, ProjectStore
from ember_chat.engine.projects.turn import ProjectKnowledge, project_named
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths


@dataclass
class _Kept:
    """One project's parts kept across requests."""

    index: KnowledgeIndex
    active: ActiveIndex
    rankers: Rankers


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
        self._retired: list[Rankers] = []  # (models a project named before: a request may still use them)

    def open(self, name: str) -> ProjectKnowledge:
        """The knowledge of the project named `name` for one request (the caller closes it; what it
        holds of the project stays open here)."""
        with self._lock:
            project = self._named(name)
            kept = self._kept.get(project.folder_id)
            if kept is None:
                index = KnowledgeIndex(knowledge_path(self.paths, project.folder_id))
                rankers = load_rankers(project, self._resolver())
                kept = _Kept(index, ActiveIndex(index, active_sources(project)), rankers)
                self._kept[project.folder_id] = kept
            if not kept.rankers.serves(project):
                self._retired.append(kept.rankers)
                kept.rankers = load_rankers(project, self._resolver())
            if kept.active.active != active_sources(project):
                kept.active = ActiveIndex(kept.index, active_sources(project))
            r = kept.rankers
            return ProjectKnowledge(project, kept.index, r.embed, r.rerank, problems=r.problems, active=kept.active,
                                    owns_index=False)  # fmt: skip

    def _named(self, name: str) -> Project:
        if self._store is None:
            if not self.paths.database.exists():
                raise ApiError(400, f"There is no project named “{name}”.", param="ember.project")
            self._store = ConversationStore(self.paths.database)
        try:
            return project_named(ProjectStore(self._store), name)
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
        for k in kept:
            k.rankers.close()
            k.index.close()
        for rankers in retired:
            rankers.close()
        if store is not None and store is not self._given:
            store.close()


__all__ = ["ServedProjects"]
