"""`ember-chat run --project NAME`: the project's knowledge for the answer, and what --json says of it."""

from __future__ import annotations

import sys
from typing import Any

from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.events import KnowledgeUsed
from ember_chat.engine.projects.citations import cited
from ember_chat.engine.projects.turn import ProjectKnowledge, knowledge_json, project_named
from ember_chat.engine.storage.paths import AppPaths


def open_project(paths: AppPaths, name: str) -> ProjectKnowledge:
    """The knowledge of the project named `name` (EmberError with a sentence when there is none); says on
    stderr when its index holds no passage yet."""
    from ember_chat.engine.projects.records import ProjectStore
    from ember_chat.engine.storage.conversations import ConversationStore

    if not paths.database.exists():
        raise EmberError(f"There is no project named “{name}” (no chats or projects yet).")
    store = ConversationStore(paths.database)
    try:
        project = project_named(ProjectStore(store), name)
    finally:
        store.close()
    knowledge = ProjectKnowledge.open(paths, project)
    if knowledge.index.counts().passages == 0:
        hint = f"`ember-chat projects index {project.name}` reads its files"
        print(f"[“{project.name}” has no indexed passages yet: {hint}]", file=sys.stderr)
    return knowledge


def knowledge_report(name: str, used: KnowledgeUsed | None, answer: str) -> dict[str, Any]:
    """The --json line's `project`, `knowledge` and `sources` (each: n, file, page, seq, passage_id,
    passage, and whether the answer cites it with [n])."""
    if used is None:
        return {"project": name, "sources": []}
    report = knowledge_json(used)
    markers = cited(answer, len(used.sources))
    report["sources"] = [{**s, "cited": s["n"] in markers} for s in report["sources"]]
    return report
