"""POST /v1/rerank (and llama-server's /rerank, /v1/reranking) on Ember's server, and embedding-only
GGUFs served as models of their kind: a tiny bert reranker (gguf_factory.write_tiny_bert, rank pooling:
llama.cpp's classification head) whose scores must equal llama-cpp-python's own rank-pooled output for
the same query-document tokens (BOS query SEP document, as llama-server joins them); top_n, order,
documents as objects, the errors; a bert embedding model loaded through the pool, embedded with the
official openai client, and refusing a chat (a 400, not text from an encoder)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import llama_cpp
import numpy as np
import openai
import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.errors import JobCancelled
from ember_chat.engine.inference.llama.embeddings import Embedder
from ember_chat.engine.inference.llama.loader import plain_llama
from ember_chat.engine.inference.pool.pool import ModelPool
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import WAIT_S, assert_error
from tests.helpers.gguf_factory import write_tiny_bert

QUERY = "the cat"
DOCS = ["the cat sat on the mat", "a dog ran", "hello world", "the mat", "embed me"]
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("rerank")
    return {
        "reranker": write_tiny_bert(folder / "tiny-reranker.gguf", "rank", seed=3),
        "bert": write_tiny_bert(folder / "tiny-bert.gguf", "mean", seed=4),
        "tiny": tiny_model,
    }


@pytest.fixture(scope="module")
def server(files: dict[str, Path]) -> Iterator[ApiServer]:
    """serve --model the reranker; the bert and the tiny chat model loaded through the pool when named."""
    service = EngineService()
    refs = {name: LoadConfig(path, n_ctx=512, threads=1, parallel=1) for name, path in files.items()}
    pool = ModelPool(lambda: {n: r for n, r in refs.items() if n != "reranker"})
    load_blocking(service, refs["reranker"], "reranker")
    server = ApiServer(service, ServerConfig(port=0), pool=pool)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        pool.close()
        service.close()


@pytest.fixture
def http(server: ApiServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as c:
        yield c


@pytest.fixture(scope="module")
def reference(files: dict[str, Path]) -> Iterator[llama_cpp.Llama]:
    """llama-cpp-python's own reranker: rank pooling, the context and flash attention of Ember's load."""
    llm = plain_llama(
        files["reranker"], embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_RANK, n_ctx=512,
        n_threads=1, flash_attn=True, verbose=False,
    )  # fmt: skip
    yield llm
    llm.close()


def pair(reference: llama_cpp.Llama, query: str, doc: str) -> list[int]:
    """llama-server's rerank input for a BERT vocabulary (adds BOS and SEP, no EOS): [CLS] query [SEP] doc."""
    vocab = llama_cpp.llama_model_get_vocab(reference.model)
    assert llama_cpp.llama_vocab_get_add_sep(vocab) and not llama_cpp.llama_vocab_get_add_eos(vocab)
    words = [reference.tokenize(t.encode(), add_bos=False) for t in (query, doc)]
    return [reference.token_bos(), *words[0], llama_cpp.llama_vocab_sep(vocab), *words[1]]


def expected(reference: llama_cpp.Llama, query: str, docs: list[str]) -> list[float]:
    """Each pair's score as llama-cpp-python's embed decodes it (one sequence, every token an output,
    the pooled output read back), its first value: the classification head's score."""
    scores = []
    for doc in docs:
        reference._batch.reset()
        reference._batch.add_sequence(pair(reference, query, doc), 0, True)
        reference._ctx.kv_cache_clear()
        reference._ctx.decode(reference._batch)
        scores.append(llama_cpp.llama_get_embeddings_seq(reference._ctx.ctx, 0)[0])
    return scores


def test_kinds_from_the_header(files: dict[str, Path]) -> None:
    assert [inspect_gguf(files[n]).kind for n in ("reranker", "bert", "tiny")] == ["reranker", "embedding", "chat"]
    assert inspect_gguf(files["bert"]).summary()["kind"] == "embedding"


@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank", "/v1/reranking"])
def test_scores_equal_llama_cpp_pythons(http: httpx2.Client, reference: llama_cpp.Llama, path: str) -> None:
    res = http.post(path, json={"model": "reranker", "query": QUERY, "documents": DOCS})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["model"] == "reranker" and body["object"] == "list"
    want = expected(reference, QUERY, DOCS)
    assert len(set(want)) == len(DOCS)  # (distinct scores: the order below means something)
    results = body["results"]
    assert [r["index"] for r in results] == sorted(range(len(DOCS)), key=lambda i: -want[i])
    assert all(abs(r["relevance_score"] - want[r["index"]]) <= TOLERANCE for r in results)
    assert all("document" not in r for r in results)
    tokens = sum(len(pair(reference, QUERY, d)) for d in DOCS)
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


def test_top_n_documents_as_objects_and_returned(http: httpx2.Client, reference: llama_cpp.Llama) -> None:
    docs: list[object] = [{"text": d} if i % 2 else d for i, d in enumerate(DOCS)]
    res = http.post("/v1/rerank", json={"query": QUERY, "documents": docs, "top_n": 2, "return_documents": True})
    assert res.status_code == 200, res.text
    want = expected(reference, QUERY, DOCS)
    best = sorted(range(len(DOCS)), key=lambda i: -want[i])[:2]
    results = res.json()["results"]
    assert [r["index"] for r in results] == best
    assert [r["document"] for r in results] == [{"text": DOCS[i]} for i in best]
    everything = http.post("/v1/rerank", json={"query": QUERY, "documents": DOCS[:2], "top_n": 10})
    assert len(everything.json()["results"]) == 2


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"query": QUERY, "documents": DOCS, "truncate": True}, "truncate", "truncate"),
        ({"documents": DOCS}, "query", "string"),
        ({"query": QUERY}, "documents", "missing"),
        ({"query": QUERY, "documents": []}, "documents", "empty array"),
        ({"query": QUERY, "documents": ["a", 3]}, "documents", "documents[1]"),
        ({"query": QUERY, "documents": ["a", {"txt": "b"}]}, "documents", "documents[1]"),
        ({"query": QUERY, "documents": DOCS, "top_n": 0}, "top_n", "positive"),
        ({"query": QUERY, "documents": DOCS, "return_documents": "yes"}, "return_documents", "true or false"),
        ({"query": QUERY, "documents": ["a", "b", "the cat " * 300]}, "documents", "documents[2] is"),
        ({"query": QUERY, "documents": DOCS, "model": 3}, "model", "string"),
    ],
)
def test_bad_bodies(http: httpx2.Client, body: dict[str, object], param: str, says: str) -> None:
    assert says in assert_error(http.post("/v1/rerank", json=body), 400, param)


def test_a_bad_body_says_where_what_and_what_was_sent(http: httpx2.Client) -> None:
    """The body is typed (openai/typed_body.py): the document in error, what it must be, what it was."""
    message = assert_error(http.post("/v1/rerank", json={"query": QUERY, "documents": ["a", {"text": 3}]}), 400,
                           "documents")  # fmt: skip
    assert message == 'documents[1] must be a string or an object with a "text" string (not an object).'
    top_n = assert_error(http.post("/v1/rerank", json={"query": QUERY, "documents": DOCS, "top_n": True}), 400, "top_n")
    assert top_n == "top_n must be a positive whole number (not true)."
    # Cohere's documents carry more than their text: the rest is not read
    ok = http.post("/v1/rerank", json={"query": QUERY, "documents": [{"text": "the mat", "id": "d1"}]})
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("model", ["bert", "tiny"])
def test_a_model_that_is_not_a_reranker_is_a_400_naming_it(http: httpx2.Client, model: str) -> None:
    message = assert_error(http.post("/v1/rerank", json={"model": model, "query": QUERY, "documents": DOCS}), 400,
                           "model")  # fmt: skip
    assert f"{model} is not a reranker" in message


def test_an_embedding_model_through_the_pool(server: ApiServer, http: httpx2.Client, files: dict[str, Path]) -> None:
    """The bert, named in a request, is loaded by the pool: the openai client's vectors equal
    llama-cpp-python's; a chat, completion, response or message to it (or to the reranker), or counting a
    message's tokens, is a 400
    saying what it is, and /v1/embeddings on the reranker a 400."""
    texts = ["hello world", "the cat sat on the mat"]
    with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as client:
        res = client.embeddings.create(model="bert", input=texts, encoding_format="float")
        reference = plain_llama(files["bert"], embedding=True, n_ctx=512, n_threads=1, flash_attn=True,
                                verbose=False)  # fmt: skip
        try:
            want = np.array(reference.embed(texts, normalize=True))
        finally:
            reference.close()
        assert np.abs(np.array([d.embedding for d in res.data]) - want).max() <= TOLERANCE
        with pytest.raises(
            openai.BadRequestError, match="bert is an embedding model: it has no chat; use /v1/embeddings"
        ):
            client.chat.completions.create(model="bert", messages=[{"role": "user", "content": "hi"}])
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    for path, body in [("/v1/completions", {"prompt": "hi"}), ("/v1/responses", {"input": "hi"})]:
        assert "has no chat" in assert_error(http.post(path, json={**body, "model": "bert"}), 400, "model")
    anthropic = http.post("/v1/messages", json={**chat, "max_tokens": 4, "model": "bert"})  # (Anthropic's shape)
    assert anthropic.status_code == 400 and "bert is an embedding model" in anthropic.json()["error"]["message"]
    counted = http.post("/v1/messages/count_tokens", json={**chat, "model": "bert"})  # (it has no messages)
    assert counted.status_code == 400 and "bert is an embedding model" in counted.json()["error"]["message"]
    message = assert_error(http.post("/v1/chat/completions", json={**chat, "model": "reranker"}), 400, "model")
    assert "reranker is a reranker: it has no chat; use /v1/rerank" in message
    assert "reranker" in assert_error(http.post("/v1/embeddings", json={"input": "hi", "model": "reranker"}), 400,
                                      "model")  # fmt: skip


def test_scoring_stops_between_decodes(files: dict[str, Path], reference: llama_cpp.Llama) -> None:
    """A rerank of many documents, its job cancelled, stops between two decodes; not cancelled, each
    pair's score is llama-cpp-python's whether scored with others or alone."""
    llm = plain_llama(files["reranker"], n_ctx=512, n_threads=1, flash_attn=True, verbose=False)
    embedder = Embedder(llm, 512, 1, 1)
    try:
        pairs = [pair(reference, QUERY, d) for d in DOCS]
        want = expected(reference, QUERY, DOCS)
        assert np.abs(np.array(embedder.score(pairs)) - want).max() <= TOLERANCE
        assert abs(embedder.score(pairs[3:4])[0] - want[3]) <= TOLERANCE
        decodes = []
        with pytest.raises(JobCancelled):
            embedder.score([pairs[0]] * 1000, lambda: decodes.append(1) or len(decodes) > 1)
        assert len(decodes) == 2
    finally:
        embedder.close()
        llm.close()
