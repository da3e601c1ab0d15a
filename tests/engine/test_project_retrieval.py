"""A project's retrieval (projects/retrieval.py) over a real KnowledgeIndex file: BM25 alone, vectors of a
generated embedding GGUF run in-process (projects/embedder.py) fused with it, an index never searched
with another model's vectors, the vector matrix reloaded when the index changes, a reranker's order; and
the knowledge block and citations (projects/citations.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from ember_chat.engine.attachments.chunking import Chunk
from ember_chat.engine.projects.active import ActiveIndex
from ember_chat.engine.projects.citations import (
    CITE_INSTRUCTION,
    ProjectSource,
    answer_uses,
    cited,
    knowledge_block,
    quoted,
    sources,
)
from ember_chat.engine.projects.embedder import GGUFEmbedder, GGUFReranker
from ember_chat.engine.projects.index import IndexedFile, KnowledgeIndex, Passage, Vectors
from ember_chat.engine.projects.retrieval import MATRICES, RRF_K, VECTOR_WEIGHT, fuse, retrieve
from tests.helpers.gguf_factory import write_tiny_bert, write_word_bert

PASSAGES = [
    "The harbour master repaired the lighthouse lamp after the winter storms.",
    "Our recipe for plum jam needs sugar, lemons and a slow simmer.",
    "Invoices are paid within thirty days of the delivery date.",
    "The violin was tuned by Marta before the evening concert.",
    "Train tickets to the coast cost less when bought a week ahead.",
    "Backups of the ledger are copied to the cellar drive every Friday.",
]
# each word its own meaning, "fixed" the same as "repaired", "beacon" the same as "lamp"
MEANINGS = {w: w for text in PASSAGES for w in text.lower().replace(".", "").replace(",", "").split()}
MEANINGS |= {"fixed": "repaired", "beacon": "lamp", "who": "", "the": "", "after": "", "a": "", "of": ""}


class Counted:
    """An embedder whose calls are counted (the real model underneath)."""

    def __init__(self, embedder: GGUFEmbedder) -> None:
        self.model_id = embedder.model_id
        self._embedder = embedder
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return self._embedder(texts)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GGUFEmbedder, GGUFEmbedder]]:
    folder = tmp_path_factory.mktemp("embedding-models")
    one = GGUFEmbedder(write_word_bert(folder / "words.gguf", MEANINGS), threads=1)
    other = GGUFEmbedder(write_word_bert(folder / "other.gguf", MEANINGS, seed=1), threads=1)
    yield one, other
    one.close()
    other.close()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[KnowledgeIndex]:
    ix = KnowledgeIndex(tmp_path / "knowledge.sqlite3")
    ix.put_file(1, "/docs/notes.txt", 100, 1, 0, [Chunk(i, 0, None, t) for i, t in enumerate(PASSAGES[:3])])
    ix.put_file(1, "/docs/report.pdf", 100, 1, 2, [Chunk(i, 0, i + 1, t) for i, t in enumerate(PASSAGES[3:])])
    yield ix
    ix.close()
    MATRICES.clear()


def embed_all(index: KnowledgeIndex, embedder: GGUFEmbedder) -> None:
    ids, texts = zip(*index.passages_without_vectors(1000), strict=True)
    index.use_embedding_model(embedder.model_id)
    index.put_vectors(embedder.model_id, ids, embedder(texts))


def test_bm25_alone_finds_the_passage_with_its_file_and_page(index: KnowledgeIndex) -> None:
    hits = retrieve(index, "When is the ledger backed up? backups ledger", k=3)
    top = hits[0]
    assert top.text == PASSAGES[5] and top.file_path == "/docs/report.pdf" and (top.page, top.seq) == (3, 2)
    assert top.bm25_rank == 1 and top.vector_rank is None
    assert top.score == pytest.approx(1 / (RRF_K + 1))
    assert retrieve(index, "ledger", k=0) == [] and retrieve(index, "?!", k=5) == []


def test_vectors_find_a_paraphrase_bm25_misses_and_the_fusion_keeps_both(
    index: KnowledgeIndex, models: tuple[GGUFEmbedder, GGUFEmbedder]
) -> None:
    embedder = models[0]
    embed_all(index, embedder)
    question = "Who fixed the beacon?"  # no word of it is in the passage ("repaired", "lamp")
    assert all(h.text != PASSAGES[0] for h in retrieve(index, question, k=5))
    hits = retrieve(index, question, k=5, embed=embedder)
    assert hits[0].text == PASSAGES[0] and hits[0].vector_rank == 1 and hits[0].bm25_rank is None
    both = retrieve(index, "Who fixed the violin beacon?", k=2, embed=embedder)
    assert {h.text for h in both} == {PASSAGES[0], PASSAGES[3]}
    assert any(h.bm25_rank == 1 for h in both)


def test_an_index_is_never_searched_with_another_models_vectors(
    index: KnowledgeIndex, models: tuple[GGUFEmbedder, GGUFEmbedder]
) -> None:
    one, other = models
    assert one.model_id != other.model_id  # (two generated files: names and bytes differ)
    embed_all(index, one)
    counted = Counted(other)
    hits = retrieve(index, "Who fixed the beacon? violin", k=5, embed=counted)
    assert counted.calls == 0 and hits and all(h.vector_rank is None for h in hits)
    assert [h.passage_id for h in hits] == [h.passage_id for h in retrieve(index, "Who fixed the beacon? violin", k=5)]
    same = Counted(one)
    assert retrieve(index, "Who fixed the beacon?", k=1, embed=same)[0].vector_rank == 1 and same.calls == 1


def test_the_matrix_is_loaded_once_and_again_when_the_index_changes(
    index: KnowledgeIndex, models: tuple[GGUFEmbedder, GGUFEmbedder]
) -> None:
    embedder = models[0]
    embed_all(index, embedder)
    retrieve(index, "Who fixed the beacon?", k=1, embed=embedder)
    first = MATRICES.get(index, embedder.model_id)
    assert first is not None and len(first.ids) == len(PASSAGES)
    assert MATRICES.get(index, embedder.model_id) is first  # unchanged index: the same matrix
    new_id = index.put_file(2, "/docs/later.txt", 10, 2, 0, [Chunk(0, 0, None, "Marta fixed the beacon again.")])
    embed_all(index, embedder)
    hits = retrieve(index, "Who fixed the beacon?", k=6, embed=embedder)
    assert len(hits) == 6 and any(h.file_path == "/docs/later.txt" and h.vector_rank is not None for h in hits)
    again = MATRICES.get(index, embedder.model_id)
    assert again is not first and again is not None and len(again.ids) == len(PASSAGES) + 1 and new_id > 0


def test_a_new_connection_per_answer_sees_the_indexers_writes(
    index: KnowledgeIndex, models: tuple[GGUFEmbedder, GGUFEmbedder], tmp_path: Path
) -> None:
    """The window opens the index once per answer while the indexer keeps its own connection: the cached
    matrix of the first answer's connection is not reused once the indexer has read a file again."""
    embedder = models[0]
    embed_all(index, embedder)  # (`index`: the indexer's connection, kept)
    first = KnowledgeIndex(index.path)
    before = retrieve(first, "Who fixed the beacon?", k=1, embed=embedder)
    first.close()
    assert before[0].text == PASSAGES[0]
    index.put_file(1, "/docs/notes.txt", 120, 2, 0, [Chunk(0, 0, None, "Marta fixed the beacon in May.")])
    embed_all(index, embedder)
    second = KnowledgeIndex(index.path)
    try:
        hits = retrieve(second, "Who fixed the beacon?", k=3, embed=embedder)
    finally:
        second.close()
    assert hits[0].text == "Marta fixed the beacon in May." and hits[0].vector_rank == 1


class DroppedWhileRanked:
    """A real index whose file is removed by the indexer's connection just after BM25 ranked its passages."""

    def __init__(self, index: KnowledgeIndex, indexer: KnowledgeIndex, path: str) -> None:
        self.index, self.indexer, self.dropped = index, indexer, path
        self.path = index.path

    def bm25(self, question: str, limit: int) -> list[tuple[int, float]]:
        found = self.index.bm25(question, limit)
        self.indexer.drop_file(self.dropped)
        return found

    def found_passages(self, passage_ids: Sequence[int]) -> dict[int, Passage]:
        return self.index.found_passages(passage_ids)

    def passage(self, passage_id: int) -> Passage:
        return self.index.passage(passage_id)

    def files(self) -> list[IndexedFile]:
        return self.index.files()

    def generation(self) -> int:
        return self.index.generation()

    def vectors_for(self, model_id: str) -> Vectors | None:
        return self.index.vectors_for(model_id)


def test_a_passage_sharing_only_a_common_word_with_the_question_is_not_given(tmp_path: Path) -> None:
    ix = KnowledgeIndex(tmp_path / "knowledge.sqlite3")
    try:
        topics = ["gardens", "rent", "travel", "recipes", "music", "weather", "books", "trains", "tools", "paint"]
        notes = [
            f"Note {n} on {topics[n % 10]}: " + ("many thanks to the team. " if n < 7 else "") + "See you next week."
            for n in range(30)
        ]
        ix.put_file(1, "/docs/notes.txt", 100, 1, 0, [Chunk(i, 0, None, t) for i, t in enumerate(notes)])
        page = "Orlov counted forty ships in the harbour of Velmar on the first morning."
        ix.put_file(1, "/docs/log.pdf", 100, 1, 1, [Chunk(0, 0, 1, page)])
        hits = retrieve(ix, "How many ships did Orlov count in Velmar?", 8)
        assert [h.text for h in hits] == [page]  # (not the seven notes for their "many")
        assert len(retrieve(ix, "many thanks", 8)) == 7  # (a question of common words gets its passages)
    finally:
        ix.close()


def test_a_passage_saying_the_word_is_given_beside_a_file_whose_name_holds_it(tmp_path: Path) -> None:
    """The title column (the file's name) weighs more than the text: a passage that says the question's
    word in its text still scores above the floor beside passages of a file named for it."""
    ix = KnowledgeIndex(tmp_path / "knowledge.sqlite3")
    try:
        filler = " ".join(f"word{i}" for i in range(60))
        budget = [Chunk(i, 0, None, f"Section {i}: travel, rent and food. {filler}") for i in range(6)]
        ix.put_file(1, "/docs/budget.md", 100, 1, 0, budget)
        minutes = f"The meeting agreed the budget for the new roof is 40,000 euros. {filler} {filler} {filler}"
        ix.put_file(1, "/docs/minutes.txt", 100, 2, 0, [Chunk(0, 0, None, minutes)])
        for n in range(30):
            ix.put_file(1, f"/docs/other{n}.txt", 100, 3 + n, 0, [Chunk(0, 0, None, f"Other note {n}. {filler}")])
        hits = retrieve(ix, "What is the budget?", 8)
        assert [h.file_path for h in hits] == ["/docs/budget.md"] * 6 + ["/docs/minutes.txt"]
    finally:
        ix.close()


def test_a_passage_gone_between_ranking_and_reading_is_left_out(index: KnowledgeIndex) -> None:
    reader = KnowledgeIndex(index.path)
    try:
        hits = retrieve(DroppedWhileRanked(reader, index, "/docs/notes.txt"), "ledger lighthouse invoices", k=5)
    finally:
        reader.close()
    assert [h.text for h in hits] == [PASSAGES[5]]


def test_a_passage_gone_while_the_active_view_ranks_is_left_out(index: KnowledgeIndex) -> None:
    index.put_file(2, "/paused/old.txt", 10, 1, 0, [Chunk(0, 0, None, "The old ledger lighthouse.")])
    reader = KnowledgeIndex(index.path)
    try:
        view = ActiveIndex(DroppedWhileRanked(reader, index, "/docs/notes.txt"), frozenset({1}))  # type: ignore[arg-type]
        hits = view.bm25("ledger lighthouse invoices", 5)
        assert [reader.passage(pid).text for pid, _ in hits] == [PASSAGES[5]]
    finally:
        reader.close()


def test_a_reranker_orders_the_fused_passages(index: KnowledgeIndex, tmp_path: Path) -> None:
    reranker = GGUFReranker(write_tiny_bert(tmp_path / "reranker.gguf", "rank"), threads=1)
    try:
        question = "ledger violin invoices tickets jam lighthouse"
        plain = retrieve(index, question, k=6)
        reranked = retrieve(index, question, k=6, rerank=reranker)
        scores = reranker(question, [h.text for h in plain])
    finally:
        reranker.close()
    assert {h.passage_id for h in reranked} == {h.passage_id for h in plain}
    expected = sorted(zip(scores, (h.passage_id for h in plain), strict=True), key=lambda item: -item[0])
    assert [h.passage_id for h in reranked] == [pid for _, pid in expected]
    assert [h.score for h in reranked] == pytest.approx([s for s, _ in expected], abs=1e-4)


def test_reciprocal_rank_fusion() -> None:
    fused = dict(fuse([[1, 2, 3], [3, 4]], k=60))
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61) and fused[1] == pytest.approx(1 / 61)
    assert [pid for pid, _ in fuse([[1, 2, 3], [3, 4]], k=60)] == [3, 1, 2, 4]  # (2 and 4 tie: 2 came first)
    weighted = dict(fuse([[1, 2, 3], [3, 4]], k=10, weights=(1.0, 0.3)))
    assert weighted[3] == pytest.approx(1 / 13 + 0.3 / 11) and weighted[4] == pytest.approx(0.3 / 12)
    assert [pid for pid, _ in fuse([[1, 2, 3], [3, 4]], k=10, weights=(1.0, 0.3))] == [3, 1, 2, 4]
    assert [pid for pid, _ in fuse([[1, 2], [2]], weights=(1.0, VECTOR_WEIGHT))] == [2, 1]  # (in both: lifted)
    with pytest.raises(ValueError, match="weights"):
        fuse([[1], [2]], weights=(1.0,))


def test_the_embedder_gives_unit_vectors_and_synonyms_meet(models: tuple[GGUFEmbedder, GGUFEmbedder]) -> None:
    embedder = models[0]
    vectors = embedder(["The lighthouse lamp, repaired.", "lighthouse beacon fixed", "plum jam", ""])
    assert vectors.dtype == np.float32 and vectors.shape == (4, embedder.dim)
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(1, abs=1e-5) and float(vectors[0] @ vectors[2]) < 0.5
    long = " ".join(["lighthouse"] * 2000)  # past the model's 512 tokens: cut, not refused
    assert float(embedder([long])[0] @ embedder(["lighthouse"])[0]) == pytest.approx(1, abs=1e-5)


def test_the_knowledge_block_numbers_the_passages_and_asks_for_citations(index: KnowledgeIndex) -> None:
    hits = retrieve(index, "violin ledger", k=2)
    block = knowledge_block(hits)
    assert block.splitlines()[-1] == CITE_INSTRUCTION
    assert f"[1] report.pdf, p. {hits[0].page}: {hits[0].text}" in block
    assert f"[2] report.pdf, p. {hits[1].page}: {hits[1].text}" in block
    assert knowledge_block([]) == ""
    listed = sources(hits)
    assert [s.n for s in listed] == [1, 2] and listed[0].passage_id == hits[0].passage_id
    assert ProjectSource.from_json(listed[1].as_json()) == listed[1]
    assert ProjectSource(1, "/a/notes.txt", None, 0, "x", 7).label() == "notes.txt"


def test_quoted_finds_the_passages_whose_words_an_answer_uses_beyond_the_question_s() -> None:
    keeper = ProjectSource(1, "/k/keeper.md", None, 0, "The lighthouse keeper's parrot is named Captain Marmalade.", 7)
    ferry = ProjectSource(2, "/k/island.md", None, 0, "The ferry to island 12 leaves the harbour at 1 o’clock.", 8)
    both = [keeper, ferry]
    question = "What is the name of the lighthouse keeper's parrot?"
    assert quoted("The lighthouse keeper’s parrot is named Captain Marmalade.", question, both) == {1}
    assert quoted("It is Captain Marmalade.", question, both) == {1}  # two of its own words in a row
    # only the question's words (in any form: "named" for "name") and small words: no passage is used
    assert quoted("The lighthouse keeper's parrot is named Polly.", question, both) == set()
    assert quoted("I do not know the name of the lighthouse keeper's parrot.", question, both) == set()
    assert quoted("Marmalade.", question, both) == set()  # (one word of its own: not enough to say)
    assert quoted("", question, both) == set() and quoted("Captain Marmalade", question, []) == set()
    assert quoted("The ferry leaves at 1 o'clock, from the harbour.", "When does the ferry go?", both) == {2}
    assert answer_uses("The ferry goes at one [1].", "When does the ferry go?", both) == {1}
    assert answer_uses("It leaves the harbour at 1 o'clock [1].", "When does the ferry go?", both) == {1, 2}
    # [n] markers inside a quote are not words
    assert quoted("The parrot is Captain [1] Marmalade [1].", question, both) == {1}


def test_quoted_is_not_fooled_by_turns_of_phrase_other_languages_or_shared_runs() -> None:
    def source(n: int, text: str) -> ProjectSource:
        return ProjectSource(n, f"/k/{n}.txt", None, 0, text, n)

    english = [
        source(1, "The Tagus is one of the most important rivers; on the other hand it is short of water."),
        source(2, "The Douro is one of the most beautiful valleys, and at the end of the day the port wins."),
        source(3, "The Minho, on the other hand, is green; it is important to note the rain."),
    ]
    phrases = "It is one of the most important, on the other hand; at the end of the day it is important to note."
    assert quoted(phrases, "Which river?", english) == set()  # (small words and turns of phrase only)
    # a run that two passages share says nothing of which one; one only the first has does
    shared = [source(1, "Salt cod soaked overnight, then baked."), source(2, "Salt cod soaked overnight is fried.")]
    assert quoted("Salt cod soaked overnight.", "What is cooked?", shared) == set()
    assert quoted("Salt cod soaked overnight, then baked.", "What is cooked?", shared) == {1}

    french = [source(1, "La Seine traverse Paris au bord de la question sociale."),
              source(2, "Le Rhône naît dans un glacier des Alpes suisses.")]  # fmt: skip
    assert quoted("C'est au bord de la route.", "Où coule le fleuve ?", french) == set()
    assert quoted("Il naît dans un glacier des Alpes.", "Où naît le Rhône ?", french) == {2}
    german = [source(1, "Die Donau und die Quelle im Schwarzwald."), source(2, "Der Rhein fließt nach Norden.")]
    assert quoted("Er fließt und die Stadt liegt dort.", "Wohin?", german) == set()
    assert quoted("Der Rhein fließt nach Norden.", "Wohin fließt der Rhein?", german) == {2}
    # CJK: no spaces between words; an exact quote is found, the question's characters alone are not
    chinese = [source(1, "长江是中国最长的河流，全长六千三百公里。"), source(2, "黄河流经九个省份，最后注入渤海。")]
    assert quoted("黄河最后注入渤海。", "黄河流向哪里？", chinese) == {2}
    assert quoted("黄河流向哪里", "黄河流向哪里？", chinese) == set()


def test_cited_reads_the_markers_an_answer_used() -> None:
    answer = "The lamp was repaired [1]. Backups run on Fridays [2, 3][3]; see also [12] and [0], not [1.5] or [x]."
    assert cited(answer) == {1, 2, 3, 12}
    assert cited(answer, count=3) == {1, 2, 3}
    assert cited("No sources here.") == set()
