"""Fill-in-the-middle through Ember's API server: `suffix` on /v1/completions (the official `openai`
client) and llama-server's /infill (plain HTTP), over a tiny model with fill-in-the-middle tokens
(tests/helpers/gguf_factory.py's FIM_TOKENS, named by the GGUF's tokenizer.ggml.fim_*_token_id). The
scripted model writes " hello world" only after <fim_middle> and ends at once after any other last
token, so the answer says the prompt ended as PSM asks; the tokens the runtime evaluated are read as
its _stream was handed them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import WAIT_S, assert_api_error, assert_error, in_front_of_remote
from tests.helpers.gguf_factory import FIM_TOKENS, Script, TinySpec, write_tiny_model
from tests.helpers.sse_server import FakeOpenAI

MIDDLE = " hello world"
_SCRIPT = Script(start=("</s>",), after={"<fim_middle>": ("▁hello",), "▁hello": ("▁world",), "▁world": ("</s>",)})


@pytest.fixture(scope="module")
def fim_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    path = write_tiny_model(tmp_path_factory.mktemp("fim") / "tiny-fim.gguf", TinySpec(script=_SCRIPT, fim_tokens=True))
    service = EngineService()
    try:
        load_blocking(service, LoadConfig(path, n_ctx=512, threads=1), "tiny")
        server = ApiServer(service, ServerConfig(port=0))
        server.start()
        yield server
        server.stop()
    finally:
        service.close()


@pytest.fixture
def fim_http(fim_server: ApiServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=f"http://127.0.0.1:{fim_server.port}", timeout=WAIT_S) as c:
        yield c


@pytest.fixture
def fim_client(fim_server: ApiServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fim_server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as c:
        yield c


@pytest.fixture
def evaluated(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The prompt tokens of each generation the local runtime runs, in order."""
    seen: list[list[int]] = []
    original = LocalRuntime._stream

    def spy(self: LocalRuntime, prompt_text: str, tokens: list[int], *args: Any, **kwargs: Any) -> Any:
        seen.append(list(tokens))
        return original(self, prompt_text, tokens, *args, **kwargs)

    monkeypatch.setattr(LocalRuntime, "_stream", spy)
    return seen


def _ids(http: httpx2.Client) -> tuple[int, int, int, int]:
    """BOS and the three FIM tokens' ids, as the server's own tokenizer reads their text."""
    r = http.post("/tokenize", json={"content": "".join(FIM_TOKENS), "add_special": True, "parse_special": True})
    assert r.status_code == 200, r.text
    bos, pre, suf, mid = r.json()["tokens"]
    return bos, pre, suf, mid


def _tokens(http: httpx2.Client, text: str) -> list[int]:
    r = http.post("/tokenize", json={"content": text})
    assert r.status_code == 200, r.text
    return list(r.json()["tokens"])


def test_completions_suffix_is_the_middle(
    fim_client: openai.OpenAI, fim_http: httpx2.Client, evaluated: list[list[int]]
) -> None:
    bos, pre, suf, mid = _ids(fim_http)
    prefix, suffix = "def f(x):", "    return x\n"
    expected = [bos, pre, *_tokens(fim_http, prefix), suf, *_tokens(fim_http, suffix), mid]

    r = fim_client.completions.create(model="tiny", prompt=prefix, suffix=suffix, max_tokens=8, temperature=0)
    assert r.choices[0].text == MIDDLE
    assert r.choices[0].finish_reason == "stop"
    assert evaluated == [expected]
    assert r.usage is not None
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(expected), 2)  # the end token is no output

    with fim_client.completions.create(
        model="tiny", prompt=prefix, suffix=suffix, max_tokens=8, temperature=0, stream=True,
        stream_options={"include_usage": True},
    ) as stream:  # fmt: skip
        *chunks, finish, usage = list(stream)
    assert "".join(c.choices[0].text for c in chunks) == MIDDLE
    assert finish.choices[0].finish_reason == "stop"
    assert usage.usage is not None and usage.usage.prompt_tokens == len(expected)
    assert evaluated == [expected, expected]

    # a FIM token's text in the user's text stays text: one <fim_middle>, the last token
    r = fim_client.completions.create(model="tiny", prompt="x<fim_middle>", suffix="<fim_prefix>", max_tokens=8)
    assert r.choices[0].text == MIDDLE
    assert [evaluated[-1].count(t) for t in (pre, suf, mid)] == [1, 1, 1] and evaluated[-1][-1] == mid

    # without a suffix, the same prompt is a plain completion: no FIM token, nothing written
    plain = fim_client.completions.create(model="tiny", prompt=prefix, max_tokens=8, temperature=0)
    assert plain.choices[0].text == ""
    assert {pre, suf, mid} & set(evaluated[-1]) == set()


def test_infill_endpoint_answers_as_llama_server(fim_http: httpx2.Client, evaluated: list[list[int]]) -> None:
    bos, pre, suf, mid = _ids(fim_http)
    body = {
        "input_prefix": "def f(x):\n", "input_suffix": "\n    return y\n", "prompt": "    y =",
        "input_extra": [{"filename": "util.py", "text": "x = 1\n"}], "n_predict": 8, "temperature": 0,
    }  # fmt: skip
    snippet = _tokens(fim_http, "\n\n--- snippet ---\n\n")  # (the model has no <fim_sep>: llama.cpp's separator)
    expected = [
        *snippet, *_tokens(fim_http, "x = 1\n"), bos, pre, *_tokens(fim_http, "def f(x):\n"),
        *_tokens(fim_http, "    y ="), suf, *_tokens(fim_http, "\n    return y\n"), mid,
    ]  # fmt: skip

    r = fim_http.post("/infill", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["content"] == MIDDLE
    assert (answer["stop"], answer["stop_type"]) == (True, "eos")
    assert (answer["tokens_predicted"], answer["tokens_evaluated"]) == (2, len(expected))
    assert answer["model"] == "tiny" and answer["ember"]["output_tokens"] == 2
    assert evaluated == [expected]

    # n_predict is the limit (over max_tokens, as llama-server reads them)
    r = fim_http.post("/infill", json={**body, "n_predict": 1, "max_tokens": 8})
    assert (r.json()["content"], r.json()["stop_type"]) == (" hello", "limit")

    with fim_http.stream("POST", "/infill", json={**body, "stream": True}) as raw:
        assert raw.status_code == 200
        assert raw.headers["content-type"] == "text/event-stream"
        lines = [line for line in raw.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    events = [json.loads(line[6:]) for line in lines]  # no [DONE]: llama-server's stream ends with its last event
    *parts, last = events
    assert all(e["stop"] is False for e in parts)
    assert "".join(e["content"] for e in parts) == MIDDLE
    assert last["stop"] is True and last["stop_type"] == "eos" and last["tokens_evaluated"] == len(expected)


def test_a_model_without_fim_tokens_is_a_clear_400(client: openai.OpenAI, http: httpx2.Client) -> None:
    """The tests' plain tiny model has no fill-in-the-middle tokens: the 400 names it and what it lacks."""
    with pytest.raises(openai.BadRequestError) as exc:
        client.completions.create(model="tiny", prompt="def f(", suffix="return x", max_tokens=4)
    assert_api_error(exc.value, 400)
    message = str(exc.value)
    assert "The model tiny cannot fill in the middle" in message and "tokenizer.ggml.fim_pre_token_id" in message

    r = http.post("/infill", json={"input_prefix": "def f(", "input_suffix": "return x", "n_predict": 4})
    message = assert_error(r, 400, code="invalid_parameter")
    assert "The model tiny cannot fill in the middle" in message and "fim_mid_token_id" in message


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/infill", {"input_prefix": "a", "input_extra": {"filename": "x", "text": "y"}}, "input_extra"),
        ("/infill", {"input_prefix": "a", "input_extra": ["text"]}, "input_extra"),
        ("/infill", {"input_prefix": 3}, "input_prefix"),
        ("/infill", {"input_prefix": "a", "n_predict": 0}, "n_predict"),
        ("/infill", {"input_prefix": "a", "suffix": "b"}, "suffix"),  # /v1/completions' word: unknown here
    ],
)
def test_bad_fill_in_the_middle_bodies_are_400(
    fim_http: httpx2.Client, path: str, body: dict[str, Any], param: str
) -> None:
    assert_error(fim_http.post(path, json=body), 400, param=param)


def test_a_suffix_over_the_context_is_400(fim_client: openai.OpenAI, fim_http: httpx2.Client) -> None:
    long = "hello " * 600  # over the 512 tokens of the context
    with pytest.raises(openai.BadRequestError) as exc:
        fim_client.completions.create(model="tiny", prompt="a", suffix=long, max_tokens=4)
    assert_api_error(exc.value, 400)
    assert exc.value.code == "context_length_exceeded"
    r = fim_http.post("/infill", json={"input_prefix": "a", "input_suffix": "b", "input_extra": [{"text": long}]})
    assert_error(r, 400, code="context_length_exceeded")


def test_a_remote_model_cannot_fill_in_the_middle(server: FakeOpenAI) -> None:
    """Ember in front of a remote server has none of its FIM tokens to write the prompt with: a 400,
    before anything is sent there."""
    with in_front_of_remote(server.base_url) as raw:
        body = {"model": "test-model", "prompt": "def f(", "suffix": "return x"}
        assert "remote model" in assert_error(raw.post("/v1/completions", json=body), 400, "suffix")
        body = {"input_prefix": "def f(", "input_suffix": "return x"}
        assert "remote model" in assert_error(raw.post("/infill", json=body), 400)
    assert server.generate_requests() == []
