"""Ember's API server against OpenAI's and llama-server's conventions (issue 18, API conformance):
a conversation too long for the context, /health without the key, /tokenize and /detokenize,
unknown request fields, the model alias. The real `openai` client on a tiny model, raw HTTP where
the client cannot express the case."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.grammar.json_check import json_problem
from ember_chat.engine.inference.remote.backend import RemoteBackend, check_connection
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import WAIT_S, FakeSetup, assert_error, chat_body, in_front_of_remote
from tests.helpers.peer_servers import ember_server
from tests.helpers.remote_support import Backends, drain
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk

HELLO: list[Any] = [{"role": "user", "content": "Hello"}]
# fixtures from tests/helpers/api_support.py and tests/helpers/remote_support.py

# ----- a conversation longer than the context


def _long_history(turns: int = 12) -> list[dict[str, Any]]:
    """Each message fits the 512-token context alone; all of them do not."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        history.append({"role": "user", "content": f"question {i} " + "word " * 40})
        history.append({"role": "assistant", "content": f"answer {i} " + "word " * 40})
    history.append({"role": "user", "content": "and now?"})
    return history


@pytest.mark.parametrize("stream", [False, True])
def test_history_longer_than_the_context_is_400(client: openai.OpenAI, stream: bool) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=_long_history(), max_tokens=8, stream=stream)
    assert info.value.code == "context_length_exceeded"
    assert "trim_history" in str(info.value.message)


@pytest.mark.parametrize("stream", [False, True])
def test_trim_history_opts_into_dropping_the_oldest_messages(client: openai.OpenAI, stream: bool) -> None:
    extra = {"ember": {"trim_history": True}}
    if not stream:
        response = client.chat.completions.create(
            model="tiny", messages=_long_history(), max_tokens=4, temperature=0, extra_body=extra
        )
        assert response.choices[0].finish_reason in ("stop", "length")
        assert (response.model_extra or {})["ember"]["dropped_messages"] > 0
        return
    finish = None
    ember: dict[str, Any] = {}
    with client.chat.completions.create(
        model="tiny", messages=_long_history(), max_tokens=4, temperature=0, stream=True, extra_body=extra
    ) as chunks:
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
                ember = (chunk.model_extra or {})["ember"]
    assert finish in ("stop", "length")
    assert ember["dropped_messages"] > 0


def test_ember_extension_is_validated(http: httpx2.Client) -> None:
    body = chat_body(ember={"trim_history": "yes"})
    assert_error(http.post("/v1/chat/completions", json=body), 400, "ember")
    body = chat_body(ember={"trim_historie": True})
    assert "trim_historie" in assert_error(http.post("/v1/chat/completions", json=body), 400, "ember")


# ----- /health, /tokenize, /detokenize


def test_health_needs_no_key_but_the_rest_does(
    tiny_service: EngineService, serve: Callable[[EngineService, ServerConfig], ApiServer]
) -> None:
    server = serve(tiny_service, ServerConfig(port=0, api_key="sekret"))
    with httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as raw:
        health = raw.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert_error(raw.post("/tokenize", json={"content": "hi"}), 401, code="invalid_api_key")
        assert_error(raw.get("/v1/models"), 401, code="invalid_api_key")
        ok = raw.post("/tokenize", json={"content": "hi"}, headers={"Authorization": "Bearer sekret"})
        assert ok.status_code == 200


def test_tokenize_and_detokenize_round_trip(tiny_service: EngineService, http: httpx2.Client) -> None:
    text = "Hello there, world"
    response = http.post("/tokenize", json={"content": text})
    assert response.status_code == 200, response.text
    tokens = response.json()["tokens"]
    assert set(response.json()) == {"tokens"}
    assert tokens and all(isinstance(t, int) for t in tokens)
    assert len(tokens) == tiny_service.count_tokens(text)  # the loaded model's own tokenizer

    with_bos = http.post("/tokenize", json={"content": text, "add_special": True}).json()["tokens"]
    assert with_bos[1:] == tokens and len(with_bos) == len(tokens) + 1

    pieces = http.post("/tokenize", json={"content": text, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == tokens
    joined = "".join(p["piece"] for p in pieces)
    # as llama-server: the vocabulary's pieces, so a SentencePiece model's leading space is there
    assert joined in (text, " " + text)

    back = http.post("/detokenize", json={"tokens": tokens})
    assert back.status_code == 200 and back.json() == {"content": joined}


def test_tokenize_without_a_local_tokenizer_is_501(fake: Callable[..., FakeSetup]) -> None:
    """A model whose tokenizer Ember does not hold (a remote one; here a fake engine) says so."""
    setup = fake(n_tokens=2)
    with httpx2.Client(base_url=f"http://127.0.0.1:{setup.server.port}", timeout=WAIT_S) as raw:
        assert_error(raw.post("/tokenize", json={"content": "hi"}), 501, code="tokenizer_unavailable")
        assert_error(raw.post("/detokenize", json={"tokens": [1]}), 501, code="tokenizer_unavailable")


def test_tokenize_validation(http: httpx2.Client) -> None:
    assert_error(http.post("/tokenize", json={"content": 5}), 400, "content")
    assert_error(http.post("/tokenize", json={"content": "x", "add_special": "yes"}), 400, "add_special")
    assert_error(http.post("/detokenize", json={"tokens": ["a"]}), 400, "tokens")
    assert_error(http.post("/detokenize", json={"tokens": [10**9]}), 400, "tokens")
    assert_error(http.get("/tokenize"), 405)


def test_a_wrong_token_or_flag_is_named_by_its_place(http: httpx2.Client) -> None:
    """The bodies are typed (openai/typed_body.py): an item in error is named where it is, with what it was."""
    message = assert_error(http.post("/detokenize", json={"tokens": [1, 2, True]}), 400, "tokens")
    assert message == "tokens[2] must be a whole number (not true)."
    message = assert_error(http.post("/tokenize", json={"content": "x", "parse_special": False}), 400, "parse_special")
    assert "only true" in message
    assert_error(http.post("/tokenize", json=["hi"]), 400)


# ----- unknown fields


def test_unknown_fields_are_named_in_a_400(client: openai.OpenAI, http: httpx2.Client) -> None:
    response = http.post("/v1/chat/completions", json=chat_body(mirostat_tau=5, foo=1))
    message = assert_error(response, 400, "foo", code="unknown_field")
    assert "foo" in message and "mirostat_tau" in message
    # a completion's fields are not a chat's, nor the other way round
    body = {"model": "tiny", "prompt": "hi", "messages": [{"role": "user", "content": "hi"}]}
    assert_error(http.post("/v1/completions", json=body), 400, "messages", code="unknown_field")
    assert_error(http.post("/tokenize", json={"content": "hi", "n_probs": 2}), 400, "n_probs")
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="tiny", prompt="hi", max_tokens=2, extra_body={"typo_temprature": 0.2})
    assert "typo_temprature" in str(info.value.message)


def test_a_field_of_the_wrong_type_is_named_by_its_place(http: httpx2.Client) -> None:
    """The envelope of a chat or completion body is typed (openai/chat_body): a wrong item is named by its
    place, and a field Ember knows but ignores (user, store, cache_prompt) is still of its type (they were
    taken whatever they were; stop's items were 'a list of strings')."""
    completion = {"model": "tiny", "prompt": "hi", "max_tokens": 2}
    cases = [
        ("/v1/chat/completions", chat_body(stop=["a", 1]), "stop", "stop[1] must be a string (not the integer 1)."),
        ("/v1/chat/completions", chat_body(user=5), "user", "user must be a string (not the integer 5)."),
        ("/v1/chat/completions", chat_body(store="yes"), "store", "store must be true or false (not 'yes')."),
        ("/v1/chat/completions", chat_body(messages=["hi"]), "messages", "messages[0] must be an object (not 'hi')."),
        ("/v1/completions", {**completion, "cache_prompt": 1}, "cache_prompt",
         "cache_prompt must be true or false (not the integer 1)."),
        ("/v1/completions", {**completion, "suffix": 3}, "suffix", "suffix must be a string (not the integer 3)."),
    ]  # fmt: skip
    for path, body, param, message in cases:
        assert assert_error(http.post(path, json=body), 400, param) == message


def test_cache_prompt_and_known_extensions_are_accepted(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "Hello"}],
        max_tokens=2,
        temperature=0,
        user="someone",
        extra_body={"cache_prompt": True, "ignore_eos": True, "top_k": 1, "min_p": 0.1, "repeat_penalty": 1.1},
    )
    assert response.usage is not None and response.usage.completion_tokens == 2


# ----- constrained output

ANSWER = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "tag": {"enum": ["a", "b"]}},
    "required": ["ok", "tag"],
    "additionalProperties": False,
}
ANY_OBJECT: dict[str, Any] = {"type": "object"}


@pytest.mark.parametrize(
    ("extra", "schema"),
    [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}}, ANSWER),
        ({"response_format": {"type": "json_object"}}, ANY_OBJECT),
        ({"json_schema": ANSWER}, ANSWER),  # llama.cpp's
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_json_output_is_constrained(
    client: openai.OpenAI, extra: dict[str, Any], schema: dict[str, Any], stream: bool
) -> None:
    # (the tiny random model's free JSON has no length bound: a seed whose JSON closes within 120 tokens)
    kwargs: dict[str, Any] = {"model": "tiny", "messages": HELLO, "max_tokens": 120, "temperature": 1.0, "seed": 1}
    if not stream:
        response = client.chat.completions.create(**kwargs, extra_body=extra)
        text, finish = response.choices[0].message.content or "", response.choices[0].finish_reason
    else:
        parts, finish = [], None
        with client.chat.completions.create(**kwargs, stream=True, extra_body=extra) as chunks:
            for chunk in chunks:
                if chunk.choices:
                    parts.append(chunk.choices[0].delta.content or "")
                    finish = chunk.choices[0].finish_reason or finish
        text = "".join(parts)
    assert finish == "stop", text
    assert json_problem(text, schema) is None, text
    free = client.chat.completions.create(**kwargs)  # the same request unconstrained: not JSON
    assert json_problem(free.choices[0].message.content or "", schema) is not None


def test_a_grammar_forces_the_answer(client: openai.OpenAI) -> None:
    response = client.completions.create(
        model="tiny", prompt="Is it?", max_tokens=20, temperature=1.0, seed=5,
        extra_body={"grammar": 'root ::= "yes" | "no"'},
    )  # fmt: skip
    assert response.choices[0].text in ("yes", "no") and response.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"grammar": "root ::= nothing-defined"}, "grammar"),
        ({"json_schema": ["not", "a", "schema"]}, "json_schema"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"response_format": {"type": "json_schema"}}, "response_format"),
        ({"grammar": 'root ::= "a"', "json_schema": ANSWER}, None),
    ],
)
def test_bad_constraints_are_400(http: httpx2.Client, extra: dict[str, Any], param: str | None) -> None:
    assert_error(http.post("/v1/chat/completions", json=chat_body(**extra)), 400, param)


def test_embers_own_remote_backend_is_understood(tiny_server: ApiServer, tiny_service: EngineService) -> None:
    """Ember in front of Ember: what its remote backend sends to any server (vLLM's
    continue_final_message, the tokenizer's several names for the text) is not an unknown field."""
    backend = RemoteBackend()
    try:
        endpoint = Endpoint("self", tiny_server.url)
        backend.load(RemoteModelRef(endpoint, check_connection(endpoint).models[0].id))
        assert backend.count_tokens("Hello there, world") == tiny_service.count_tokens("Hello there, world")
        partial = [ChatMessage("user", "Hello"), ChatMessage("assistant", "Well")]  # continued, not answered
        *_, fin = backend.chat(partial, SamplingParams(temperature=0.0, max_tokens=2))
        assert isinstance(fin, Finished) and fin.reason == "length" and fin.error is None
    finally:
        backend.close()


def test_allow_unknown_fields_relaxes_it(
    tiny_service: EngineService, serve: Callable[[EngineService, ServerConfig], ApiServer]
) -> None:
    server = serve(tiny_service, ServerConfig(port=0, allow_unknown_fields=True))
    with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as c:
        response = c.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=2, extra_body={"vendor_noise": 1}
        )
        assert response.choices[0].finish_reason in ("stop", "length")


# ----- penalties


def test_presence_and_frequency_penalties_change_the_answer(client: openai.OpenAI) -> None:
    def answer(**penalties: float) -> str:
        r = client.completions.create(model="tiny", prompt="Once", max_tokens=24, temperature=0, **penalties)
        return r.choices[0].text

    plain = answer()
    assert answer(presence_penalty=0, frequency_penalty=0) == plain
    assert answer(presence_penalty=2.0) != plain
    assert answer(frequency_penalty=2.0) != plain
    for name in ("presence_penalty", "frequency_penalty"):
        with pytest.raises(openai.BadRequestError) as info:
            client.completions.create(model="tiny", prompt="Once", max_tokens=2, **{name: 2.5})
        assert info.value.param == name


def test_a_remote_server_gets_the_penalties(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("Hi"), chunk(finish="stop"), DONE])
    backend = backends.make(server)
    drain(backend.chat([ChatMessage("user", "Hi")], SamplingParams(presence_penalty=0.5, frequency_penalty=-1.0)))
    body = server.generate_requests()[-1].body
    assert (body["presence_penalty"], body["frequency_penalty"]) == (0.5, -1.0)
    server.stream([chunk("Hi"), chunk(finish="stop"), DONE])
    drain(backend.chat([ChatMessage("user", "Hi")], SamplingParams()))
    assert {"presence_penalty", "frequency_penalty"}.isdisjoint(server.generate_requests()[-1].body)
    params = SamplingParams(presence_penalty=0.5)
    assert SamplingParams.from_dict(params.to_dict()) == params
    assert "frequency_penalty" not in SamplingParams().to_dict()  # saved chats stay as they were


# ----- logprobs


@pytest.mark.parametrize("stream", [False, True])
def test_chat_logprobs_in_openais_shape(client: openai.OpenAI, stream: bool) -> None:
    kwargs: dict[str, Any] = {"model": "tiny", "messages": HELLO, "max_tokens": 6, "temperature": 0}
    entries: list[Any] = []
    if not stream:
        response = client.chat.completions.create(**kwargs, logprobs=True, top_logprobs=3)
        text = response.choices[0].message.content or ""
        assert response.choices[0].logprobs is not None and response.choices[0].logprobs.content is not None
        entries = response.choices[0].logprobs.content
    else:
        parts = []
        with client.chat.completions.create(**kwargs, logprobs=True, top_logprobs=3, stream=True) as chunks:
            for chunk in chunks:
                for choice in chunk.choices:
                    parts.append(choice.delta.content or "")
                    if choice.logprobs is not None and choice.logprobs.content:
                        entries.extend(choice.logprobs.content)
        text = "".join(parts)
    assert len(entries) == 6  # one per token (max_tokens=6, greedy)
    # a token may be part of a character (the tiny model has byte tokens): its bytes are exact
    assert bytes(b for e in entries for b in e.bytes or []).decode("utf-8", errors="replace") == text
    for e in entries:
        assert e.logprob <= 0 and e.token == bytes(e.bytes or []).decode("utf-8", errors="replace")
        assert len(e.top_logprobs) == 3
        assert [t.logprob for t in e.top_logprobs] == sorted((t.logprob for t in e.top_logprobs), reverse=True)
        assert e.top_logprobs[0].token == e.token and e.top_logprobs[0].logprob == pytest.approx(e.logprob)  # greedy
    plain = client.chat.completions.create(**kwargs)
    assert plain.choices[0].logprobs is None and plain.choices[0].message.content == text


def test_logprobs_of_a_remote_model_are_refused(server: FakeOpenAI) -> None:
    """Ember in front of a remote server has no logits to give: a 400, not an empty list."""
    with in_front_of_remote(server.base_url) as raw:
        body = {"model": "test-model", "messages": HELLO, "logprobs": True}
        assert_error(raw.post("/v1/chat/completions", json=body), 400, "logprobs")


def test_completion_logprobs_in_the_legacy_shape(client: openai.OpenAI) -> None:
    response = client.completions.create(model="tiny", prompt="Once", max_tokens=5, temperature=0, logprobs=2)
    logprobs = response.choices[0].logprobs
    assert logprobs is not None and logprobs.tokens is not None and len(logprobs.tokens) == 5
    assert logprobs.token_logprobs is not None and all(lp <= 0 for lp in logprobs.token_logprobs)
    assert logprobs.top_logprobs is not None and all(len(top) <= 2 for top in logprobs.top_logprobs)
    assert logprobs.text_offset is not None and logprobs.text_offset[0] == 0
    offsets = logprobs.text_offset
    assert all(offsets[i + 1] == offsets[i] + len(logprobs.tokens[i]) for i in range(4))


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"logprobs": "yes"}, "logprobs"),
    ],
)
def test_bad_logprobs_are_400(http: httpx2.Client, body: dict[str, Any], param: str) -> None:
    assert_error(http.post("/v1/chat/completions", json=chat_body(**body)), 400, param)


# ----- n samples


def _single(c: openai.OpenAI, seed: int) -> str:
    r = c.chat.completions.create(model="tiny", messages=HELLO, max_tokens=6, temperature=1.0, seed=seed)
    return r.choices[0].message.content or ""


def test_n_samples_with_distinct_seeds(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=6, temperature=1.0, seed=77, n=3)
    assert [c.index for c in response.choices] == [0, 1, 2]
    texts = [c.message.content or "" for c in response.choices]
    assert texts == [_single(client, 77 + i) for i in range(3)]  # sample i is seed + i
    assert len(set(texts)) > 1
    assert all(c.finish_reason in ("stop", "length") for c in response.choices)
    assert response.usage is not None
    ember = (response.model_extra or {})["ember"]
    assert response.usage.completion_tokens == sum(m["output_tokens"] for m in ember["choices"])

    completions = client.completions.create(model="tiny", prompt="Once", max_tokens=4, temperature=1.0, seed=5, n=2)
    assert [c.index for c in completions.choices] == [0, 1]


def test_n_samples_streamed_with_their_index(client: openai.OpenAI) -> None:
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    usage = None
    with client.chat.completions.create(
        model="tiny", messages=HELLO, max_tokens=6, temperature=1.0, seed=77, n=3, stream=True,
        stream_options={"include_usage": True},
    ) as chunks:  # fmt: skip
        for chunk in chunks:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
                if choice.finish_reason:
                    finishes[choice.index] = choice.finish_reason
    assert sorted(finishes) == [0, 1, 2]
    assert [texts[i] for i in range(3)] == [_single(client, 77 + i) for i in range(3)]
    assert usage is not None and usage.completion_tokens > 0


# ----- model alias


def test_model_alias(tiny_service: EngineService, serve: Callable[[EngineService, ServerConfig], ApiServer]) -> None:
    server = serve(tiny_service, ServerConfig(port=0, alias="gpt-4o-mini"))
    with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as c:
        assert [m.id for m in c.models.list().data] == ["gpt-4o-mini"]
        response = c.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], max_tokens=2
        )
        assert response.model == "gpt-4o-mini"
        assert c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        with pytest.raises(openai.NotFoundError):
            c.chat.completions.create(model="other", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    with httpx2.Client(timeout=WAIT_S) as raw:
        assert raw.get(f"http://127.0.0.1:{server.port}/health").json()["model"] == "gpt-4o-mini"


def test_serve_cli_alias_and_allow_unknown_fields(tiny_model: Path) -> None:
    """`ember-chat serve --alias NAME --allow-unknown-fields`, as a user runs it."""
    options = ("--alias", "gpt-4o-mini", "--allow-unknown-fields")
    with (
        ember_server(tiny_model, threads=1, n_ctx=512, extra=options) as url,
        openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=WAIT_S) as c,
    ):
        assert c.models.list().data[0].id == "gpt-4o-mini"  # (then the other installed models, loaded on demand)
        response = c.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], max_tokens=2, extra_body={"x_vendor": 1}
        )
        assert response.model == "gpt-4o-mini" and response.choices[0].finish_reason in ("stop", "length")


def test_serve_cli_unknown_field_400_names_its_flag_and_the_flag_works(tiny_model: Path) -> None:
    """Issue 28, item 15: the 400 for an unknown field says how to have it ignored on the server that
    answered (`ember-chat serve`: its flag); /tokenize said nothing of it (nor its code). Following the
    advice as written makes the same requests pass."""
    hello: Any = [{"role": "user", "content": "Hi"}]

    def ask(url: str) -> tuple[openai.ChatCompletion, httpx2.Response]:
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=WAIT_S) as c:
            model = c.models.list().data[0].id
            answer = c.chat.completions.create(model=model, messages=hello, max_tokens=2, extra_body={"x_vendor": 1})
        tokenize = httpx2.post(
            url.removesuffix("/v1") + "/tokenize", json={"content": "Hi", "x_vendor": 1}, timeout=WAIT_S
        )
        return answer, tokenize

    with ember_server(tiny_model, threads=1, n_ctx=512) as url:
        with pytest.raises(openai.BadRequestError) as refused:
            ask(url)
        error = refused.value.body
        assert isinstance(error, dict) and error["code"] == "unknown_field"
        message = error["message"]
        with httpx2.Client(timeout=WAIT_S) as raw:
            tokenize = raw.post(url.removesuffix("/v1") + "/tokenize", json={"content": "Hi", "x_vendor": 1})
        assert assert_error(tokenize, 400, "x_vendor", "unknown_field") == message
    flags = re.findall(r"--[a-z][a-z-]+", message)
    assert flags == ["--allow-unknown-fields"], message
    with ember_server(tiny_model, threads=1, n_ctx=512, extra=tuple(flags)) as url:
        answer, tokenize = ask(url)
        assert answer.choices[0].finish_reason in ("stop", "length") and tokenize.status_code == 200
