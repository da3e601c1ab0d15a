"""A chat's project for the answer being asked (`window.projects.answering`): the project a chat is in
and the knowledge its answer is given (the engine's projects/turn.py `ProjectKnowledge` over the index
the window keeps current, indexing.py). Nothing is opened on the GUI thread: the index is opened on the
engine thread at the retrieval (`TurnKnowledge.fit`; one that cannot be opened, damaged or locked, leaves
the answer without knowledge, and Why this answer says so). The embedding model and reranker the project
names are loaded there too (`KeptModels`: a model's identity is its file's hash, read there as well) and
kept for the next answers in the same project: loaded again only when another project is answered in or
the project names other models, and closed then (on the engine thread, once no answer uses them) or at
quit (on a thread of their own, joined with the window's). One that cannot be loaded leaves the passages
ranked without it, and the answer's knowledge says why."""

from __future__ import annotations

import contextlib
import os
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
from ember_chat.engine.storage.import_plan import IMPORTED_PASSAGE

_Key = tuple[int, str | None, str | None, tuple[tuple[str, int, int] | None, ...]]


class KeptModels:
    """The models of the project last answered in, kept between its answers. `take` (engine thread)
    gives an answer the loaded models, loading them when they are not these; `give_back` (any thread)
    says the answer is done with them; models no longer kept are closed by the next `take` once no
    answer uses them, and all by `close` at quit."""

    def __init__(self, resolve: Resolve) -> None:
        self.resolve = resolve
        self._lock = threading.Lock()
        self._kept: tuple[_Key, Rankers] | None = None  # (the project and its models' files, the models)
        self._users: dict[int, int] = {}  # id(models) -> answers using them
        self._retired: list[Rankers] = []
        self._closed = False
        self._closer: threading.Thread | None = None
        self.loads = 0  # models loaded (for tests: kept models are not loaded again)

    def take(self, project: Project) -> Rankers:
        key = self._key(project)
        with self._lock:
            kept = self._kept
            if not self._closed and kept is not None and kept[0] == key:
                self._users[id(kept[1])] = self._users.get(id(kept[1]), 0) + 1
                return kept[1]
            if kept is not None:
                self._retired.append(kept[1])
                self._kept = None
            idle = [r for r in self._retired if not self._users.get(id(r))]
            self._retired = [r for r in self._retired if self._users.get(id(r))]
        for rankers in idle:
            rankers.close()
        if self._closed:
            return Rankers(None, None)
        rankers = load_rankers(project, self.resolve)
        with self._lock:
            self.loads += 1
            closed = self._closed
            if not closed:
                self._kept = (key, rankers)
                self._users[id(rankers)] = 1
        if closed:  # (the window quit while they were loaded)
            rankers.close()
            return Rankers(None, None)
        return rankers

    def _key(self, project: Project) -> _Key:
        """The project, the models it names and their files as they are now (a file replaced or gone under
        the same name: the models are loaded again, and one gone is said)."""
        files: list[tuple[str, int, int] | None] = []
        for name in (project.embedding_model, project.reranker):
            try:
                path = self.resolve(name) if name else None
                st = path.stat() if path is not None else None
                files.append((str(path), st.st_size, st.st_mtime_ns) if path is not None and st is not None else None)
            except (EmberError, OSError, ValueError):
                files.append(None)
        return (project.folder_id, project.embedding_model, project.reranker, tuple(files))

    def give_back(self, rankers: Rankers) -> None:
        with self._lock:
            left = self._users.get(id(rankers), 0) - 1
            if left > 0:
                self._users[id(rankers)] = left
            else:
                self._users.pop(id(rankers), None)

    def close(self) -> None:
        """At quit: every model closed, on a thread of its own (`join`): never on the GUI thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            every = [*self._retired, *([self._kept[1]] if self._kept is not None else [])]
            self._retired, self._kept = [], None
        if every:
            self._closer = threading.Thread(target=lambda: [r.close() for r in every], name="close project models")
            self._closer.start()

    def join(self, timeout: float | None = None) -> bool:
        if self._closer is not None:
            self._closer.join(timeout)
            return not self._closer.is_alive()
        return True


class TurnKnowledge(ProjectKnowledge):
    """A project's knowledge for one answer: its index opened, and the models the project names
    (projects/rankers.py, kept by `KeptModels`) taken, on the engine thread at its retrieval, never
    on the GUI thread. An index that cannot be opened leaves the answer without knowledge, a model
    that cannot be loaded the passages ranked without it; the answer's KnowledgeUsed.problems says
    why. close() lets the index go and gives the models back."""

    def __init__(self, project: Project, path: Path, models: KeptModels) -> None:  # (nothing opened here)
        self.project = project
        self.path = path
        self.models = models
        self.rankers: Rankers | None = None
        self.opened: ProjectKnowledge | None = None
        self.closed = False
        self._lock = threading.Lock()

    @property
    def index_path(self) -> Path:
        return self.path

    def fit(self, question: str, budget: int, count: Callable[[str], int]) -> KnowledgeFit:
        with self._lock:
            if self.closed:
                return KnowledgeFit("", (), 0, ())
            if self.opened is None:
                try:
                    index = KnowledgeIndex(self.path)
                except (EmberError, OSError, sqlite3.Error) as exc:
                    why = f"The project's knowledge could not be read ({exc}); this answer was given without it."
                    return KnowledgeFit("", (), 0, (), (why,))
                if self.project.embedding_model or self.project.reranker:
                    self.rankers = self.models.take(self.project)
                r = self.rankers or Rankers(None, None)
                self.opened = ProjectKnowledge(self.project, index, r.embed, r.rerank, problems=r.problems)
            opened = self.opened
        return opened.fit(question, budget, count)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            opened, self.opened = self.opened, None
            rankers, self.rankers = self.rankers, None
        if opened is not None:
            opened.close()
        if rankers is not None:
            self.models.give_back(rankers)


class ProjectAnswering:
    """What an answer in a chat of a project is given: the project and its knowledge."""

    def __init__(
        self, chats: ConversationStore, store: ProjectStore, library: ModelLibrary, index_path: Callable[[int], Path]
    ) -> None:
        self.chats = chats
        self.store = store
        self.library = library
        self.index_path = index_path
        self.models = KeptModels(library.resolve)  # (the last project's, between its answers)

    def project_of(self, conversation_id: int) -> Project | None:
        with contextlib.suppress(EmberError, KeyError, sqlite3.Error):
            return self.store.of_chat(conversation_id)
        return None

    def turn_for(self, conversation_id: int) -> tuple[Project, ProjectKnowledge | None] | None:
        """The chat's project and the knowledge to answer with (None: the project has no index yet);
        None when the chat is in no project. The caller closes the knowledge once the answer has ended."""
        project = self.project_of(conversation_id)
        if project is None:
            return None
        path = self.index_path(project.folder_id)
        if not project.sources or not path.is_file():
            return project, None
        return project, TurnKnowledge(project, path, self.models)  # (opened on the engine thread)

    def why_not_open(self, answer_id: int, path: str, passage_id: int) -> str | None:
        """None when an answer's source (its `passage_id`) may be opened: `path` is a file of the index of
        the project its chat is in (a path from an imported chat or named in a model's text never is) and is
        still on disk; else the sentence saying why not. A source an imported chat brought (IMPORTED_PASSAGE:
        no index gave it) is refused before anything is looked at, even where its path names a file of the
        project. Else it opens the index (which may wait on the indexer) and looks at the disk (a network
        drive may hang): the window runs it off the GUI thread."""
        if passage_id == IMPORTED_PASSAGE or passage_id < 0:  # (a path a chat file named: never looked up)
            return "This source came with an imported chat: Ember opens only files of its projects' own indexes."
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
        in_project = known or (project is not None and _under_a_source(project, path))
        if in_project and not Path(path).is_file():  # (the index forgets a file gone: its folder still says)
            return f"The file is no longer at {path}: it was moved or deleted since it was indexed."
        if not known:
            return "This file is not in the knowledge of this chat's project (any more), so Ember does not open it."
        return None

    def close(self) -> None:
        """At quit: the kept models closed (on their own thread: `join`)."""
        self.models.close()

    def join(self, timeout: float | None = None) -> bool:
        return self.models.join(timeout)


def _under_a_source(project: Project, path: str) -> bool:
    """`path` is one of the project's knowledge files or folders, or inside one of its folders (by the
    names alone: the disk is not asked). A source that came with an imported chat and is not confirmed
    is another computer's path: never counted."""
    target = os.path.normpath(path)
    for source in project.sources:
        if source.from_import and source.paused:
            continue
        root = os.path.normpath(source.path)
        if target == root or target.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


__all__ = ["KeptModels", "ProjectAnswering", "TurnKnowledge"]
