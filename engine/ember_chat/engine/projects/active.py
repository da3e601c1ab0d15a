"""A project's knowledge index as retrieval sees it: only the passages of its active sources. A paused
source keeps its passages in the index (resuming it needs no new reading), and a source removed from the
project keeps them until the next indexing run drops them; neither is ever retrieved.

`ActiveIndex(index, active_sources(project)).searched()` is the index itself when every file it holds
belongs to an active source (the usual case: nothing filtered), else the view that leaves the others out.
Which files belong to which source is read once per generation of the index (`KnowledgeIndex.generation`),
and the passage ids of the left-out files only when vectors are searched."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ember_chat.engine.projects.index import KnowledgeIndex, Passage, Vectors
from ember_chat.engine.projects.records import Project
from ember_chat.engine.projects.retrieval import SearchableIndex

WIDEN = 4  # BM25 asked for this many times more matches while left-out passages crowd the active ones
MAX_WIDENED = 5_000  # at most this many BM25 matches looked through for one question


class ActiveIndex:
    """A KnowledgeIndex whose passages of sources not in `active` (source ids) are not found by BM25
    and not among its vectors. `path` is the index file's, marked with the active sources, because
    retrieval keeps the matrix of an index's vectors by path and model, and this one holds fewer rows."""

    def __init__(self, index: KnowledgeIndex, active: frozenset[int]) -> None:
        self.index = index
        self.active = active
        self.path = Path(f"{index.path}#sources={','.join(str(i) for i in sorted(active))}")
        self._lock = threading.Lock()
        self._generation: int | None = None
        self._left_out_files: frozenset[int] = frozenset()
        self._left_out_passages: np.ndarray | None = None

    def left_out_files(self) -> frozenset[int]:
        """Ids of the index's files whose source is not active (paused, or no longer in the project)."""
        generation = self.index.generation()
        with self._lock:
            if generation == self._generation:
                return self._left_out_files
        files = frozenset(f.id for f in self.index.files() if f.source_id not in self.active)
        with self._lock:
            self._generation, self._left_out_files, self._left_out_passages = generation, files, None
        return files

    def searched(self) -> SearchableIndex:
        """What retrieval searches: this view while some file is left out, else the index itself."""
        return self if self.left_out_files() else self.index

    def generation(self) -> int:
        return self.index.generation()

    def passage(self, passage_id: int) -> Passage:
        return self.index.passage(passage_id)

    def found_passages(self, passage_ids: Sequence[int]) -> dict[int, Passage]:
        return self.index.found_passages(passage_ids)

    def bm25(self, question: str, limit: int) -> list[tuple[int, float]]:
        left_out = self.left_out_files()
        asked = limit
        while True:
            found = self.index.bm25(question, asked)
            passages = self.index.found_passages([pid for pid, _ in found])  # (one gone meanwhile: left out)
            kept = [(pid, score) for pid, score in found if pid in passages and passages[pid].file_id not in left_out]
            if len(kept) >= limit or len(found) < asked or asked >= MAX_WIDENED:
                return kept[:limit]
            asked = min(asked * WIDEN, MAX_WIDENED)

    def vectors_for(self, model_id: str) -> Vectors | None:
        vectors = self.index.vectors_for(model_id)
        if vectors is None:
            return None
        left_out = self._left_out_passage_ids()
        keep = ~np.isin(vectors.passage_ids, left_out)
        return Vectors(vectors.model_id, vectors.passage_ids[keep], vectors.matrix[keep])

    def _left_out_passage_ids(self) -> np.ndarray:
        files = self.left_out_files()
        with self._lock:
            if self._left_out_passages is not None:
                return self._left_out_passages
        ids = [p.id for file_id in sorted(files) for p in self.index.passages_of(file_id)]
        found = np.asarray(ids, dtype=np.int64)
        with self._lock:
            self._left_out_passages = found
        return found


def active_sources(project: Project) -> frozenset[int]:
    """The ids of the project's sources that are not paused."""
    return frozenset(s.id for s in project.sources if not s.paused)


__all__ = ["ActiveIndex", "active_sources"]
