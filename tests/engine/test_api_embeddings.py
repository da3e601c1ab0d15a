"""OpenAI's /v1/embeddings on Ember's server: the official `openai` client against a real server on
127.0.0.1 over the tiny chat model (no pooling of its own: mean), whose vectors must equal
llama-cpp-python's own `Llama(embedding=True).embed(normalize=True)` on the same file with the same
pooling and attention; token-id inputs, several inputs per request, base64, the errors; and the tiny
`bert` embedding model (gguf_factory.write_tiny_bert: mean and cls pooling from its metadata) through
Ember's embeddings context against llama-cpp-python's."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import llama_cpp
import numpy as np
import openai
import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.errors import JobCancelled, QueueFull
from ember_chat.engine.inference.llama.embeddings import Embedder
from ember_chat.engine.inference.llama.loader import plain_llama
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import WAIT_S, Watcher, assert_error, in_front_of_remote
from tests.helpers.gguf_factory import write_tiny_bert
from tests.helpers.sse_server import FakeOpenAI

TEXTS = ["hello world", "the cat sat on the mat", "a", "Ember embeds café and 日本語"]
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def reference(tiny_model: Path) -> Iterator[llama_cpp.Llama]:
    """llama-cpp-python's own embeddings of the tiny chat model: mean pooling (the model has none), the
    same context and flash attention as Ember's load (its default)."""
    llm = plain_llama(
        tiny_model, embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN, n_ctx=512, n_threads=1,
        flash_attn=True, verbose=False,
    )  # fmt: skip
    yield llm
    llm.close()


def _expected(reference: llama_cpp.Llama, texts: list[str]) -> np.ndarray:
    return np.array(reference.embed(texts, normalize=True))


def _close(got: object, want: np.ndarray) -> None:
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= TOLERANCE


def test_vectors_equal_llama_cpp_pythons(client: openai.OpenAI, reference: llama_cpp.Llama) -> None:
    res = client.embeddings.create(model="tiny", input=TEXTS, encoding_format="float")
    assert res.object == "list" and res.model == "tiny"
    assert [d.index for d in res.data] == [0, 1, 2, 3] and all(d.object == "embedding" for d in res.data)
    _close([d.embedding for d in res.data], _expected(reference, TEXTS))
    assert all(abs(np.linalg.norm(d.embedding) - 1.0) < 1e-6 for d in res.data)
    tokens = sum(len(reference.tokenize(t.encode(), add_bos=True)) for t in TEXTS)
    assert res.usage.prompt_tokens == res.usage.total_tokens == tokens


def test_one_string(client: openai.OpenAI, reference: llama_cpp.Llama) -> None:
    res = client.embeddings.create(model="tiny", input="the cat sat on the mat", encoding_format="float")
    assert len(res.data) == 1
    _close([res.data[0].embedding], _expected(reference, ["the cat sat on the mat"]))


def test_base64(client: openai.OpenAI, http: httpx2.Client, reference: llama_cpp.Llama) -> None:
    """The openai client asks for base64 when no format is given and decodes it itself; asked for
    explicitly, it is little-endian float32."""
    want = _expected(reference, TEXTS[:2])
    _close([d.embedding for d in client.embeddings.create(model="tiny", input=TEXTS[:2]).data], want)
    res = client.embeddings.create(model="tiny", input=TEXTS[:2], encoding_format="base64")
    assert all(isinstance(d.embedding, str) for d in res.data)
    _close([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in res.data], want)  # type: ignore[arg-type]
    raw = http.post("/v1/embeddings", json={"input": TEXTS[0], "encoding_format": "base64"})
    assert raw.status_code == 200, raw.text
    assert len(base64.b64decode(raw.json()["data"][0]["embedding"])) == 4 * want.shape[1]


def test_token_ids_equal_the_text(client: openai.OpenAI, reference: llama_cpp.Llama) -> None:
    ids = [reference.tokenize(t.encode(), add_bos=True) for t in TEXTS[:2]]
    want = _expected(reference, TEXTS[:2])
    one = client.embeddings.create(model="tiny", input=ids[0], encoding_format="float")
    _close([one.data[0].embedding], want[:1])
    assert one.usage.prompt_tokens == len(ids[0])
    both = client.embeddings.create(model="tiny", input=ids, encoding_format="float")
    _close([d.embedding for d in both.data], want)


def test_dimensions_and_user(client: openai.OpenAI, http: httpx2.Client) -> None:
    """`dimensions` equal to the model's is accepted, another a 400 (no shortening); `user` is ignored."""
    res = client.embeddings.create(model="tiny", input="hello", dimensions=64, user="someone")
    assert len(res.data[0].embedding) == 64
    message = assert_error(http.post("/v1/embeddings", json={"input": "hello", "dimensions": 32}), 400, "dimensions")
    assert "64" in message


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"input": "hello", "truncate": True}, "truncate", "truncate"),
        ({"input": ""}, "input", "input[0] is empty"),
        ({"input": []}, "input", "empty array"),
        ({"input": [[]]}, "input", "input[0] is empty"),
        ({"input": ["hello", ""]}, "input", "input[1] is empty"),
        ({}, "input", "missing"),
        ({"input": 3}, "input", "int"),
        ({"input": ["hello", 3]}, "input", "input[1]"),
        ({"input": [[1, 2], "x", [True]]}, "input", "input[2]"),
        ({"input": [1, 2, 10**9]}, "input", "outside the model's vocabulary"),
        ({"input": ["hello", "a", "hello " * 600]}, "input", "input[2] is"),
        ({"input": "hello", "encoding_format": "int8"}, "encoding_format", "int8"),
        ({"input": "hello", "dimensions": 0}, "dimensions", "positive"),
        ({"input": "hello", "model": 3}, "model", "string"),
    ],
)
def test_bad_bodies(http: httpx2.Client, body: dict[str, object], param: str, says: str) -> None:
    assert says in assert_error(http.post("/v1/embeddings", json=body), 400, param)


def test_a_bad_body_says_where_what_and_what_was_sent(http: httpx2.Client) -> None:
    """The body is typed (openai/typed_body.py): the input in error, what it must be, what it was."""
    message = assert_error(http.post("/v1/embeddings", json={"input": ["a", {"text": "b"}]}), 400, "input")
    assert message == "input[1] must be a string or an array of token ids (not an object)."
    message = assert_error(http.post("/v1/embeddings", json={"input": "a", "dimensions": 1.5}), 400, "dimensions")
    assert message == "dimensions must be a positive whole number (not the number 1.5)."


def test_an_unknown_model_is_a_404(http: httpx2.Client) -> None:
    assert_error(http.post("/v1/embeddings", json={"input": "hello", "model": "nope"}), 404, "model")


def test_embedding_leaves_the_generation_alone(client: openai.OpenAI, tiny_service: EngineService) -> None:
    """The embedding runs on the engine thread (an api job in the queue) in a context of its own: a
    completion before and after it answers alike, its prompt still cached."""
    watcher = Watcher()
    tiny_service.add_listener(watcher)
    try:
        kwargs = {"model": "tiny", "prompt": "hello world", "max_tokens": 6, "temperature": 0.0}
        before = client.completions.create(**kwargs)  # type: ignore[call-overload]
        client.embeddings.create(model="tiny", input=["hello world"] * 5)
        watcher.wait_for(
            lambda: any(r.client == "api" and r.label == "Embeddings" for s in watcher.states for r in s.running_all),
            "the embedding's job in the queue",
        )
        after = client.completions.create(**kwargs)  # type: ignore[call-overload]
    finally:
        tiny_service.remove_listener(watcher)
    assert after.choices[0].text == before.choices[0].text


def test_a_remote_models_embeddings_come_from_its_server(tiny_server: ApiServer, reference: llama_cpp.Llama) -> None:
    """Ember in front of another OpenAI-compatible server (here an Ember serving the tiny model) forwards
    the inputs, texts and token ids, to its /embeddings and answers its vectors and usage."""
    ids = reference.tokenize(TEXTS[1].encode(), add_bos=True)
    with in_front_of_remote(tiny_server.url, "tiny") as raw:
        r = raw.post("/v1/embeddings", json={"input": [TEXTS[0], ids], "model": "tiny"})
        assert r.status_code == 200, r.text
        body = r.json()
    assert body["model"] == "tiny" and [d["index"] for d in body["data"]] == [0, 1]
    _close([d["embedding"] for d in body["data"]], _expected(reference, TEXTS[:2]))
    assert body["usage"]["prompt_tokens"] == len(reference.tokenize(TEXTS[0].encode(), add_bos=True)) + len(ids)


def test_a_remote_server_without_embeddings_is_a_400(server: FakeOpenAI) -> None:
    with in_front_of_remote(server.base_url) as raw:
        message = assert_error(raw.post("/v1/embeddings", json={"input": "hello", "model": "test-model"}), 400, "model")
        assert "not found" in message
    [sent] = server.received("/v1/embeddings")
    assert sent.body == {"model": "test-model", "input": ["hello"], "encoding_format": "float"}


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_a_bert_model_embeds_as_llama_cpp_python(tmp_path: Path, pooling: str) -> None:
    """A tiny bert (non-causal, its pooling in its metadata) in Ember's embeddings context, several
    inputs per decode, equals llama-cpp-python's embed on the same file."""
    path = write_tiny_bert(tmp_path / f"bert-{pooling}.gguf", pooling)
    texts = ["hello world", "the cat sat on the mat", "a dog ran", "embed me"]
    reference = plain_llama(path, embedding=True, n_ctx=512, n_threads=1, flash_attn=True, verbose=False)
    llm = plain_llama(path, n_ctx=512, n_threads=1, flash_attn=True, verbose=False)  # (a generation's Llama)
    embedder = Embedder(llm, 512, 1, 1)
    try:
        want = np.array(reference.embed(texts, normalize=True))
        tokens = [llm.tokenize(t.encode(), add_bos=True) for t in texts]
        assert tokens[0][0] == 2 and tokens[0][-1] == 3  # [CLS] … [SEP]
        assert (
            embedder.pooling
            == {"mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN, "cls": llama_cpp.LLAMA_POOLING_TYPE_CLS}[pooling]
        )
        _close(embedder.embed(tokens), want)
        _close(embedder.embed(tokens[2:3]), want[2:3])  # (alone as in a batch)
    finally:
        embedder.close()
        llm.close()
        reference.close()


def test_waiting_embeddings_are_bounded_and_cancelled_at_close() -> None:
    """Embeddings wait on the engine's queue like generations: past `queue_limit` an API embedding is
    QueueFull (a 429), and one still waiting when the engine closes ends with JobCancelled (a 503), never
    hanging its connection."""
    service = EngineService(queue_limit=1)
    started, release = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    def hold() -> None:
        started.set()
        release.wait(WAIT_S)

    def embed() -> None:
        try:
            service.embed(["hello"])
        except BaseException as exc:
            outcome.append(exc)

    try:
        service.run_exclusive(hold, "hold")
        assert started.wait(WAIT_S)
        waiter = threading.Thread(target=embed)
        waiter.start()
        deadline = time.monotonic() + WAIT_S
        while not service._jobs and time.monotonic() < deadline:  # (the embedding waits behind `hold`)
            time.sleep(0.01)
        with pytest.raises(QueueFull):
            service.embed(["hello"])
        closing = threading.Thread(target=service.close)  # (drops the waiting job, then waits for `hold`)
        closing.start()
        waiter.join(WAIT_S)
        assert not waiter.is_alive()
    finally:
        release.set()
        service.close()
    assert len(outcome) == 1 and isinstance(outcome[0], JobCancelled)


def test_a_long_embedding_request_stops_between_decodes(tmp_path: Path) -> None:
    """Thousands of inputs are many decodes: one stopped (its engine closing) ends after the decode under
    way, not after the last."""
    path = write_tiny_bert(tmp_path / "bert.gguf", "mean")
    llm = plain_llama(path, n_ctx=512, n_threads=1, verbose=False)
    embedder = Embedder(llm, 512, 1, 1)
    decodes: list[int] = []
    real = embedder._decode

    def counted(group: list[list[int]]) -> list[list[float]]:
        decodes.append(len(group))
        return real(group)

    embedder._decode = counted  # type: ignore[method-assign]
    try:
        tokens = [llm.tokenize(b"a dog ran", add_bos=True)] * 300  # (64 a decode: 5 decodes)
        assert len(embedder.embed(tokens)) == 300 and len(decodes) == 5
        decodes.clear()
        with pytest.raises(JobCancelled):
            embedder.embed(tokens, stopped=lambda: len(decodes) >= 2)
        assert len(decodes) == 2
    finally:
        embedder.close()
        llm.close()


def test_an_embedding_model_is_loaded_with_no_more_context_than_it_was_trained_on(tmp_path: Path) -> None:
    """The window's and the pool's load settings ask 4,096 tokens; a bert trained on 512 gets 512 (more only
    cost memory, and llama.cpp warned n_ctx_seq > n_ctx_train)."""
    path = write_tiny_bert(tmp_path / "bert.gguf", "mean", context=512)
    service = EngineService()
    try:
        load_blocking(service, LoadConfig(path, n_ctx=4096, threads=1), "bert")
        assert service.model is not None and service.model.n_ctx == 512
    finally:
        service.close()
