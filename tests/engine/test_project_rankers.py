"""A project's embedding model and reranker in its answers through Ember's API server (the real `openai`
client, a real server on 127.0.0.1 with a tiny model, generated GGUF embedding and reranker models in the
data folder's models folder, knowledge indexed from real files): the passages are found by meaning too,
and reordered by the reranker, said in `ember.knowledge.ranked_by`; the models are loaded once per
project and kept until the server stops; a model file gone or damaged, or an index whose vectors another
model made, answers by the passages' words and says why in `ember.knowledge.problems`, never a 500.
And the passages of a paused source, or of a source removed from the project whose rows are still in
the index, are never retrieved, by words or by vectors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.projects.embedder import GGUFEmbedder
from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
from ember_chat.engine.projects.indexer import Indexer
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.projects.retrieval import MATRICES
from ember_chat.engine.projects.turn import ProjectKnowledge
from ember_chat.engine.serve.projects_option import ServedProjects
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.api_client import served_client
from tests.helpers.gguf_factory import write_tiny_bert, write_word_bert

WAIT_S = 30.0
PASSAGES = {
    "lamp.txt": "The harbour master repaired the lighthouse lamp after the winter storms.",
    "jam.txt": "Our recipe for plum jam needs sugar, lemons and a slow simmer.",
    "invoices.txt": "Invoices are paid within thirty days of the delivery date.",
    "violin.txt": "The violin was tuned by Marta before the evening concert.",
    "tickets.txt": "Train tickets to the coast cost less when bought a week ahead.",
    "ledger.txt": "Backups of the ledger are copied to the cellar drive every Friday.",
}
MEANINGS = {w: w for text in PASSAGES.values() for w in text.lower().replace(".", "").replace(",", "").split()}
MEANINGS |= {"fixed": "repaired", "beacon": "lamp", "who": "", "the": "", "after": "", "a": "", "of": ""}
PARAPHRASE = "Who fixed the beacon?"  # no word of it in lamp.txt ("repaired", "lamp"): found by meaning only


def _folder(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _project(
    paths: AppPaths, projects: ProjectStore, name: str, docs: Path, embed_with: Path | None, **models: str
) -> None:
    """A project of `docs`, indexed (its passages embedded by `embed_with`), naming `models`."""
    made = projects.create(name)
    projects.add_source(made.folder_id, docs)
    projects.update(made.folder_id, **models)
    index = KnowledgeIndex(knowledge_path(paths, made.folder_id))
    embedder = GGUFEmbedder(embed_with, threads=1) if embed_with is not None else None
    try:
        run = Indexer(index, list(projects.project(made.folder_id).sources), embedder=embedder).run()
        assert run.read == len(PASSAGES) and run.embedding_problem is None
    finally:
        index.close()
        if embedder is not None:
            embedder.close()


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppPaths]:
    """Projects whose models are: Meaning (an embedding model and a reranker), Gone (an embedding model
    not there), Damaged (a file that is no GGUF), Other (vectors made by another embedding model)."""
    base = tmp_path_factory.mktemp("ember")
    paths = AppPaths(base / "data", base / "config")
    models = paths.default_models_dir
    models.mkdir(parents=True)
    words = write_word_bert(models / "words.gguf", MEANINGS)
    other = write_word_bert(models / "other-words.gguf", MEANINGS, seed=1)
    write_tiny_bert(models / "reranker.gguf", "rank")
    (models / "damaged.gguf").write_bytes(b"GGUF" + b"\x00" * 64)
    docs = _folder(base / "docs", PASSAGES)
    chats = ConversationStore(paths.database)
    try:
        projects = ProjectStore(chats)
        _project(paths, projects, "Meaning", docs, words, embedding_model="words.gguf", reranker="reranker.gguf")
        _project(paths, projects, "Gone", docs, None, embedding_model="missing.gguf")
        _project(paths, projects, "Damaged", docs, None, embedding_model="damaged.gguf", reranker="damaged.gguf")
        _project(paths, projects, "Other", docs, other, embedding_model="words.gguf")
    finally:
        chats.close()
    yield paths
    MATRICES.clear()


@pytest.fixture(scope="module")
def served(paths: AppPaths) -> Iterator[ServedProjects]:
    projects = ServedProjects(paths)
    yield projects
    projects.close()


@pytest.fixture(scope="module")
def client(served: ServedProjects, tiny_model: Path) -> Iterator[openai.OpenAI]:
    with served_client(LoadConfig(tiny_model, n_ctx=4096, threads=1), "tiny", WAIT_S, projects=served) as c:
        yield c


def _ember(client: openai.OpenAI, project: str, question: str = PARAPHRASE) -> dict[str, Any]:
    response = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": question}],
        max_tokens=2,
        temperature=0,
        extra_body={"ember": {"project": project}},
    )  # type: ignore[call-overload]
    ember: dict[str, Any] = response.model_extra["ember"]
    return ember


def test_a_projects_embedding_model_and_reranker_rank_its_passages(
    client: openai.OpenAI, served: ServedProjects, paths: AppPaths
) -> None:
    ember = _ember(client, "Meaning")
    assert ember["knowledge"]["ranked_by"] == ["bm25", "vectors", "reranker"]
    assert ember["knowledge"]["problems"] == []
    assert any(s["file"].endswith("lamp.txt") for s in ember["sources"])  # (by meaning: no word in common)
    first, second = served.open("Meaning"), served.open("Meaning")
    try:  # loaded once for the project, kept across requests
        assert first.embed is not None and first.embed is second.embed and first.rerank is second.rerank
    finally:
        first.close()
        second.close()
    assert first.embed.model_id.startswith("words.gguf:")
    assert _ember(client, "Meaning")["knowledge"]["ranked_by"] == ["bm25", "vectors", "reranker"]


def test_by_words_alone_without_vectors_the_paraphrase_is_not_found(client: openai.OpenAI) -> None:
    ember = _ember(client, "Gone")
    assert not any(s["file"].endswith("lamp.txt") for s in ember["sources"])


def test_a_model_file_gone_or_damaged_answers_by_words_and_says_why(client: openai.OpenAI) -> None:
    gone = _ember(client, "Gone", "When are the ledger backups copied?")
    assert gone["knowledge"]["ranked_by"] == ["bm25"] and gone["sources"][0]["file"].endswith("ledger.txt")
    (problem,) = gone["knowledge"]["problems"]
    assert "embedding model missing.gguf is not there" in problem and "found by their words alone" in problem
    damaged = _ember(client, "Damaged", "When are the ledger backups copied?")
    assert damaged["knowledge"]["ranked_by"] == ["bm25"] and damaged["sources"][0]["file"].endswith("ledger.txt")
    embedding, reranker = damaged["knowledge"]["problems"]
    assert "embedding model damaged.gguf could not be loaded" in embedding
    assert "reranker damaged.gguf could not be loaded" in reranker


def test_an_index_made_with_another_embedding_model_is_searched_by_words_only(client: openai.OpenAI) -> None:
    ember = _ember(client, "Other")
    assert ember["knowledge"]["ranked_by"] == ["bm25"]
    (problem,) = ember["knowledge"]["problems"]
    assert "holds the vectors of another model (other-words.gguf:" in problem and "not of words.gguf" in problem
    assert not any(s["file"].endswith("lamp.txt") for s in ember["sources"])


def test_the_kept_models_are_closed_with_the_server(paths: AppPaths) -> None:
    projects = ServedProjects(paths)
    knowledge = projects.open("Meaning")
    knowledge.close()
    embed = knowledge.embed
    assert isinstance(embed, GGUFEmbedder) and embed([PARAPHRASE]).shape[0] == 1
    projects.close()
    with pytest.raises(InvalidParameter, match="was closed"):
        embed([PARAPHRASE])


def _fit(knowledge: ProjectKnowledge, question: str) -> list[str]:
    return [Path(s.file_path).name for s in knowledge.fit(question, 100_000, len).sources]


def test_a_paused_or_removed_sources_passages_are_never_retrieved(tmp_path: Path) -> None:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    kept = _folder(tmp_path / "kept", {"harbour.txt": PASSAGES["lamp.txt"]})  # (no "lamp" in its name)
    # more passages about lamps than BM25's first candidates: the view looks further for the active ones
    crowd = _folder(tmp_path / "crowd", {f"lamp{i:02}.txt": "Lamp lamp lighthouse lamp." for i in range(80)})
    embedder = GGUFEmbedder(write_word_bert(tmp_path / "words.gguf", MEANINGS), threads=1)
    chats = ConversationStore(paths.database)
    try:
        projects = ProjectStore(chats)
        made = projects.create("Lights")
        kept_source = projects.add_source(made.folder_id, kept)
        crowd_source = projects.add_source(made.folder_id, crowd)
        index = KnowledgeIndex(knowledge_path(paths, made.folder_id))
        try:
            run = Indexer(index, list(projects.project(made.folder_id).sources), embedder=embedder).run()
            assert run.read == 81 and run.embedding_problem is None
            # (by words, the crowd outranks it: the paused view below must look past BM25's first matches)
            both = ProjectKnowledge(projects.project(made.folder_id), index, owns_index=False)
            assert "harbour.txt" not in _fit(both, "lamp")[:8] and len(_fit(both, "lamp")) == 8

            projects.set_paused(crowd_source.id, True)
            paused = ProjectKnowledge(projects.project(made.folder_id), index, owns_index=False)
            assert _fit(paused, "lighthouse lamp") == ["harbour.txt"]  # (by words: the crowd left out)
            by_meaning = ProjectKnowledge(projects.project(made.folder_id), index, embedder, owns_index=False)
            assert _fit(by_meaning, PARAPHRASE) == ["harbour.txt"]  # (by vectors too)
            assert by_meaning.fit(PARAPHRASE, 100_000, len).ranked_by == ("bm25", "vectors")

            projects.set_paused(crowd_source.id, False)
            projects.remove_source(kept_source.id)  # (its rows stay in the index until the next run)
            assert index.files(kept_source.id)
            removed = ProjectKnowledge(projects.project(made.folder_id), index, embedder, owns_index=False)
            assert "harbour.txt" not in _fit(removed, PARAPHRASE) + _fit(removed, "repaired lighthouse lamp")
        finally:
            index.close()
    finally:
        chats.close()
        embedder.close()
        MATRICES.clear()
