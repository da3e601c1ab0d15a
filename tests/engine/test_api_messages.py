"""Anthropic's Messages API on Ember's server (/v1/messages, /v1/messages/count_tokens), through the
official `anthropic` client: a Message and its usage as the chat route's for the same conversation, its
stream of events (and their `event:` lines on the wire), count_tokens equal to the chat route's prompt
tokens, the stop reasons (scripted tiny models: max_tokens, stop_sequence, end_turn), a thinking
model's thinking block, a tool round trip (tool_use, then tool_result) on tests/helpers/api_tools.py's
scripted ToolBackend, images, the key as x-api-key, and every error in Anthropic's shape."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.request_log import HttpExchange
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import WAIT_S
from tests.helpers.api_tools import CALL_TOKENS, WEATHER, ToolBackend, tool_server, weather
from tests.helpers.gguf_factory import CHATML_TEMPLATE, TinySpec, says, write_tiny_model
from tests.helpers.images import png
from tests.helpers.scripted_backend import FailsMidway

# WEATHER in Anthropic's shape
TOOL: Any = {"name": "get_weather", "description": WEATHER["function"]["description"],
             "input_schema": WEATHER["function"]["parameters"]}  # fmt: skip
ASK = "What is the weather in Paris?"
HI: Any = [{"role": "user", "content": "hi"}]
# (the current client has no temperature, top_p nor top_k; older clients and agents send them)
GREEDY = {"temperature": 0}


def _client(server: ApiServer, key: str = "unused") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key=key, max_retries=0, timeout=WAIT_S)


def _text(message: Any) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def assert_anthropic_error(response: httpx2.Response, status: int, kind: str, *named: str) -> str:
    """An error in Anthropic's shape, no stack trace, its message naming `named`; returns the message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert "Traceback" not in response.text
    body = response.json()
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert set(body["error"]) == {"type", "message"} and body["error"]["type"] == kind
    message = str(body["error"]["message"])
    for name in named:
        assert name in message, (name, message)
    return message


@pytest.fixture
def messages(tiny_server: ApiServer) -> Iterator[anthropic.Anthropic]:
    with _client(tiny_server) as c:
        yield c


# ----- the tiny model


def test_a_message_and_its_usage_as_the_chat_routes(messages: anthropic.Anthropic, client: openai.OpenAI) -> None:
    message = messages.messages.create(
        model="tiny", system="Be brief.", messages=HI, max_tokens=6, metadata={"user_id": "u1"}, extra_body=GREEDY
    )
    chat = client.chat.completions.create(
        model="tiny", messages=[{"role": "system", "content": "Be brief."}, *HI], max_tokens=6, temperature=0
    )
    assert message.id.startswith("msg_") and message.type == "message" and message.role == "assistant"
    assert message.model == "tiny" and [b.type for b in message.content] == ["text"]
    assert _text(message) == chat.choices[0].message.content  # greedy: the same answer as the chat route's
    wanted = {"length": "max_tokens", "stop": "end_turn"}[chat.choices[0].finish_reason]
    assert message.stop_reason == wanted and message.stop_sequence is None
    assert chat.usage is not None and message.usage.cache_read_input_tokens is not None
    # Anthropic's input_tokens are those not read from the cache (the chat route's cached_tokens)
    assert message.usage.input_tokens + message.usage.cache_read_input_tokens == chat.usage.prompt_tokens
    assert message.usage.output_tokens == chat.usage.completion_tokens


def test_the_stream_of_events(messages: anthropic.Anthropic, http: httpx2.Client) -> None:
    whole = messages.messages.create(model="tiny", messages=HI, max_tokens=6, extra_body=GREEDY)
    with messages.messages.stream(model="tiny", messages=HI, max_tokens=6, extra_body=GREEDY) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [e.type for e in events if e.type not in ("text",)]  # ("text": the helper's own, per delta)
    assert kinds[:3] == ["message_start", "content_block_start", "content_block_delta"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    deltas = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert deltas == _text(final) == _text(whole)
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens
    assert final.id.startswith("msg_") and final.model == "tiny"
    raw = list(messages.messages.create(model="tiny", messages=HI, max_tokens=2, stream=True))
    assert raw[0].type == "message_start" and raw[-1].type == "message_stop"
    # on the wire: an `event:` line naming each event's type, and no [DONE]
    body = {"model": "tiny", "messages": HI, "max_tokens": 2, "stream": True}
    with http.stream("POST", "/v1/messages", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        text = r.read().decode()
    blocks = [b for b in text.split("\n\n") if b]
    for block in blocks:
        event, data = block.split("\n")
        assert event.removeprefix("event: ") == json.loads(data.removeprefix("data: "))["type"]
    assert "[DONE]" not in text


def test_count_tokens_is_the_chat_routes_prompt(messages: anthropic.Anthropic, client: openai.OpenAI) -> None:
    turns: Any = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]},
        {"role": "user", "content": [{"type": "text", "text": "Tell me"}, {"type": "text", "text": "more."}]},
    ]
    counted = messages.messages.count_tokens(model="tiny", system="Be brief.", messages=turns)
    chat = client.chat.completions.create(
        model="tiny",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello there."},
            {"role": "user", "content": [{"type": "text", "text": "Tell me"}, {"type": "text", "text": "more."}]},
        ],
        max_tokens=1,
    )
    assert chat.usage is not None and counted.input_tokens == chat.usage.prompt_tokens
    short = messages.messages.count_tokens(model="tiny", messages=HI)
    assert 0 < short.input_tokens < counted.input_tokens
    message = messages.messages.create(model="tiny", messages=HI, max_tokens=1)
    assert message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0) == short.input_tokens


def test_bad_bodies_are_400s_in_anthropics_shape_naming_the_field(http: httpx2.Client) -> None:
    def post(path: str = "/v1/messages", **body: Any) -> httpx2.Response:
        return http.post(path, json={"model": "tiny", "messages": HI, "max_tokens": 4, **body})

    bad = "invalid_request_error"
    assert_anthropic_error(post(frobnicate=1), 400, bad, "frobnicate")
    assert_anthropic_error(http.post("/v1/messages", json={"model": "tiny", "messages": HI}), 400, bad, "max_tokens")
    assert_anthropic_error(post(max_tokens=-1), 400, bad, "max_tokens")
    assert_anthropic_error(post(temperature="hot"), 400, bad, "temperature")
    assert_anthropic_error(post(top_k=-5), 400, bad, "top_k")
    assert_anthropic_error(post(messages=[]), 400, bad, "messages")
    assert_anthropic_error(post(messages=[{"role": "system", "content": "x"}]), 400, bad, "messages[0].role")
    document = [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]
    assert_anthropic_error(post(messages=[{"role": "user", "content": document}]), 400, bad, "document")
    assert_anthropic_error(post(system=[{"type": "image"}]), 400, bad, "system")
    assert_anthropic_error(post(tools=[{"type": "web_search_20250305", "name": "web_search"}]), 400, bad,
                           "tools", "web_search_20250305")  # fmt: skip
    assert_anthropic_error(post(tools=[{"name": "x"}]), 400, bad, "input_schema")
    assert_anthropic_error(post(tools=[TOOL], tool_choice={"type": "sometimes"}), 400, bad, "tool_choice")
    assert_anthropic_error(post(tool_choice={"type": "any"}), 400, bad, "tool_choice")  # (no tools to choose)
    assert_anthropic_error(post(thinking={"type": "maybe"}), 400, bad, "thinking")
    assert_anthropic_error(post(stop_sequences="end"), 400, bad, "stop_sequences")
    assert_anthropic_error(post(stream="yes"), 400, bad, "stream")
    assert_anthropic_error(post(metadata="me"), 400, bad, "metadata")
    assert_anthropic_error(http.post("/v1/messages", json=[1]), 400, bad)
    assert_anthropic_error(http.post("/v1/messages", content=b"{", headers={"content-type": "application/json"}),
                           400, bad, "JSON")  # fmt: skip
    assert_anthropic_error(post("/v1/messages/count_tokens", max_tokens=None), 400, bad, "max_tokens")
    assert_anthropic_error(http.post("/v1/messages/count_tokens", json={"model": "tiny", "messages": "hi"}), 400,
                           bad, "messages")  # fmt: skip
    assert_anthropic_error(http.get("/v1/messages"), 405, bad)
    assert_anthropic_error(http.post("/v1/messages/batches", json={}), 404, "not_found_error")


def test_a_field_of_the_wrong_type_is_named_by_its_place(http: httpx2.Client) -> None:
    """The envelope of a /v1/messages or count_tokens body is typed (messages_input.MessagesEnvelope,
    CountTokensEnvelope), its 400s in Anthropic's shape: a wrong item is named by its place, and a field
    Ember knows but ignores (service_tier, workspace_id, cache_control) is still of its type (they were
    taken whatever they were)."""
    bad = "invalid_request_error"
    cases = [
        ("/v1/messages", {"stop_sequences": ["end", ""]}, "stop_sequences[1] must be a non-empty string (not '')."),
        ("/v1/messages", {"stop_sequences": ["end", 1]},
         "stop_sequences[1] must be a non-empty string (not the integer 1)."),
        ("/v1/messages", {"service_tier": 1}, "service_tier must be a string (not the integer 1)."),
        ("/v1/messages", {"metadata": "me"}, "metadata must be an object (not 'me')."),
        ("/v1/messages/count_tokens", {"workspace_id": ["w"]}, "workspace_id must be a string (not an array)."),
        ("/v1/messages/count_tokens", {"cache_control": "ephemeral"},
         "cache_control must be an object (not 'ephemeral')."),
    ]  # fmt: skip
    for path, fields, message in cases:
        body = {"model": "tiny", "messages": HI, **fields}
        if path == "/v1/messages":
            body["max_tokens"] = 4
        assert assert_anthropic_error(http.post(path, json=body), 400, bad) == message


def test_an_unknown_model_is_a_404_not_found_error(messages: anthropic.Anthropic, http: httpx2.Client) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        messages.messages.create(model="claude-opus-4", messages=HI, max_tokens=4)
    assert isinstance(missing.value.body, dict) and missing.value.body["error"]["type"] == "not_found_error"
    assert "claude-opus-4" in missing.value.body["error"]["message"]
    with pytest.raises(anthropic.NotFoundError):
        messages.messages.count_tokens(model="claude-opus-4", messages=HI)
    r = http.post("/v1/messages", json={"model": "nope", "messages": HI, "max_tokens": 4, "stream": True})
    assert_anthropic_error(r, 404, "not_found_error", "nope", "tiny")


def test_the_request_log_counts_a_message_as_a_generation() -> None:
    """The window lists a generation once, from the engine's report with its metrics (api_control.py)."""
    assert HttpExchange(0.0, "POST", "/v1/messages", 200, "127.0.0.1", 0.1).generation
    assert not HttpExchange(0.0, "POST", "/v1/messages/count_tokens", 200, "127.0.0.1", 0.1).generation


# ----- the key: x-api-key as well as Authorization: Bearer, on every route


def test_the_key_as_x_api_key(serve: Callable[[EngineService, ServerConfig], ApiServer], tiny_service: EngineService,
                              ) -> None:  # fmt: skip
    server = serve(tiny_service, ServerConfig(port=0, api_key="sesame"))
    with _client(server, "sesame") as good:
        assert good.messages.count_tokens(model="tiny", messages=HI).input_tokens > 0
    with _client(server, "wrong") as wrong, pytest.raises(anthropic.AuthenticationError) as refused:
        wrong.messages.create(model="tiny", messages=HI, max_tokens=2)
    assert isinstance(refused.value.body, dict) and refused.value.body["error"]["type"] == "authentication_error"
    root = f"http://127.0.0.1:{server.port}"
    with httpx2.Client(base_url=root, timeout=WAIT_S) as http:
        body = {"model": "tiny", "messages": HI, "max_tokens": 2}
        assert_anthropic_error(http.post("/v1/messages", json=body), 401, "authentication_error")  # no key
        assert_anthropic_error(http.post("/v1/messages/count_tokens", json={"model": "tiny", "messages": HI},
                                         headers={"x-api-key": "sesame2"}), 401, "authentication_error")  # fmt: skip
        bearer = http.post("/v1/messages", json=body, headers={"Authorization": "Bearer sesame"})
        assert bearer.status_code == 200 and bearer.json()["type"] == "message"
        # every route takes it; the OpenAI routes answer a wrong one in OpenAI's shape
        assert http.get("/v1/models", headers={"x-api-key": "sesame"}).status_code == 200
        assert http.get("/metrics", headers={"x-api-key": "sesame"}).status_code == 200
        wrong_key = http.get("/v1/models", headers={"x-api-key": "sesam"})
        assert wrong_key.status_code == 401 and wrong_key.json()["error"]["code"] == "invalid_api_key"
        assert http.get("/v1/models").status_code == 401


def test_a_body_over_the_limit_is_a_413_in_anthropics_shape(
    serve: Callable[[EngineService, ServerConfig], ApiServer], tiny_service: EngineService
) -> None:
    server = serve(tiny_service, ServerConfig(port=0, max_body_bytes=1000))
    with httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as http:
        big = {"model": "tiny", "messages": [{"role": "user", "content": "x" * 2000}], "max_tokens": 2}
        assert_anthropic_error(http.post("/v1/messages", json=big), 413, "request_too_large", "1,000")


# ----- scripted tiny models: the stop reasons, a thinking model's thinking block

THINKING_TEMPLATE = CHATML_TEMPLATE.replace("'<|im_start|>assistant\n'", "'<|im_start|>assistant\n<think>\n'")


def _scripted(tmp_path_factory: pytest.TempPathFactory, name: str, spec: TinySpec) -> Iterator[anthropic.Anthropic]:
    path = write_tiny_model(tmp_path_factory.mktemp(name) / f"tiny-{name}.gguf", spec)
    service = EngineService()
    server = ApiServer(service, ServerConfig(port=0))
    try:
        load_blocking(service, LoadConfig(path, n_ctx=1024, threads=1), name)
        server.start()
        with _client(server) as c:
            yield c
    finally:
        server.stop()
        service.close()


@pytest.fixture(scope="module")
def words(tmp_path_factory: pytest.TempPathFactory) -> Iterator[anthropic.Anthropic]:
    """A model that answers " hello world!" and ends."""
    yield from _scripted(tmp_path_factory, "words", TinySpec(script=says("▁hello", "▁world", "!", "</s>")))


@pytest.fixture(scope="module")
def thinker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[anthropic.Anthropic]:
    spec = TinySpec(think_tokens=True, chat_template=THINKING_TEMPLATE,
                    script=says("▁hello", "▁world", "</think>", "▁Ember", "!", "</s>"))  # fmt: skip
    yield from _scripted(tmp_path_factory, "think", spec)


def test_the_stop_reasons(words: anthropic.Anthropic) -> None:
    done = words.messages.create(model="words", messages=HI, max_tokens=20)
    assert (_text(done), done.stop_reason, done.stop_sequence) == (" hello world!", "end_turn", None)
    cut = words.messages.create(model="words", messages=HI, max_tokens=1)
    assert (_text(cut), cut.stop_reason, cut.usage.output_tokens) == (" hello", "max_tokens", 1)
    stopped = words.messages.create(model="words", messages=HI, max_tokens=20, stop_sequences=["world"])
    assert (_text(stopped), stopped.stop_reason, stopped.stop_sequence) == (" hello ", "stop_sequence", "world")
    with words.messages.stream(model="words", messages=HI, max_tokens=20, stop_sequences=["world"]) as stream:
        final = stream.get_final_message()
    assert (_text(final), final.stop_reason, final.stop_sequence) == (" hello ", "stop_sequence", "world")
    # with several, the engine does not say which one it met: stop_sequence is null, not a guess
    either = words.messages.create(model="words", messages=HI, max_tokens=20, stop_sequences=["world", "xyz"])
    assert (either.stop_reason, either.stop_sequence) == ("stop_sequence", None)


def test_count_tokens_with_tools_and_over_the_context(words: anthropic.Anthropic) -> None:
    """The tools are in the prompt as the chat route puts them there; a conversation over the context is
    counted all the same (a client counts to know whether to shorten it), and sent, it is a 400."""
    counted = words.messages.count_tokens(model="words", messages=HI, tools=[TOOL]).input_tokens
    with openai.OpenAI(base_url=str(words.base_url).rstrip("/") + "/v1", api_key="unused", max_retries=0) as chat:
        answer = chat.chat.completions.create(model="words", messages=HI, tools=[WEATHER], max_tokens=2)  # type: ignore[list-item]
    assert answer.usage is not None and counted == answer.usage.prompt_tokens
    assert counted > words.messages.count_tokens(model="words", messages=HI).input_tokens
    long: Any = [{"role": "user", "content": "hello " * 1500}]
    assert words.messages.count_tokens(model="words", messages=long).input_tokens > 1024
    with pytest.raises(anthropic.BadRequestError) as refused:
        words.messages.create(model="words", messages=long, max_tokens=4)
    assert isinstance(refused.value.body, dict) and "context" in refused.value.body["error"]["message"]


def test_a_thinking_models_thinking_block(thinker: anthropic.Anthropic) -> None:
    message = thinker.messages.create(model="think", messages=HI, max_tokens=12,
                                      thinking={"type": "enabled", "budget_tokens": 1024})  # fmt: skip
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking == " hello world"
    assert text.type == "text" and text.text == " Ember!" and message.stop_reason == "end_turn"
    with thinker.messages.stream(model="think", messages=HI, max_tokens=12) as stream:
        events = list(stream)
        final = stream.get_final_message()
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    thought = "".join(d.thinking for d in deltas if d.type == "thinking_delta")
    said = "".join(d.text for d in deltas if d.type == "text_delta")
    assert (thought, said) == (" hello world", " Ember!")
    assert [b.type for b in final.content] == ["thinking", "text"] and final.content[0].thinking == " hello world"  # type: ignore[union-attr]
    # the next turn sends the thinking block back; it is left out, as a chat client leaves out reasoning
    again: Any = [*HI, {"role": "assistant", "content": [b.model_dump() for b in message.content]},
                  {"role": "user", "content": "and?"}]  # fmt: skip
    plain: Any = [*HI, {"role": "assistant", "content": " Ember!"}, {"role": "user", "content": "and?"}]
    assert (thinker.messages.count_tokens(model="think", messages=again).input_tokens
            == thinker.messages.count_tokens(model="think", messages=plain).input_tokens)  # fmt: skip


# ----- a tool round trip, on a scripted model


@pytest.fixture(scope="module")
def tools_setup() -> Iterator[tuple[ToolBackend, ApiServer]]:
    with tool_server() as setup:
        yield setup


@pytest.fixture
def tools(tools_setup: tuple[ToolBackend, ApiServer]) -> Iterator[tuple[ToolBackend, anthropic.Anthropic]]:
    backend, server = tools_setup
    backend.reset()
    with _client(server) as c:
        yield backend, c


def test_a_tool_round_trip(tools: tuple[ToolBackend, anthropic.Anthropic]) -> None:
    backend, client = tools
    backend.preamble = "Let me look."
    asked: Any = [{"role": "user", "content": ASK}]
    first = client.messages.create(model="tools", messages=asked, tools=[TOOL], max_tokens=100)
    text, call = first.content
    assert text.type == "text" and text.text == "Let me look. "
    assert call.type == "tool_use" and call.name == "get_weather" and call.input == {"city": "Paris"} and call.id
    assert first.stop_reason == "tool_use" and first.usage.output_tokens == 3 + CALL_TOKENS
    tool_request = backend.tools[-1]
    assert tool_request is not None and [t.name for t in tool_request.tools] == ["get_weather"]
    spec = tool_request.tools[0]
    assert spec.description == TOOL["description"] and spec.parameters == TOOL["input_schema"]
    result = weather(**call.input)  # type: ignore[arg-type]
    turns: Any = [
        *asked,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": result}]},
    ]
    second = client.messages.create(model="tools", messages=turns, tools=[TOOL], max_tokens=100)
    assert _text(second) == f"Here is what I found: {result}" and second.stop_reason == "end_turn"
    history = backend.requests[-1]
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[1].content == "Let me look. " and history[1].tool_calls[0].id == call.id
    assert history[1].tool_calls[0].arguments == {"city": "Paris"}
    assert history[2].tool_call_id == call.id and history[2].content == result


def test_the_round_trip_streamed(tools: tuple[ToolBackend, anthropic.Anthropic]) -> None:
    backend, client = tools
    asked: Any = [{"role": "user", "content": ASK}]
    with client.messages.stream(model="tools", messages=asked, tools=[TOOL], max_tokens=100) as stream:
        events = list(stream)
        first = stream.get_final_message()
    pieces = [e.delta.partial_json for e in events if e.type == "content_block_delta"
              and e.delta.type == "input_json_delta"]  # fmt: skip
    (call,) = first.content
    assert call.type == "tool_use" and json.loads("".join(pieces)) == call.input == {"city": "Paris"}
    assert first.stop_reason == "tool_use"
    result = weather("Paris")
    turns: Any = [
        *asked,
        {"role": "assistant", "content": [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": [{"type": "text", "text": result}]},
            {"type": "text", "text": "Thanks."}]},
    ]  # fmt: skip
    with client.messages.stream(model="tools", messages=turns, tools=[TOOL], max_tokens=100) as stream:
        second = stream.get_final_message()
    history = backend.requests[-1]
    # the user's words after the results: the tool message, then the user's (to which the ToolBackend calls again)
    assert [m.role for m in history] == ["user", "assistant", "tool", "user"] and history[3].content == "Thanks."
    assert history[2].content == result and second.stop_reason == "tool_use"


def test_tool_choice(tools: tuple[ToolBackend, anthropic.Anthropic]) -> None:
    backend, client = tools
    asked: Any = [{"role": "user", "content": ASK}]
    for choice, wanted, parallel in (
        ({"type": "auto"}, "auto", True),
        ({"type": "any"}, "required", True),
        ({"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}, "get_weather", False),
        ({"type": "none"}, "none", True),
    ):
        client.messages.create(model="tools", messages=asked, tools=[TOOL], tool_choice=choice, max_tokens=50)
        request = backend.tools[-1]
        assert request is not None and (request.choice, request.parallel) == (wanted, parallel)


def test_sampling_and_output_config_reach_the_engine(tools: tuple[ToolBackend, anthropic.Anthropic]) -> None:
    backend, client = tools
    client.messages.create(model="tools", messages=HI, max_tokens=7, stop_sequences=["END"], speed="fast",
                           extra_body={"temperature": 0.3, "top_p": 0.8, "top_k": 12})  # fmt: skip
    params = backend.params[-1]
    assert (params.max_tokens, params.temperature, params.top_p, params.top_k) == (7, 0.3, 0.8, 12)
    assert params.stop == ("END",)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    output: Any = {"effort": "low", "format": {"type": "json_schema", "schema": schema}}
    client.messages.create(model="tools", messages=HI, max_tokens=7, output_config=output)
    wanted = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    assert backend.params[-1].response_format == wanted


def test_an_image_reaches_the_model_as_the_chat_routes_image(tools: tuple[ToolBackend, anthropic.Anthropic]) -> None:
    backend, client = tools
    image = png((200, 30, 30))
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(image.data).decode()}
    content: Any = [{"type": "image", "source": source}, {"type": "text", "text": "What colour?"}]
    client.messages.create(model="tools", messages=[{"role": "user", "content": content}], max_tokens=10)
    (asked,) = backend.requests[-1]
    assert asked.content == "What colour?" and [i.sha256 for i in asked.images] == [image.sha256]
    url: Any = [{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model="tools", messages=[{"role": "user", "content": url}], max_tokens=10)
    assert isinstance(refused.value.body, dict) and "base64" in refused.value.body["error"]["message"]


def test_a_stream_that_fails_after_it_opened_ends_with_an_error_event(
    serve: Callable[[EngineService, ServerConfig], ApiServer],
) -> None:
    backend = FailsMidway()
    service = EngineService(backend_factory=lambda ref: backend)
    try:
        load_blocking(service, LoadConfig(Path("fails.gguf")), "fails")
        server = serve(service, ServerConfig(port=0))
        with _client(server) as client:
            seen: list[str] = []
            with pytest.raises(anthropic.APIStatusError) as failed:
                for event in client.messages.create(model="fails", messages=HI, max_tokens=8, stream=True):
                    seen.append(event.type)
            assert seen[-1] == "content_block_delta" and "message_stop" not in seen
            assert isinstance(failed.value.body, dict) and failed.value.body["error"]["type"] == "api_error"
            with pytest.raises(anthropic.InternalServerError):  # (not streamed: the error is the response)
                client.messages.create(model="fails", messages=HI, max_tokens=8)
    finally:
        service.close()
