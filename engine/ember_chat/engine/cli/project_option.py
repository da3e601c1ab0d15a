"""`ember-chat run --project NAME`: the project's knowledge for the answer, and what --json says of it."""

from __future__ import annotations

import sys
from typing import Any

from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.text import terminal_text
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.events import KnowledgeUsed
from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
from ember_chat.engine.projects.rankers import Rankers, load_rankers
from ember_chat.engine.projects.records import Project
from ember_chat.engine.projects.turn import ProjectKnowledge, answered_json, project_named
from ember_chat.engine.storage.paths import AppPaths


class RunKnowledge(ProjectKnowledge):
    """A project's knowledge for one `run`, closing the models loaded for it with its index."""

    def __init__(self, project: Project, index: KnowledgeIndex, rankers: Rankers) -> None:
        super().__init__(project, index, rankers.embed, rankers.rerank, problems=rankers.problems)
        self.rankers = rankers

    def close(self) -> None:
        super().close()
        self.rankers.close()


def open_project(paths: AppPaths, name: str) -> ProjectKnowledge:
    """The knowledge of the project named `name` (EmberError with a sentence when there is none), with
    the embedding model and reranker it names loaded for this run; says on stderr when its index holds
    no passage yet, and why a model it names could not be loaded (its answer ranks without it)."""
    from ember_chat.engine.projects.records import ProjectStore
    from ember_chat.engine.storage.conversations import ConversationStore

    if not paths.database.exists():
        raise EmberError(f"There is no project named “{name}” (no chats or projects yet).")
    store = ConversationStore(paths.database)
    try:
        project = project_named(ProjectStore(store), name, list_known=True)
    finally:
        store.close()
    index = KnowledgeIndex(knowledge_path(paths, project.folder_id))
    try:
        rankers = load_rankers(project, lambda model: resolve_model(model, paths))
    except BaseException:
        index.close()
        raise
    knowledge = RunKnowledge(project, index, rankers)
    if index.counts().passages == 0:
        hint = f"`ember-chat projects index {project.name}` reads its files"
        print(f"[“{terminal_text(project.name)}” has no indexed passages yet: {hint}]", file=sys.stderr)
    for problem in rankers.problems:
        print(f"[{terminal_text(problem)}]", file=sys.stderr)
    return knowledge


def knowledge_report(name: str, used: KnowledgeUsed | None, answer: str, question: str) -> dict[str, Any]:
    """The --json line's `project`, `knowledge` and `sources` (each: n, file, page, seq, passage_id,
    passage, whether the answer cites it with [n], and whether it uses its words: turn.answered_json)."""
    if used is None:
        return {"project": name, "sources": []}
    return answered_json(used, answer, question)
