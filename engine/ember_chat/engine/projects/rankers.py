"""The embedding model and reranker a project names, loaded in this process (projects/embedder.py) for
its retrieval: by the CLI once per run, by the API server once per project and kept until it stops.

A model that cannot be loaded (the file gone, damaged, not an embedding model or not a reranker) is not
an error: the passages are then ranked without it, and `problems` says why, a sentence each (an answer's
`ember.knowledge.problems`, the CLI's --json)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ember_chat.engine.errors import EmberError
from ember_chat.engine.projects.records import Project

if TYPE_CHECKING:  # (embedder.py imports llama.cpp: only when a model is loaded, never at start-up)
    from ember_chat.engine.projects.embedder import GGUFEmbedder, GGUFReranker

M = TypeVar("M", "GGUFEmbedder", "GGUFReranker")
Resolve = Callable[[str], Path]  # a model's name (as the project stores it) -> its file (models/library.py)


@dataclass
class Rankers:
    """A project's loaded models: `embed` (None: none named, or not loadable), `rerank` likewise, and the
    names they were loaded for (to tell when the project names others)."""

    embedding_model: str | None
    reranker: str | None
    embed: GGUFEmbedder | None = None
    rerank: GGUFReranker | None = None
    problems: tuple[str, ...] = ()

    def serves(self, project: Project) -> bool:
        """Whether these are the models `project` names now."""
        return (self.embedding_model, self.reranker) == (project.embedding_model, project.reranker)

    def close(self) -> None:
        embed, rerank, self.embed, self.rerank = self.embed, self.rerank, None, None
        for model in (embed, rerank):
            if model is not None:
                model.close()


def load_embedder(name: str | None, resolve: Resolve) -> tuple[GGUFEmbedder | None, str | None]:
    """The embedding model `name` loaded, or None and why not (None, None: no model named)."""
    from ember_chat.engine.projects.embedder import GGUFEmbedder

    return _load(name, resolve, GGUFEmbedder, "embedding model", "the passages are found by their words alone")


def load_rankers(project: Project, resolve: Resolve) -> Rankers:
    """The models `project` names, each loaded or its problem said (never raises for a model file)."""
    from ember_chat.engine.projects.embedder import GGUFReranker

    embed, embed_problem = load_embedder(project.embedding_model, resolve)
    rerank, rerank_problem = _load(project.reranker, resolve, GGUFReranker, "reranker",
                                   "the passages keep the order of their search")  # fmt: skip
    problems = tuple(p for p in (embed_problem, rerank_problem) if p)
    return Rankers(project.embedding_model, project.reranker, embed, rerank, problems)


def _load(
    name: str | None, resolve: Resolve, kind: Callable[[Path], M], what: str, meanwhile: str
) -> tuple[M | None, str | None]:
    if not name:
        return None, None
    try:
        path = resolve(name)
        if not path.is_file():
            return None, f"The project's {what} {name} is not there ({path}); {meanwhile}."
        return kind(path), None
    except (EmberError, OSError, ValueError, RuntimeError) as exc:
        return None, f"The project's {what} {name} could not be loaded ({exc}); {meanwhile}."


__all__ = ["Rankers", "Resolve", "load_embedder", "load_rankers"]
