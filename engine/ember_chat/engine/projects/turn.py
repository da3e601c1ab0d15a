"""How a turn uses its project, the same for the window, the CLI and the API server: the system prompt
(`project_system`: the project's instructions, then the chat's own system prompt) and the knowledge the
request carries (`ProjectKnowledge`, inference/prompt/knowledge.py's `TurnKnowledge`): on the engine
thread, the passages retrieved for the last user message, as many as the context left takes, numbered
for the answer to cite."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.reasoning import split_thinking
from ember_chat.engine.errors import StoreError
from ember_chat.engine.inference.events import CitedPassage, KnowledgeUsed
from ember_chat.engine.inference.prompt.knowledge import KnowledgeFit
from ember_chat.engine.projects.active import ActiveIndex, active_sources
from ember_chat.engine.projects.citations import cited, knowledge_block, quoted, sources
from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
from ember_chat.engine.projects.records import Project, ProjectStore
from ember_chat.engine.projects.retrieval import Embed, Hit, Rerank, retrieve
from ember_chat.engine.storage.paths import AppPaths

log = logging.getLogger(__name__)

CANDIDATES = 8  # passages retrieved for a turn; as many of them as fit the context go in, best first
SHOWN_NAME = 80  # characters of a name asked for that an error repeats (a request's may be any length)
SHOWN_PROJECTS = 20  # projects an unknown name's error lists (the rest counted)


def project_system(instructions: str, system: str) -> str:
    """A project chat's system prompt: the project's instructions, a blank line, the chat's own (a
    preset's); either alone when the other is empty."""
    return "\n\n".join(part for part in (instructions.strip(), system.strip()) if part)


def shown_name(name: str) -> str:
    """A project's name as asked for, as an error repeats it: at most SHOWN_NAME characters."""
    return name if len(name) <= SHOWN_NAME else name[:SHOWN_NAME] + "…"


def project_named(projects: ProjectStore, name: str, *, list_known: bool) -> Project:
    """The project of this name (exactly, else ignoring case); StoreError with a sentence when none or
    several. `list_known`: the sentence for an unknown name lists the projects there are (the CLI's, for
    the user at this computer); never for a client of the API server, which is told only that there is
    no project of that name."""
    every = projects.projects()
    found = [p for p in every if p.name == name] or [p for p in every if p.name.casefold() == name.casefold()]
    if not found and not list_known:
        raise StoreError(f"There is no project named “{shown_name(name)}”.")
    if not found:
        known = ", ".join(f"“{p.name}”" for p in every[:SHOWN_PROJECTS]) or "none yet"
        if len(every) > SHOWN_PROJECTS:
            known += f" and {len(every) - SHOWN_PROJECTS} more"
        shown = shown_name(name)
        raise StoreError(f"There is no project named “{shown}” (projects: {known}).")
    if len(found) > 1:
        raise StoreError(f"Several projects are named “{name}”; rename one in the window first.")
    return found[0]


def with_instructions(messages: list[ChatMessage], instructions: str) -> list[ChatMessage]:
    """The messages with the project's instructions before the system prompt (project_system): in the
    first message when it is the system's, else in a system message put first."""
    if not instructions.strip():
        return messages
    if messages and messages[0].role == "system":
        return [ChatMessage("system", project_system(instructions, messages[0].content)), *messages[1:]]
    return [ChatMessage("system", project_system(instructions, "")), *messages]


def source_json(source: CitedPassage) -> dict[str, Any]:
    """A source as the API's `ember.sources` and the CLI's --json `sources` give it."""
    return {"n": source.n, "file": source.file_path, "page": source.page, "seq": source.seq,
            "passage_id": source.passage_id, "passage": source.text}  # fmt: skip


def knowledge_json(used: KnowledgeUsed) -> dict[str, Any]:
    """What an answer's JSON says of its project's knowledge: `project`, `knowledge` (passages retrieved,
    used, left out for the context, the budget, how they were ranked: "bm25", "vectors", "reranker", and
    `problems`: why a model the project names took no part) and `sources`."""
    return {
        "project": used.name,
        "knowledge": {"retrieved": used.retrieved, "used": len(used.sources), "left_out": used.left_out,
                      "budget_tokens": used.budget_tokens, "estimated": used.estimated,
                      "ranked_by": list(used.ranked_by), "problems": list(used.problems)},
        "sources": [source_json(s) for s in used.sources],
    }  # fmt: skip


def answered_json(used: KnowledgeUsed, answer: str, question: str) -> dict[str, Any]:
    """`knowledge_json` with each source saying whether the answer used it: `cited` (the answer has its
    [n] marker) and `quoted` (it has the passage's words: citations.quoted). `answer`: the answer's whole
    text (its thinking left out here: what it thought is not what it answered); `question`: the text of
    the last user message (retrieval's query). The CLI's --json and the API server's `ember` give it."""
    report = knowledge_json(used)
    said = split_thinking(answer).answer
    markers, words = cited(said, len(used.sources)), quoted(said, question, used.sources)
    report["sources"] = [{**s, "cited": s["n"] in markers, "quoted": s["n"] in words} for s in report["sources"]]
    return report


def fitted(hits: list[Hit], budget: int, count: Callable[[str], int]) -> list[Hit]:
    """The hits, best first, whose knowledge block stays within `budget` tokens: a passage that does not
    fit is left out and the next (shorter) one tried."""
    chosen: list[Hit] = []
    for hit in hits:
        trial = [*chosen, hit]
        if count(knowledge_block(trial)) <= budget:
            chosen = trial
    return chosen


class ProjectKnowledge:
    """A project's knowledge for one request: its index, and the embedding model and reranker the
    caller loaded for it (None: BM25 alone, or no reordering; `problems`: why a model the project names
    was not loaded, said with each answer). Only the passages of the project's active sources are
    retrieved (projects/active.py; `active`: a view kept by the caller across requests). The index is
    closed by close() unless `owns_index` is False. Safe to use on the engine thread."""

    def __init__(
        self,
        project: Project,
        index: KnowledgeIndex,
        embed: Embed | None = None,
        rerank: Rerank | None = None,
        candidates: int = CANDIDATES,
        *,
        problems: tuple[str, ...] = (),
        active: ActiveIndex | None = None,
        owns_index: bool = True,
    ) -> None:
        self.project = project
        self.index = index
        self.embed = embed
        self.rerank = rerank
        self.candidates = candidates
        self.problems = problems
        self.active = active if active is not None else ActiveIndex(index, active_sources(project))
        self.owns_index = owns_index

    @classmethod
    def open(
        cls, paths: AppPaths, project: Project, embed: Embed | None = None, rerank: Rerank | None = None
    ) -> ProjectKnowledge:
        """The project's knowledge over its index in the data folder (close() closes the index)."""
        return cls(project, KnowledgeIndex(knowledge_path(paths, project.folder_id)), embed, rerank)

    @property
    def name(self) -> str:
        return self.project.name

    @property
    def index_path(self) -> Path:
        return self.index.path

    def fit(self, question: str, budget: int, count: Callable[[str], int]) -> KnowledgeFit:
        """The passages for `question` within `budget` tokens. StoreError naming the project when its
        index cannot be read (a file damaged or taken away while open), never SQLite's own exception."""
        try:
            hits = retrieve(self.active.searched(), question, self.candidates, self.embed, self.rerank)
            chosen = fitted(hits, budget, count)
            ranked_by, problems = self._ranking()
        except sqlite3.DatabaseError as exc:
            log.warning("the knowledge index of project %s cannot be read: %s", self.project.folder_id, exc)
            name = self.project.name
            raise StoreError(f"The knowledge index of the project “{name}” cannot be read: {exc}.") from None
        return KnowledgeFit(knowledge_block(chosen), tuple(sources(chosen)), len(hits), ranked_by, problems)

    def _ranking(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """How retrieval ranks the passages, and why a model the project names does not take part."""
        ranked_by, problems = ["bm25"], list(self.problems)
        if self.embed is not None:
            made_by = self.index.embedding_model()
            if made_by is not None and made_by == self.embed.model_id:
                ranked_by.append("vectors")
            else:
                model = self.project.embedding_model or "its embedding model"
                why = "holds no vectors yet" if made_by is None else f"holds the vectors of another model ({made_by})"
                problems.append(f"The project's index {why}, not of {model}: the passages are found by their words "
                                "alone until it is indexed again.")  # fmt: skip
        if self.rerank is not None:
            ranked_by.append("reranker")
        return tuple(ranked_by), tuple(problems)

    def close(self) -> None:
        if self.owns_index:
            self.index.close()


__all__ = [
    "CANDIDATES",
    "ProjectKnowledge",
    "answered_json",
    "fitted",
    "knowledge_json",
    "project_named",
    "project_system",
    "source_json",
    "with_instructions",
]
