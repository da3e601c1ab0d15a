"""Ember's OpenAI-compatible API server, driven by the official `openai` client (and raw HTTP where
the client cannot express the case): response shapes, streaming, validation, and the safety guards
(API key, Host, CORS, body size, binding: engine/test_api_server_guards.py). The engine queue behind it:
engine/test_api_queue.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import openai
import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import MESSAGES, METRIC_KEYS, WAIT_S, assert_api_error, assert_error, chat_body
from tests.helpers.gguf_factory import Script, any_of, says

# ----- models, health


def test_models_and_health(client: openai.OpenAI, http: httpx2.Client) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny"]
    model = models.data[0]
    assert model.object == "model" and model.owned_by == "ember"
    assert (model.model_extra or {})["max_model_len"] == 512

    health = http.get("/health")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "model": "tiny", "running": 0, "queued": 0}
    assert_error(http.get("/v1/nothing"), 404, code="not_found")
    assert_error(http.get("/v1/chat/completions"), 405)


def test_refused_post_does_not_leave_its_body_on_the_connection(http: httpx2.Client) -> None:
    """A POST refused before its body is read closes the connection (saying so): the body must not
    be parsed as the next request on a keep-alive connection."""
    for path, status in (("/v1/nothing", 404), ("/v1/models", 405), ("/health", 405)):
        response = http.post(path, json=chat_body())
        assert_error(response, status)
        assert response.headers["connection"] == "close"
        after = http.get("/health")  # same client: a new connection, not the leftover body
        assert after.status_code == 200 and after.json()["status"] == "ok"
    # an error after the body was read keeps the connection
    response = http.post("/v1/chat/completions", json=chat_body(temperature=9))
    assert_error(response, 400, "temperature")
    assert response.headers.get("connection") != "close"


# ----- chat and completions


def test_chat_completion_shape(client: openai.OpenAI, http: httpx2.Client) -> None:
    response = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=8, temperature=0)
    assert response.object == "chat.completion"
    assert response.id.startswith("chatcmpl-")
    assert response.model == "tiny"
    assert len(response.choices) == 1
    choice = response.choices[0]
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content
    assert choice.finish_reason == "length"
    usage = response.usage
    assert usage is not None
    assert usage.completion_tokens == 8
    assert usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    ember = (response.model_extra or {})["ember"]
    for key in METRIC_KEYS:
        assert isinstance(ember[key], int | float), key
    assert ember["ttft_s"] > 0 and ember["decode_tokens_per_s"] > 0
    assert ember["output_tokens"] == 8
    assert ember["prompt_tokens"] == usage.prompt_tokens
    assert ember["stop_reason"] == "length"
    assert ember["n_ctx"] == 512

    raw = http.post("/v1/chat/completions", json=chat_body(max_tokens=8))
    assert raw.status_code == 200
    body = raw.json()
    assert set(body) >= {"id", "object", "created", "model", "choices", "usage", "ember"}
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": choice.message.content,  # greedy: the same answer again
        "refusal": None,
    }
    assert body["choices"][0]["logprobs"] is None


def test_chat_stream_with_usage_matches_greedy_answer(client: openai.OpenAI) -> None:
    expected = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=12, temperature=0)
    assert expected.usage is not None
    with client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        max_tokens=12,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        chunks = list(stream)

    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert all(c.object == "chat.completion.chunk" and c.model == "tiny" for c in chunks)
    first, *middle, finish, usage_chunk = chunks
    assert first.choices[0].delta.role == "assistant"
    assert not first.choices[0].delta.content
    assert first.choices[0].finish_reason is None
    assert middle, "no content chunks"
    for chunk in middle:
        assert chunk.choices[0].finish_reason is None
        assert chunk.choices[0].delta.content
    text = "".join(c.choices[0].delta.content or "" for c in middle)
    assert text == expected.choices[0].message.content

    assert finish.choices[0].finish_reason == expected.choices[0].finish_reason
    assert not finish.choices[0].delta.content
    ember = (finish.model_extra or {})["ember"]
    for key in METRIC_KEYS:
        assert isinstance(ember[key], int | float), key
    assert finish.usage is None

    assert usage_chunk.choices == []
    assert usage_chunk.usage is not None
    assert usage_chunk.usage.completion_tokens == expected.usage.completion_tokens == ember["output_tokens"]
    assert usage_chunk.usage.prompt_tokens == expected.usage.prompt_tokens
    assert usage_chunk.usage.total_tokens == usage_chunk.usage.prompt_tokens + usage_chunk.usage.completion_tokens


def test_stream_without_usage_has_no_usage_chunk(client: openai.OpenAI) -> None:
    with client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=4, temperature=0, stream=True
    ) as stream:
        chunks = list(stream)
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_max_completion_tokens_works_like_max_tokens(client: openai.OpenAI) -> None:
    a = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0)
    b = client.chat.completions.create(model="tiny", messages=MESSAGES, max_completion_tokens=6, temperature=0)
    assert a.usage is not None and b.usage is not None
    assert b.usage.completion_tokens == a.usage.completion_tokens == 6
    assert b.choices[0].finish_reason == "length"
    assert b.choices[0].message.content == a.choices[0].message.content


def test_completions_stream_and_not(client: openai.OpenAI, http: httpx2.Client) -> None:
    response = client.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8, temperature=0)
    assert response.object == "text_completion"
    assert response.id.startswith("cmpl-")
    assert response.choices[0].finish_reason == "length"
    assert response.choices[0].text
    assert response.usage is not None
    assert response.usage.completion_tokens == 8
    assert response.usage.total_tokens == response.usage.prompt_tokens + 8
    assert (response.model_extra or {})["ember"]["output_tokens"] == 8

    with client.completions.create(
        model="tiny",
        prompt="Once upon a time",
        max_tokens=8,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        chunks = list(stream)
    assert all(c.object == "text_completion" for c in chunks)
    *text_chunks, finish, usage_chunk = chunks
    assert "".join(c.choices[0].text for c in text_chunks) == response.choices[0].text
    assert finish.choices[0].finish_reason == "length"
    assert (finish.model_extra or {})["ember"]["output_tokens"] == 8
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert usage_chunk.usage.completion_tokens == 8

    # the raw stream: server-sent events, ending with [DONE]
    body = {"model": "tiny", "prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "stream": True}
    with http.stream("POST", "/v1/completions", json=body) as raw:
        assert raw.status_code == 200
        assert raw.headers["content-type"] == "text/event-stream"
        lines = [line for line in raw.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    assert json.loads(lines[-2][6:])["choices"][0]["finish_reason"] == "length"


def _stop_string(text: str) -> tuple[str, int]:
    """A stop string from a greedy answer: its first 2-character ASCII alphanumeric run after the
    start that occurs nowhere earlier; (stop, index)."""
    for i in range(1, len(text) - 1):
        candidate = text[i : i + 2]
        if candidate.isascii() and candidate.isalnum() and text.find(candidate) == i:
            return candidate, i
    pytest.fail(f"no usable stop string in the greedy answer {text!r}")


@pytest.mark.parametrize("endpoint", ["chat", "completion"])
def test_stop_string_ends_the_answer_before_it(client: openai.OpenAI, endpoint: str) -> None:
    def generate(**kwargs: Any) -> tuple[str, str]:
        if endpoint == "chat":
            r = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0, **kwargs)
            return r.choices[0].message.content or "", r.choices[0].finish_reason
        c = client.completions.create(model="tiny", prompt="Once upon a time", temperature=0, **kwargs)
        return c.choices[0].text, c.choices[0].finish_reason

    greedy, _ = generate(max_tokens=24)
    stop, index = _stop_string(greedy)
    text, reason = generate(max_tokens=24, stop=[stop])
    assert reason == "stop"
    assert text == greedy[:index]
    assert stop not in text


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[Script], openai.OpenAI]]:
    """A client of a server whose model says what a script says (tests/helpers/gguf_factory.py), so what is
    asserted is never what random weights happen to produce."""
    from tests.helpers.gguf_factory import TinySpec, write_tiny_model

    services: list[EngineService] = []
    servers: list[ApiServer] = []
    clients: list[openai.OpenAI] = []

    def make(script: Script) -> openai.OpenAI:
        path = write_tiny_model(tmp_path_factory.mktemp("scripted") / "scripted.gguf", TinySpec(script=script))
        service = EngineService()
        services.append(service)
        load_blocking(service, LoadConfig(path, n_ctx=512, threads=1), "tiny")
        server = ApiServer(service, ServerConfig(port=0))
        server.start()
        servers.append(server)
        clients.append(openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S))
        return clients[-1]

    yield make
    for c in clients:
        c.close()
    for server in servers:
        server.stop()
    for service in services:
        service.close()
        assert not service.running


def test_ignore_eos_generates_exactly_max_tokens(scripted: Callable[[Script], openai.OpenAI]) -> None:
    """llama.cpp's and vLLM's `ignore_eos` (the benchmark lab sends it): an answer that ends at an
    end-of-generation token (this model says " hello world" and then ends its turn) goes on to max_tokens."""
    client = scripted(says("▁hello", "▁world", "</s>"))

    def tokens(**extra: object) -> tuple[int, str | None]:
        r = client.completions.create(model="tiny", prompt="hi", max_tokens=300, temperature=0,
                                      extra_body=extra or None)  # fmt: skip
        return r.usage.completion_tokens if r.usage else 0, r.choices[0].finish_reason

    assert tokens() == (2, "stop")
    assert tokens(ignore_eos=True) == (300, "length")


def test_seed_is_accepted_and_reproducible(scripted: Callable[[Script], openai.OpenAI]) -> None:
    """On a model with eight equally likely tokens at every step, the same seed gives the same answer
    and another seed another one."""
    client = scripted(any_of("▁hello", "▁world", "▁Ember", "!", "?", ".", ",", "▁the"))

    def sample(seed: int) -> str:
        r = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=8, temperature=1.0, seed=seed)
        return r.choices[0].message.content or ""

    assert sample(1234) == sample(1234)
    assert sample(1234) != sample(99)


# ----- validation and errors


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"temperature": 9}, "temperature"),
        ({"top_p": 2}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"extra_body": {"repetition_penalty": 9}}, "repetition_penalty"),
        ({"extra_body": {"top_k": -1}}, "top_k"),
        ({"extra_body": {"min_p": -1}}, "min_p"),
        ({"extra_body": {"ignore_eos": "yes"}}, "ignore_eos"),
        ({"stop": ["a", ""]}, "stop"),
        ({"n": 17}, "n"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]}, "tools"),
        ({"stop": ["a"] * 17}, "stop"),
        ({"response_format": {"type": "json"}}, "response_format"),
    ],
)
def test_invalid_parameters_are_400_naming_the_parameter(
    client: openai.OpenAI, kwargs: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=MESSAGES, **kwargs)
    assert_api_error(info.value, 400, param)
    assert info.value.type == "invalid_request_error"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "tiny"}, "messages"),  # messages missing
        ({"model": "tiny", "messages": []}, "messages"),
        ({"model": "tiny", "messages": [{"role": "system", "content": "Be brief."}]}, "messages"),
        ({"model": "tiny", "messages": [{"role": "tool", "content": "x"}]}, "messages"),
        ({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages"),
        ({"model": "tiny", "messages": MESSAGES, "stream": "yes"}, "stream"),
        ({"model": 7, "messages": MESSAGES}, "model"),
    ],
)
def test_invalid_chat_bodies_are_400(http: httpx2.Client, body: dict[str, Any], param: str) -> None:
    assert_error(http.post("/v1/chat/completions", json=body), 400, param)


def test_bad_json_and_non_object_bodies_are_400(http: httpx2.Client) -> None:
    headers = {"Content-Type": "application/json"}
    message = assert_error(http.post("/v1/chat/completions", content=b'{"model": "tiny",', headers=headers), 400)
    assert "not valid JSON" in message
    for body in (b"[1, 2]", b'"hello"', b"null"):
        message = assert_error(http.post("/v1/chat/completions", content=body, headers=headers), 400)
        assert "JSON object" in message
    assert_error(http.post("/v1/completions", json={"model": "tiny", "prompt": 5}), 400, "prompt")
    # the server still answers normally afterwards
    assert http.post("/v1/chat/completions", json=chat_body()).status_code == 200


def test_unknown_model_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES, max_tokens=2)
    assert_api_error(info.value, 404, "model")
    assert info.value.code == "model_not_found"


def test_no_model_loaded_is_503(serve: Callable[[EngineService, ServerConfig], ApiServer]) -> None:
    service = EngineService()
    try:
        server = serve(service, ServerConfig(port=0))
        with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as client:
            assert client.models.list().data == []
            with pytest.raises(openai.InternalServerError) as info:
                client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2)
            assert_api_error(info.value, 503)
            assert info.value.code == "model_not_loaded"
        with httpx2.Client(timeout=WAIT_S) as http:
            assert http.get(f"http://127.0.0.1:{server.port}/health").json()["model"] is None
    finally:
        service.close()


@pytest.mark.parametrize("stream", [False, True])
def test_context_overflow_is_400(client: openai.OpenAI, stream: bool) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hello " * 2000}], max_tokens=8, stream=stream
        )
    assert_api_error(info.value, 400)
    assert info.value.code == "context_length_exceeded"

    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="tiny", prompt="hello " * 2000, max_tokens=8, stream=stream)
    assert info.value.code == "context_length_exceeded"
