"""`ember-chat run --project NAME`: the project's knowledge for the answer, and what --json says of it."""

from __future__ import annotations

import sys
from typing import Any

from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.events import KnowledgeUsed
from ember_chat.engine.projects.citations import cited
from ember_chat.engine.projects.turn import ProjectKnowledge
from ember_chat.engine.storage.paths import AppPaths


def open_project(paths: AppPaths, name: str) -> ProjectKnowledge:
    """The knowledge of the project named `name` (EmberError with a sentence when there is none); says on
    stderr when its index holds no passage yet."""
    from ember_chat.engine.cli.projects import project_named
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
    """The --json line's `project` and `sources` (each: n, file, page, passage, and whether the answer
    cites it with [n])."""
    if used is None:
        return {"project": name, "sources": []}
    markers = cited(answer, len(used.sources))
    return {
        "project": name,
        "knowledge": {"retrieved": used.retrieved, "used": len(used.sources), "left_out": used.left_out,
                      "budget_tokens": used.budget_tokens},
        "sources": [
            {"n": s.n, "file": s.file_path, "page": s.page, "seq": s.seq, "passage_id": s.passage_id,
             "passage": s.text, "cited": s.n in markers}
            for s in used.sources
        ],
    }  # fmt: skip
