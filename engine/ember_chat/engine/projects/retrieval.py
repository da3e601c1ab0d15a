"""A project's passages for one question: BM25 over the index's FTS5 table and, when an embedding model
is given and the index holds its vectors, cosine similarity over them; the two rankings fused by
reciprocal rank fusion, then reordered by a reranker when one is given (design: issue 34).

The vectors are searched as one flat float32 matrix with numpy, loaded once per (index file, embedding
model) and kept until the index changes (its generation counter moves). Chosen over sqlite-vec by measure:
100,000 passages x dim 384, top 50, one question at a time, 200 questions, on the 2 shared cores of the
development machine (numpy 2.4.6, SQLite 3.40.1): the flat matrix-vector product + argpartition p50
14.2 ms / p95 18.7 ms (the matrix read from the `vectors` table once: 0.33 s); sqlite-vec 0.1.9's vec0
table (`embedding MATCH ? AND k = 50`, its brute-force scan in C) p50 124.5 ms / p95 146.8 ms, the
same top 10. Besides, Ember's Python here is built without `enable_load_extension`, so sqlite-vec
could not be loaded at all: no new dependency. The product is numpy's einsum loop, one thread, not
BLAS's threaded `@` (100k x 384 beside other work: p50 11.8 / p95 15.1 ms against 16.3 / 32.0 ms).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ember_chat.engine.inference.events import FilePassage

CANDIDATES = 50  # passages each ranking contributes to the fusion
# Weighted reciprocal rank fusion: a passage scores sum(weight / (RRF_K + rank)) over the rankings. Chosen
# by measure with a real embedding model (all-MiniLM-L6-v2 converted by bench/convert_bert_gguf.py) on
# bench/retrieval_projects' two sets, recall@5 (coreutils manual, 30 questions / generated, 300):
# BM25 alone 0.733 / 1.000; the plain fusion (k 60, equal weights) 0.733 / 0.857 (the model knows no
# made-up names: its neighbours pushed the fact's passage out); k 10 with the vectors weighted 0.3
# 0.800 / 1.000 (k 5-10 with 0.3-0.4 alike; k 60 at 0.3: 0.767 / 0.923; the vector ranking cut to its
# top 10: 0.700 / 0.873). BM25 leads; the vectors break its near-ties and lift a passage both rankings
# hold, and one BM25 missed still comes in when BM25 finds little. Tuned on those same questions: few
# (2 numbers, 16 pairs tried), but not checked on questions held out.
# With index.LEAD_BOOST later (a section's first passage boosted in BM25's ranking): BM25 alone 0.800 /
# 1.000, fused 0.867 / 1.000 (recall@1 coreutils 0.367 -> 0.400, generated 0.770 -> 0.790).
# Held out, on the Python FAQ's own 172 questions (bench/retrieval_sets.py; BM25 alone 0.791): these
# weights give 0.855, but the vectors weighted more do better there — 0.5: 0.860, 0.7: 0.884, 1.0 (k 10
# or 60): 0.901 — while coreutils falls (0.7: 0.833, 1.0: 0.800) and the generated set with k 60 and
# equal weights fell to 0.857, under BM25 alone. Kept at 0.3: the only weight measured where the fusion
# is at least BM25 alone on all three sets.
RRF_K = 10
# A BM25 candidate scoring under this share of the best one is not given: it matches the question by a
# common word only ("How many ships did Orlov count in Velmar?" gave notes saying "many thanks" beside
# the one page about Orlov's ships, in the prompt and the Sources: about 0.1 of the best). Not higher: the
# title column (file name, heading) weighs 8 times the text, so a passage saying the word in its text
# beside a file named for it scores about 0.26 of that file's passages (a review's budget.md case, kept;
# both in tests/engine/test_project_retrieval.py). bench/retrieval_projects' real sets (`given_of_8`: the
# passages a turn's best 8 keep): FAQ 7.85 at 0.2 (7.3 at 0.3), coreutils 8.0; recall@5 unchanged (at 0.4
# two FAQ answers were lost).
BM25_FLOOR = 0.2
VECTOR_WEIGHT = 0.3  # the vector ranking's weight in the fusion (BM25's: 1)
RERANK_TOP = 20  # the fused passages a reranker reorders
CACHED_MATRICES = 2  # (index, model) matrices kept in memory at once (100k x 384 float32 is 154 MB)


class Embed(Protocol):
    """An embedding model: texts -> float32 (n, dim), each row L2-normalised; `model_id` names the model
    (the index's meta `embedding_model` for the vectors it made)."""

    model_id: str

    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


Rerank = Callable[[str, Sequence[str]], Sequence[float]]  # (query, texts) -> a score each, higher is better


class SearchableIndex(Protocol):
    """What retrieval needs of a KnowledgeIndex (projects/index.py)."""

    @property
    def path(self) -> Path: ...

    def bm25(self, question: str, limit: int) -> list[tuple[int, float]]: ...

    def found_passages(self, passage_ids: Sequence[int]) -> Mapping[int, FilePassage]:
        """The passages of these ids still in the index, by id (one gone since it was ranked left out)."""
        ...

    def generation(self) -> int:
        """A number that moves with every change of the index's passages or vectors."""
        ...

    def vectors_for(self, model_id: str) -> StoredVectors | None:
        """The vectors `model_id` made; None when the index's were made by another model (or there are none)."""
        ...


class StoredVectors(Protocol):
    """An index's vectors (projects/index.py `Vectors`): row i of `matrix` is passage `passage_ids[i]`'s."""

    @property
    def passage_ids(self) -> np.ndarray: ...
    @property
    def matrix(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Hit:
    passage_id: int
    file_path: str
    page: int | None  # 1-based PDF page, None for a file without pages
    seq: int  # the passage's position in its file
    text: str
    bm25_rank: int | None  # 1-based rank in the BM25 ranking, None: not among its best CANDIDATES
    vector_rank: int | None  # 1-based rank by cosine similarity, None: not among its best or no vectors
    score: float  # the reranker's score where it reordered the hit, else the fused (RRF) score


@dataclass
class _Matrix:
    generation: int
    ids: np.ndarray
    vectors: np.ndarray


class _MatrixCache:
    """The flat vector matrices of recently searched (index, model) pairs, least recently used dropped.
    A matrix is reused while the index's `generation()` stays the same."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], _Matrix] = OrderedDict()

    def get(self, index: SearchableIndex, model_id: str) -> _Matrix | None:
        key = (str(index.path), model_id)
        generation = index.generation()
        with self._lock:
            item = self._items.get(key)
            if item is not None and item.generation == generation:
                self._items.move_to_end(key)
                return item
        loaded = index.vectors_for(model_id)  # (outside the lock: another index's search goes on)
        if loaded is None:
            with self._lock:
                self._items.pop(key, None)
            return None
        item = _Matrix(generation, np.ascontiguousarray(loaded.passage_ids, dtype=np.int64),
                       np.ascontiguousarray(loaded.matrix, dtype=np.float32))  # fmt: skip
        with self._lock:
            self._items[key] = item
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return item

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


MATRICES = _MatrixCache(CACHED_MATRICES)


def nearest(vectors: np.ndarray, query: np.ndarray, limit: int) -> np.ndarray:
    """Row numbers of the `limit` rows most similar to `query` (cosine: the rows are unit length), best first."""
    if len(vectors) == 0:
        return np.empty(0, dtype=np.int64)
    # einsum's own loop, one thread: BLAS's threaded matrix-vector product (`vectors @ query`) was as fast
    # alone but its p95 went from 0.6 to 8 ms at 10,000 x 384 while other threads used the cores
    sims = np.einsum("ij,j->i", vectors, query)
    limit = min(limit, len(sims))
    top = np.argpartition(-sims, limit - 1)[:limit]
    return top[np.argsort(-sims[top], kind="stable")]


def vector_ranking(index: SearchableIndex, question: str, embed: Embed, limit: int = CANDIDATES) -> list[int]:
    """The passage ids closest to the question by `embed`'s vectors, best first; [] when the index holds
    no vectors of this model (an index is never searched with another model's vectors: the question is
    not even embedded)."""
    matrix = MATRICES.get(index, embed.model_id)
    return [] if matrix is None else _closest(matrix, question, embed, limit)


def _closest(matrix: _Matrix, question: str, embed: Embed, limit: int) -> list[int]:
    if len(matrix.ids) == 0:
        return []
    query = np.asarray(embed([question]), dtype=np.float32).reshape(-1)
    if query.shape[0] != matrix.vectors.shape[1]:
        return []  # (a model_id that lies about its model: its vectors cannot be compared)
    return [int(matrix.ids[i]) for i in nearest(matrix.vectors, query, limit)]


def fuse(
    rankings: Sequence[Sequence[int]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each id scored sum(weight / (k + rank)) over the rankings it is in (rank
    from 1; weights 1 unless given, one a ranking), best first; ties keep the order of first appearance."""
    if weights is not None and len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[int, float] = {}
    for i, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else float(weights[i])
        for rank, pid in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def retrieve(
    index: SearchableIndex, question: str, k: int = 5, embed: Embed | None = None, rerank: Rerank | None = None
) -> list[Hit]:
    """The `k` passages of the index that best answer `question`, best first (see the module's text)."""
    if k <= 0:
        return []
    scored = index.bm25(question, CANDIDATES)
    by_bm25 = [pid for pid, score in scored if score <= BM25_FLOOR * scored[0][1]]  # (bm25: negative)
    by_vector = vector_ranking(index, question, embed) if embed is not None else []
    fused = fuse([by_bm25, by_vector], weights=(1.0, VECTOR_WEIGHT))
    bm25_rank = {pid: r for r, pid in enumerate(by_bm25, start=1)}
    vector_rank = {pid: r for r, pid in enumerate(by_vector, start=1)}
    chosen = fused[: max(k, RERANK_TOP) if rerank is not None else k]
    passages = index.found_passages([pid for pid, _ in chosen])
    chosen = [(pid, score) for pid, score in chosen if pid in passages]  # (the indexer writes meanwhile)
    if rerank is not None and chosen:
        head = chosen[:RERANK_TOP]
        scores = rerank(question, [passages[pid].text for pid, _ in head])
        reranked = sorted(zip((pid for pid, _ in head), (float(s) for s in scores), strict=True),
                          key=lambda item: -item[1])  # fmt: skip
        chosen = reranked + chosen[RERANK_TOP:]
    return [_hit(pid, passages[pid], bm25_rank.get(pid), vector_rank.get(pid), score) for pid, score in chosen[:k]]


def _hit(pid: int, p: FilePassage, bm25_rank: int | None, vector_rank: int | None, score: float) -> Hit:
    return Hit(pid, p.file_path, p.page, p.seq, p.text, bm25_rank, vector_rank, score)


__all__ = [
    "Embed",
    "Hit",
    "Rerank",
    "SearchableIndex",
    "StoredVectors",
    "fuse",
    "nearest",
    "retrieve",
    "vector_ranking",
]
