"""A request's `"ember": {"project": NAME}`: the project of the data folder's chat database by that name,
its knowledge opened for the request (`ServedProjects.open`); an unknown name is a 400 naming it."""

from __future__ import annotations

import threading

from ember_chat.engine.errors import StoreError
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.projects.turn import ProjectKnowledge, project_named
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths


class ServedProjects:
    """The projects a server answers in: those of `paths`' chat database: `store` (the window's, left
    open), else one opened at the first request that names a project and closed with `close()`."""

    def __init__(self, paths: AppPaths, store: ConversationStore | None = None) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self._store = store
        self._owned = store is None

    def open(self, name: str) -> ProjectKnowledge:
        """The knowledge of the project named `name` for one request (the caller closes it)."""
        with self._lock:
            if self._store is None:
                if not self.paths.database.exists():
                    raise ApiError(400, f"There is no project named “{name}”.", param="ember.project")
                self._store = ConversationStore(self.paths.database)
            try:
                project = project_named(ProjectStore(self._store), name)
            except StoreError as exc:
                raise ApiError(400, str(exc), param="ember.project") from None
        return ProjectKnowledge.open(self.paths, project)

    def close(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None and self._owned:
            store.close()


__all__ = ["ServedProjects"]
