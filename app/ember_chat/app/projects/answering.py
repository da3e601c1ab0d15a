"""A chat's project for the answer being asked (`window.projects.answering`): the project a chat is in
and the knowledge its answer is given (the engine's projects/turn.py `ProjectKnowledge` over the index
the window keeps current, indexing.py). Opening it is cheap (a SQLite file opened, nothing read); the
passages are retrieved on the engine thread. The embedding model and reranker the project names are
loaded there too, at the retrieval (`TurnKnowledge`: a model's identity is its file's hash, read there as
well), and closed with the knowledge after the answer: once per answer, which costs a small model's load
(a fraction of a second) and keeps no model in memory between answers. One that cannot be loaded leaves
the passages ranked without it, and the answer's knowledge says why."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.prompt.knowledge import KnowledgeFit
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.rankers import Rankers, Resolve, load_rankers
from ember_chat.engine.projects.records import Project, ProjectStore
from ember_chat.engine.projects.turn import ProjectKnowledge
from ember_chat.engine.storage.conversations import ConversationStore


class TurnKnowledge(ProjectKnowledge):
    """A project's knowledge for one answer: the models the project names (an embedding model, a
    reranker: projects/rankers.py) loaded on the engine thread at its retrieval, never on the GUI
    thread; one that cannot be loaded leaves the passages ranked without it, and the answer's
    KnowledgeUsed.problems says why. close() lets the index and the models go."""

    def __init__(self, project: Project, index: KnowledgeIndex, resolve: Resolve) -> None:
        super().__init__(project, index)
        self.resolve = resolve
        self.rankers: Rankers | None = None
        self._lock = threading.Lock()

    def fit(self, question: str, budget: int, count: Callable[[str], int]) -> KnowledgeFit:
        with self._lock:
            if self.rankers is None and (self.project.embedding_model or self.project.reranker):
                self.rankers = load_rankers(self.project, self.resolve)
                self.embed, self.rerank = self.rankers.embed, self.rankers.rerank
                self.problems = self.rankers.problems
        return super().fit(question, budget, count)

    def close(self) -> None:
        super().close()
        with self._lock:
            rankers, self.rankers = self.rankers, Rankers(None, None)  # (closed: never loaded after this)
            self.embed = self.rerank = None
        if rankers is not None:
            rankers.close()


class ProjectAnswering:
    """What an answer in a chat of a project is given: the project and its knowledge."""

    def __init__(
        self, chats: ConversationStore, store: ProjectStore, library: ModelLibrary, index_path: Callable[[int], Path]
    ) -> None:
        self.chats = chats
        self.store = store
        self.library = library
        self.index_path = index_path

    def project_of(self, conversation_id: int) -> Project | None:
        with contextlib.suppress(EmberError, KeyError, sqlite3.Error):
            return self.store.of_chat(conversation_id)
        return None

    def turn_for(self, conversation_id: int) -> tuple[Project, ProjectKnowledge | None] | None:
        """The chat's project and the knowledge to answer with (None: the project has no index yet, or
        it cannot be opened); None when the chat is in no project. The caller closes the knowledge
        once the answer has ended."""
        project = self.project_of(conversation_id)
        if project is None:
            return None
        path = self.index_path(project.folder_id)
        if not project.sources or not path.is_file():
            return project, None
        try:
            index = KnowledgeIndex(path)
        except (EmberError, OSError, sqlite3.Error):
            return project, None  # (a damaged index: its Knowledge tab says so when the indexer runs)
        return project, TurnKnowledge(project, index, self.library.resolve)

    def why_not_open(self, answer_id: int, path: str) -> str | None:
        """None when an answer's source may be opened: `path` is a file of the index of the project its
        chat is in (a path from an imported chat or named in a model's text never is) and is still on
        disk; else the sentence saying why not."""
        try:
            project = self.project_of(self.chats.message(answer_id).conversation_id)
        except (KeyError, sqlite3.Error):
            project = None
        index_path = self.index_path(project.folder_id) if project is not None else None
        known = False
        if index_path is not None and index_path.is_file():
            with contextlib.suppress(EmberError, OSError, sqlite3.Error):
                index = KnowledgeIndex(index_path)
                try:
                    known = index.file(path) is not None
                finally:
                    index.close()
        if not known:
            return "This file is not in the knowledge of this chat's project (any more), so Ember does not open it."
        if not Path(path).is_file():
            return f"The file is no longer at {path}."
        return None


__all__ = ["ProjectAnswering", "TurnKnowledge"]
