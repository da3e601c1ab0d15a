"""A chat's project for the answer being asked (`window.projects.answering`): the project a chat is in
and the knowledge its answer is given (the engine's projects/turn.py `ProjectKnowledge` over the index
the window keeps current, indexing.py). Opening it is cheap (a SQLite file opened, nothing read); the
passages are retrieved on the engine thread. When the project has an embedding model, it is loaded there
too, at the first retrieval (`LazyEmbed`: the model's identity is its file's hash, read there as well),
and closed with the knowledge after the answer; one that cannot be loaded leaves the passages found by
their words (BM25), as the index's own runs do."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ember_chat.engine.errors import EmberError
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.projects.embedder import GGUFEmbedder
from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.records import Project, ProjectStore
from ember_chat.engine.projects.turn import ProjectKnowledge
from ember_chat.engine.storage.conversations import ConversationStore

NO_MODEL = ""  # the model id of an embedding model that could not be loaded: no index holds vectors for it


class LazyEmbed:
    """Retrieval's `Embed` for a project's embedding model, loaded on the thread that first asks for its
    `model_id` (the engine's, at retrieval), never on the GUI thread; `close()` lets it go."""

    def __init__(self, library: ModelLibrary, name: str) -> None:
        self.library = library
        self.name = name
        self.problem: str | None = None  # why it could not be loaded
        self._model: GGUFEmbedder | None = None
        self._tried = False
        self._lock = threading.Lock()

    def _loaded(self) -> GGUFEmbedder | None:
        with self._lock:
            if not self._tried:
                self._tried = True
                try:
                    self._model = GGUFEmbedder(self.library.resolve(self.name))
                except (EmberError, OSError, ValueError, RuntimeError) as exc:
                    self.problem = f"The embedding model {self.name} could not be loaded ({exc})."
            return self._model

    @property
    def model_id(self) -> str:
        model = self._loaded()
        return model.model_id if model is not None else NO_MODEL

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        model = self._loaded()
        if model is None:  # (not reached: retrieval asks for vectors of NO_MODEL first, and finds none)
            return np.zeros((len(texts), 1), dtype=np.float32)
        return model(texts)

    def close(self) -> None:
        with self._lock:
            model, self._model = self._model, None
            self._tried = True  # (closed: never loaded after this)
        if model is not None:
            model.close()


class TurnKnowledge(ProjectKnowledge):
    """A project's knowledge for one answer, closing its embedding model with its index."""

    def __init__(self, project: Project, index: KnowledgeIndex, embed: LazyEmbed | None) -> None:
        super().__init__(project, index, embed)
        self.lazy_embed = embed

    def close(self) -> None:
        super().close()
        if self.lazy_embed is not None:
            self.lazy_embed.close()


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
        embed = LazyEmbed(self.library, project.embedding_model) if project.embedding_model else None
        return project, TurnKnowledge(project, index, embed)

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


__all__ = ["LazyEmbed", "ProjectAnswering", "TurnKnowledge"]
