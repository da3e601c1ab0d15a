"""Tool calling through Ember's API server, driven by the official `openai` client's tool loop (plain
and streamed, with its streaming helpers): `tools`, `tool_choice`, `parallel_tool_calls` reach the
engine as a ToolRequest, the model's calls come back as `message.tool_calls` (streamed as
`delta.tool_calls`), and the client's `tool` messages go back to the model.

`ToolBackend` answers like the local runtime does with tools (ToolCallParsed events, then
Finished(reason "tool_calls")); engine/test_api_tools_runtime.py uses the real local runtime on a tiny GGUF,
where tool_choice required / a named tool makes the grammar force a valid call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pydantic
import pytest

from ember_chat.engine.core.tools import ToolCall
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import WAIT_S, assert_error
from tests.helpers.api_tools import ASK, CALL_TOKENS, WEATHER, ToolBackend, tool_server, weather

TIME = {
    "type": "function",
    "function": {"name": "get_time", "description": "The time now.", "parameters": {"type": "object"}},
}


@pytest.fixture(scope="module")
def tools_setup() -> Iterator[tuple[ToolBackend, ApiServer]]:
    with tool_server() as setup:
        yield setup


@pytest.fixture
def backend(tools_setup: tuple[ToolBackend, ApiServer]) -> ToolBackend:
    """The module's backend, as each test starts: one call planned, no preamble, no requests yet."""
    backend = tools_setup[0]
    backend.reset()
    return backend


@pytest.fixture
def client(tools_setup: tuple[ToolBackend, ApiServer]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=tools_setup[1].url, api_key="unused", max_retries=0, timeout=WAIT_S) as c:
        yield c


@pytest.fixture
def http(tools_setup: tuple[ToolBackend, ApiServer]) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=f"http://127.0.0.1:{tools_setup[1].port}", timeout=WAIT_S) as c:
        yield c


def run_tool(name: str, arguments: str) -> str:
    args = json.loads(arguments)
    assert name == "get_weather"
    return weather(**args)


# ----- the tool loop


def test_the_openai_tool_loop(client: openai.OpenAI, backend: ToolBackend) -> None:
    backend.plan = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo", "unit": "F"})]
    messages: list[Any] = list(ASK)
    first = client.chat.completions.create(model="tools", messages=messages, tools=[WEATHER, TIME])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None  # nothing said besides the calls
    calls = choice.message.tool_calls
    assert calls is not None and [c.type for c in calls] == ["function", "function"]
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == backend.plan
    assert len({c.id for c in calls}) == 2 and all(c.id for c in calls)
    assert first.usage is not None and first.usage.completion_tokens == 2 * CALL_TOKENS  # the calls' tokens
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens == 12 + 10
    # the engine got the tools as a ToolRequest
    request = backend.tools[-1]
    assert request is not None and request.choice == "auto" and request.parallel
    assert [t.name for t in request.tools] == ["get_weather", "get_time"]
    assert request.tools[0].parameters == WEATHER["function"]["parameters"]
    assert request.tools[0].description == "The weather now in a city."

    messages.append(choice.message.model_dump(exclude_none=True))  # the assistant turn, as the SDK gives it
    for call in calls:
        result = run_tool(call.function.name, call.function.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    second = client.chat.completions.create(model="tools", messages=messages, tools=[WEATHER, TIME])
    answer = second.choices[0]
    assert answer.finish_reason == "stop" and answer.message.tool_calls is None
    assert answer.message.content == "Here is what I found: Paris: 15 °C; Oslo: 12 °F"
    # the history reached the engine with its calls and results
    history = backend.requests[-1]
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool"]
    assert history[1].tool_calls == (
        ToolCall(calls[0].id, "get_weather", {"city": "Paris"}, calls[0].function.arguments),
        ToolCall(calls[1].id, "get_weather", {"city": "Oslo", "unit": "F"}, calls[1].function.arguments),
    )
    assert [m.tool_call_id for m in history[2:]] == [calls[0].id, calls[1].id]


def test_tool_calls_stream_as_openai_streams_them(client: openai.OpenAI, backend: ToolBackend) -> None:
    backend.preamble = "Let me check."
    backend.plan = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]
    chunks = list(
        client.chat.completions.create(
            model="tools", messages=ASK, tools=[WEATHER], stream=True, stream_options={"include_usage": True}
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    assert "".join(d.content or "" for d in deltas) == "Let me check. "
    pieces = [tc for d in deltas for tc in d.tool_calls or []]
    for index in (0, 1):  # each call opens with its id, type, name and empty arguments; fragments follow
        mine = [p for p in pieces if p.index == index]
        head, rest = mine[0], mine[1:]
        assert head.id and head.type == "function" and head.function is not None
        assert head.function.name == "get_weather" and head.function.arguments == ""
        assert rest and all(p.id is None and p.function is not None and p.function.name is None for p in rest)
        arguments = "".join(p.function.arguments or "" for p in rest if p.function is not None)
        assert json.loads(arguments) == backend.plan[index][1]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[:-1] == [None] * (len(finishes) - 1) and finishes[-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3 + 2 * CALL_TOKENS


def test_thinking_before_the_calls_is_reasoning_content(client: openai.OpenAI, backend: ToolBackend) -> None:
    backend.preamble = "<think> Paris first. </think>"
    response = client.chat.completions.create(model="tools", messages=ASK, tools=[WEATHER])
    message = response.choices[0].message
    assert (message.model_extra or {})["reasoning_content"].strip() == "Paris first."
    assert (
        message.content is None and message.tool_calls is not None and response.choices[0].finish_reason == "tool_calls"
    )
    chunks = list(client.chat.completions.create(model="tools", messages=ASK, tools=[WEATHER], stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thought = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    assert thought.strip() == "Paris first." and not "".join(d.content or "" for d in deltas).strip()
    assert [tc.function.name for d in deltas for tc in d.tool_calls or [] if tc.function and tc.function.name] == [
        "get_weather"
    ]


def test_the_streaming_helpers_accumulate_the_calls(client: openai.OpenAI, backend: ToolBackend) -> None:
    backend.plan = [("get_weather", {"city": "Paris", "unit": "F"})]
    messages: list[Any] = list(ASK)
    with client.chat.completions.stream(model="tools", messages=messages, tools=[WEATHER]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_completion()
    assert "tool_calls.function.arguments.delta" in kinds and "tool_calls.function.arguments.done" in kinds
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    assert calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Paris", "unit": "F"}

    messages.append({"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]})
    result = run_tool(calls[0].function.name, calls[0].function.arguments)
    messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": result})
    with client.chat.completions.stream(model="tools", messages=messages, tools=[WEATHER]) as stream:
        text = "".join(e.delta for e in stream if e.type == "content.delta")
        done = stream.get_final_completion()
    assert text == "Here is what I found: Paris: 15 °F" == done.choices[0].message.content
    assert done.choices[0].finish_reason == "stop"


class GetWeather(pydantic.BaseModel):
    city: str
    unit: str


def test_the_parse_helpers_give_typed_arguments(client: openai.OpenAI, backend: ToolBackend) -> None:
    """Strict tools from pydantic models (`openai.pydantic_function_tool`): `parse` and `stream` give
    each call's arguments as the model's type."""
    backend.plan = [("GetWeather", {"city": "Lima", "unit": "F"})]
    tool = openai.pydantic_function_tool(GetWeather)
    parsed = client.chat.completions.parse(model="tools", messages=ASK, tools=[tool])
    calls = parsed.choices[0].message.tool_calls
    assert calls and calls[0].function.parsed_arguments == GetWeather(city="Lima", unit="F")
    with client.chat.completions.stream(model="tools", messages=ASK, tools=[tool]) as stream:
        done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
    assert [(e.name, e.parsed_arguments) for e in done] == [("GetWeather", GetWeather(city="Lima", unit="F"))]
    request = backend.tools[-1]
    assert request is not None and request.tools[0].parameters["additionalProperties"] is False


@pytest.mark.parametrize(
    ("extra", "choice", "parallel"),
    [
        ({}, "auto", True),
        ({"tool_choice": "none"}, "none", True),
        ({"tool_choice": "required", "parallel_tool_calls": False}, "required", False),
        ({"tool_choice": {"type": "function", "function": {"name": "get_time"}}}, "get_time", True),
        ({"tool_choice": "auto", "parallel_tool_calls": True}, "auto", True),
    ],
)
def test_tool_choice_and_parallel_reach_the_engine(
    client: openai.OpenAI, backend: ToolBackend, extra: dict[str, Any], choice: str, parallel: bool
) -> None:
    backend.plan = [("get_time", {})]
    response = client.chat.completions.create(model="tools", messages=ASK, tools=[WEATHER, TIME], **extra)
    request = backend.tools[-1]
    assert request is not None and (request.choice, request.parallel) == (choice, parallel)
    if choice == "none":  # no call offered: an answer in words
        assert response.choices[0].finish_reason == "stop" and response.choices[0].message.tool_calls is None
    else:
        assert response.choices[0].finish_reason == "tool_calls"


def test_each_sample_has_its_calls(client: openai.OpenAI, backend: ToolBackend) -> None:
    response = client.chat.completions.create(model="tools", messages=ASK, tools=[WEATHER], n=2)
    calls = [c.message.tool_calls for c in response.choices]
    assert [c.finish_reason for c in response.choices] == ["tool_calls", "tool_calls"]
    assert all(c is not None and [json.loads(x.function.arguments) for x in c] == [{"city": "Paris"}] for c in calls)
    assert calls[0] is not None and calls[1] is not None and calls[0][0].id != calls[1][0].id
    assert response.usage is not None and response.usage.completion_tokens == 2 * CALL_TOKENS


def test_no_tools_is_no_tool_request(client: openai.OpenAI, backend: ToolBackend) -> None:
    for extra in ({}, {"tools": []}, {"tool_choice": "none"}, {"tool_choice": "auto"}):
        response = client.chat.completions.create(model="tools", messages=ASK, **extra)
        assert backend.tools[-1] is None
        assert response.choices[0].finish_reason == "stop"


# ----- calls that must not run


def test_an_invalid_call_is_never_returned_as_a_call(
    client: openai.OpenAI, http: httpx2.Client, backend: ToolBackend
) -> None:
    """A call that fails its tool's schema (or names no tool) goes back as the text the model wrote,
    with `ember.invalid_tool_calls` saying why, and finish_reason "stop": a client never runs it."""
    backend.plan = [("get_weather", {"town": "Paris"}), ("launch", {})]
    response = client.chat.completions.create(model="tools", messages=ASK, tools=[WEATHER])
    choice = response.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    assert choice.message.content == (
        '<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>'
        '<tool_call>{"name": "launch", "arguments": {}}</tool_call>'
    )
    notes = (response.model_extra or {})["ember"]["invalid_tool_calls"]
    assert [(n["choice"], n["name"]) for n in notes] == [(0, "get_weather"), (0, "launch")]
    assert "city" in notes[0]["error"] and "launch" in notes[1]["error"]

    # one valid among invalid ones: only it is a call (index 0), streamed the same way
    backend.plan = [("launch", {}), ("get_weather", {"city": "Oslo"})]
    response = client.chat.completions.create(model="tools", messages=ASK, tools=[WEATHER])
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls is not None
    assert [c.function.name for c in choice.message.tool_calls] == ["get_weather"]
    assert choice.message.content == '<tool_call>{"name": "launch", "arguments": {}}</tool_call>'
    body = {"model": "tools", "messages": ASK, "tools": [WEATHER], "stream": True}
    with http.stream("POST", "/v1/chat/completions", json=body) as raw:
        events = [json.loads(line[6:]) for line in raw.iter_lines() if line.startswith("data: {")]
    deltas = [e["choices"][0]["delta"] for e in events if e.get("choices")]
    assert [tc["index"] for d in deltas for tc in d.get("tool_calls", [])] == [0, 0]
    assert "".join(d.get("content") or "" for d in deltas) == choice.message.content
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert [n["name"] for n in events[-1]["ember"]["invalid_tool_calls"]] == ["launch"]


# ----- validation


ROME = {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
CALLED = {"role": "assistant", "content": None, "tool_calls": [ROME]}
BROKEN = {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": {"type": "function"}}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": "two words"}}]}, "tools"),
        ({"tools": [{"type": "retrieval"}]}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]}, "tools"),
        ({"tools": [WEATHER, WEATHER]}, "tools"),
        ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_time"}}}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function"}}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"functions": [WEATHER["function"]]}, "functions"),
        ({"messages": [*ASK, {"role": "tool", "tool_call_id": "nope", "content": "x"}]}, "messages"),
        ({"messages": [*ASK, CALLED, {"role": "tool", "content": "x"}]}, "messages"),
        ({"messages": [*ASK, CALLED]}, "messages"),  # calls with no results after them
        ({"messages": [*ASK, BROKEN, {"role": "tool", "tool_call_id": "a", "content": "x"}]}, "messages"),
        ({"messages": [*ASK, {"role": "user", "content": "x", "tool_calls": CALLED["tool_calls"]}]}, "messages"),
        ({"messages": [*ASK, {"role": "function", "name": "f", "content": "x"}]}, "messages"),
    ],
)
def test_bad_tool_fields_are_400_naming_them(
    http: httpx2.Client, backend: ToolBackend, extra: dict[str, Any], param: str
) -> None:
    body = {"model": "tools", "messages": ASK, **extra}
    message = assert_error(http.post("/v1/chat/completions", json=body), 400, param)
    assert "Traceback" not in message and not backend.requests  # refused before the engine saw it


def test_tools_on_the_completions_api_are_400(http: httpx2.Client) -> None:
    body = {"model": "tools", "prompt": "Hi", "tools": [WEATHER]}
    message = assert_error(http.post("/v1/completions", json=body), 400, "tools")
    assert "/v1/chat/completions" in message
