"""Every route of Ember's API, over HTTP, against `ember-chat serve` started by the installed launcher as a
user starts it: the official `openai` client for the OpenAI routes, the official `anthropic` client for the
Messages API, plain HTTP for llama-server's `/health`, `/tokenize` and `/detokenize`. A route added to the
server without a journey here fails `test_every_route_has_a_journey`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from ember_chat.engine.speech.wer import word_error_rate
from tests.helpers.gguf_factory import Script, TinySpec, write_tiny_bert, write_tiny_model
from tests.helpers.peer_servers import ember_server
from tests.helpers.prometheus_text import parse, value
from tests.helpers.speech import SENTENCES, speak

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "engine" / "ember_chat" / "engine" / "serve" / "server.py"
JOURNEYS = {
    ("GET", "/health"), ("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
    ("POST", "/tokenize"), ("POST", "/detokenize"), ("POST", "/infill"), ("POST", "/v1/responses"),
    ("GET", "/metrics"), ("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens"), ("POST", "/v1/embeddings"),
    ("POST", "/v1/rerank"), ("POST", "/rerank"), ("POST", "/v1/reranking"),  # a reranker's: below
    ("POST", "/v1/audio/transcriptions"),  # the shipped Whisper model's: below
    # the model pool's REST: tests/journeys/test_api_models.py
    ("GET", "/api/models"), ("POST", "/api/models/load"), ("POST", "/api/models/unload"),
}  # fmt: skip

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_url(tiny_model: Path) -> Iterator[str]:
    with ember_server(tiny_model, threads=1, n_ctx=512) as url:
        yield url


def test_every_route_has_a_journey() -> None:
    routes = set(re.findall(r'\("(GET|POST)", "(/[^"]*)"\):', SERVER.read_text(encoding="utf-8")))
    assert routes == JOURNEYS


def test_the_openai_routes_with_the_official_client(base_url: str) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    try:
        model = client.models.list().data[0].id  # (the server's own model: listed first)
        chat = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0
        )
        assert chat.choices[0].finish_reason in {"stop", "length"} and chat.usage is not None
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0, stream=True
        )
        streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert streamed == chat.choices[0].message.content  # greedy: the same answer both ways
        text = client.completions.create(model=model, prompt="Once upon", max_tokens=4, temperature=0)
        assert text.choices[0].finish_reason in {"stop", "length"}
    finally:
        client.close()


def test_the_official_client_transcribes_speech(base_url: str, tmp_path: Path) -> None:
    """/v1/audio/transcriptions with the official client: espeak-ng's speech of known sentences, written
    back as text by the shipped Whisper model (loaded at the first upload), plain and as verbose JSON."""
    text = " ".join(SENTENCES[:2])
    speech = speak(text, tmp_path / "speech.wav")
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)
    try:
        with speech.open("rb") as f:
            plain = client.audio.transcriptions.create(model="whisper-1", file=f)
        assert word_error_rate(text, plain.text) <= 0.15, plain.text  # the bound tests/engine/test_speech.py measured
        with speech.open("rb") as f:
            verbose = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="verbose_json")
        assert verbose.text.strip() == plain.text.strip() and verbose.language == "en" and verbose.segments
    finally:
        client.close()


def test_the_llama_server_routes_over_http(base_url: str) -> None:
    root = base_url.removesuffix("/v1")
    with httpx2.Client(base_url=root, timeout=60) as http:
        assert http.get("/health").json()["status"] == "ok"
        tokens = http.post("/tokenize", json={"content": "hello world"}).json()["tokens"]
        assert tokens and all(isinstance(t, int) for t in tokens)
        assert http.post("/detokenize", json={"tokens": tokens}).json()["content"].strip() == "hello world"
        assert http.post("/health").status_code == 405 and http.get("/nowhere").status_code == 404


def test_fill_in_the_middle_with_the_official_client_and_llama_servers_infill(
    base_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """/v1/completions with `suffix` and /infill on a model with fill-in-the-middle tokens (a tiny one that
    writes " hello world" only after <fim_middle>), and a clear 400 from the model without them."""
    script = Script(start=("</s>",), after={"<fim_middle>": ("▁hello",), "▁hello": ("▁world",), "▁world": ("</s>",)})
    fim_model = write_tiny_model(
        tmp_path_factory.mktemp("fim") / "tiny-fim.gguf", TinySpec(script=script, fim_tokens=True)
    )
    with ember_server(fim_model, threads=1, n_ctx=512) as fim_url:
        client = openai.OpenAI(base_url=fim_url, api_key="unused", max_retries=0)
        try:
            text = client.completions.create(
                model="tiny-fim.gguf", prompt="def f(x):", suffix="    return x", max_tokens=8, temperature=0
            )
            assert text.choices[0].text == " hello world"
        finally:
            client.close()
        with httpx2.Client(base_url=fim_url.removesuffix("/v1"), timeout=60) as http:
            r = http.post("/infill", json={"input_prefix": "def f(x):", "input_suffix": "    return x", "n_predict": 8})
            assert r.status_code == 200 and r.json()["content"] == " hello world"
    with httpx2.Client(base_url=base_url.removesuffix("/v1"), timeout=60) as http:
        r = http.post("/infill", json={"input_prefix": "a", "input_suffix": "b"})
        assert r.status_code == 400 and "fill-in-the-middle tokens" in r.json()["error"]["message"]


def test_the_responses_api_with_the_official_client(base_url: str) -> None:
    """/v1/responses (and GET, DELETE /v1/responses/{id}): a Response, its typed event stream, a second
    turn by previous_response_id, retrieve and delete."""
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    try:
        model = client.models.list().data[0].id  # (the server's own model: listed first)
        first = client.responses.create(model=model, input="hi", max_output_tokens=4, temperature=0)
        assert first.status in {"completed", "incomplete"} and first.usage is not None
        events = list(client.responses.create(model=model, input="hi", max_output_tokens=4, temperature=0, stream=True))
        assert events[0].type == "response.created" and events[-1].type == f"response.{first.status}"
        streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert streamed == first.output_text  # greedy: the same answer both ways
        second = client.responses.create(model=model, input="again", previous_response_id=first.id, max_output_tokens=4)
        assert second.usage is not None and second.usage.input_tokens > first.usage.input_tokens
        assert client.responses.retrieve(second.id).output_text == second.output_text
        client.responses.delete(second.id)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(second.id)
    finally:
        client.close()


def test_prometheus_metrics_count_what_the_client_was_answered(base_url: str) -> None:
    """GET /metrics after a chat through the official client: the text format a scraper reads (strictly
    parsed), the chat counted by route and status, its tokens as its usage said, its time to first token."""
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    try:
        model = client.models.list().data[0].id  # (the server's own model: listed first)
        before = parse(httpx2.get(base_url.removesuffix("/v1") + "/metrics").text)
        chat = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0
        )
        assert chat.usage is not None
    finally:
        client.close()
    r = httpx2.get(base_url.removesuffix("/v1") + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    after = parse(r.text)

    def grew(sample: str, **labels: str) -> float:
        return value(after, sample, model=model, **labels) - value(before, sample, model=model, **labels)

    assert grew("ember_http_requests_total", route="/v1/chat/completions", method="POST", code="200") == 1
    assert grew("ember_output_tokens_total") == chat.usage.completion_tokens
    assert grew("ember_prompt_tokens_total") == chat.usage.prompt_tokens
    assert grew("ember_time_to_first_token_seconds_count") == 1
    assert value(after, "ember_model_loads_total", model=model) == 1  # ember-chat serve loaded it once


def test_the_messages_api_with_the_official_anthropic_client(base_url: str) -> None:
    """/v1/messages and /v1/messages/count_tokens: a Message, its event stream, the prompt's tokens as the
    Message's usage counts them, and an unknown model's 404 in Anthropic's shape."""
    model = httpx2.get(base_url + "/models").json()["data"][0]["id"]  # (the server\'s own model: listed first)
    with anthropic.Anthropic(base_url=base_url.removesuffix("/v1"), api_key="unused", max_retries=0) as client:
        hi: list[Any] = [{"role": "user", "content": "hi"}]
        first = client.messages.create(model=model, messages=hi, max_tokens=4, extra_body={"temperature": 0})
        assert first.stop_reason in {"end_turn", "max_tokens"} and first.usage.output_tokens > 0
        with client.messages.stream(model=model, messages=hi, max_tokens=4, extra_body={"temperature": 0}) as stream:
            streamed = stream.get_final_message()
        said = "".join(b.text for b in first.content if b.type == "text")
        assert "".join(b.text for b in streamed.content if b.type == "text") == said  # greedy: the same both ways
        counted = client.messages.count_tokens(model=model, messages=hi).input_tokens
        assert counted == first.usage.input_tokens + (first.usage.cache_read_input_tokens or 0)
        with pytest.raises(anthropic.NotFoundError) as missing:
            client.messages.create(model="claude-sonnet-4", messages=hi, max_tokens=4)
        assert isinstance(missing.value.body, dict) and missing.value.body["error"]["type"] == "not_found_error"


def test_embeddings_with_the_official_client(base_url: str) -> None:
    """/v1/embeddings: several texts in one request, as floats and as the base64 the client asks for by
    default (the same vectors, unit length), token ids embedding as their text, and an input longer than
    the model takes a 400 naming it."""
    with openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0) as client:
        model = client.models.list().data[0].id
        texts = ["hello world", "the cat sat on the mat"]
        floats = client.embeddings.create(model=model, input=texts, encoding_format="float")
        assert [d.index for d in floats.data] == [0, 1] and floats.usage.prompt_tokens > 0
        decoded = client.embeddings.create(model=model, input=texts)  # (base64 on the wire)
        for a, b in zip(floats.data, decoded.data, strict=True):
            assert max(abs(x - y) for x, y in zip(a.embedding, b.embedding, strict=True)) < 1e-6
            assert abs(sum(x * x for x in a.embedding) - 1.0) < 1e-5
        ids = httpx2.post(base_url.removesuffix("/v1") + "/tokenize", json={"content": texts[0], "add_special": True})
        by_ids = client.embeddings.create(model=model, input=ids.json()["tokens"], encoding_format="float")
        assert max(abs(x - y) for x, y in zip(by_ids.data[0].embedding, floats.data[0].embedding, strict=True)) < 1e-4
        with pytest.raises(openai.BadRequestError) as long:
            client.embeddings.create(model=model, input=["hi", "hello " * 600])
        assert "input[1]" in str(long.value)


def test_rerank_with_a_reranker_gguf(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`ember-chat serve --model` a reranker GGUF (a bert with rank pooling): /v1/rerank and llama-server's
    /rerank and /v1/reranking score the documents, best first, cut to top_n; a chat to it is a 400 saying
    what it is, and a rerank of a chat model's server a 400 naming the model."""
    path = write_tiny_bert(tmp_path_factory.mktemp("reranker") / "tiny-reranker.gguf", "rank")
    with (
        ember_server(path, threads=1, n_ctx=512) as url,
        httpx2.Client(base_url=url.removesuffix("/v1"), timeout=60) as http,
    ):
        docs = ["the cat sat on the mat", "a dog ran", {"text": "hello world"}]
        ranked = http.post("/v1/rerank", json={"query": "the cat", "documents": docs, "return_documents": True})
        assert ranked.status_code == 200, ranked.text
        results = ranked.json()["results"]
        assert sorted(r["index"] for r in results) == [0, 1, 2] and ranked.json()["usage"]["prompt_tokens"] > 0
        assert [r["relevance_score"] for r in results] == sorted((r["relevance_score"] for r in results), reverse=True)
        assert results[0]["document"]["text"] in {"the cat sat on the mat", "a dog ran", "hello world"}
        for alias in ("/rerank", "/v1/reranking"):
            top = http.post(alias, json={"query": "the cat", "documents": docs, "top_n": 1}).json()["results"]
            assert top == [{"index": results[0]["index"], "relevance_score": results[0]["relevance_score"]}]
        chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 400 and "is a reranker: it has no chat" in chat.json()["error"]["message"]


def test_rerank_of_a_chat_model_is_a_400(base_url: str) -> None:
    with httpx2.Client(base_url=base_url, timeout=60) as http:
        refused = http.post("/rerank", json={"query": "q", "documents": ["d"]})
        assert refused.status_code == 400 and "is not a reranker" in refused.json()["error"]["message"]
