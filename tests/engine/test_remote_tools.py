"""Tool calling through the remote backend: the request's tools and the history's calls and results go
out in OpenAI's shape, and the calls streamed back as `delta.tool_calls` are read whatever the
server's chunk shape (replayed on the fault-injecting SSE server: vLLM's, llama.cpp's, Ollama's —
the id only on a call's first chunk, its name maybe too, its arguments split anywhere, several calls
by index), checked against the tools, and given as ToolCallParsed events and Finished(reason
"tool_calls"). Last, Ember's remote backend talks to Ember's own API server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest, ToolResult, ToolSpec
from ember_chat.engine.errors import RemoteError
from ember_chat.engine.inference.events import Event, Finished, Token, ToolCallParsed
from ember_chat.engine.inference.remote.backend import RemoteBackend
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.tool_wire import tool_spec_from_openai
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_tools import WEATHER, ToolBackend
from tests.helpers.remote_support import Backends, drain
from tests.helpers.sse_server import DONE, FakeOpenAI, sse, usage_chunk

pytestmark = pytest.mark.usefixtures("no_thread_left")

SPEC = tool_spec_from_openai(WEATHER)
CLOCK = ToolSpec("get_time", "The time now.")
TOOLS = ToolRequest((SPEC, CLOCK))
ASK = [ChatMessage("user", "Weather in Paris and Oslo?")]
PARAMS = SamplingParams(temperature=0.0, max_tokens=256)
PLAN = [("call-a1", "get_weather", {"city": "Paris"}), ("call-b2", "get_weather", {"city": "Oslo", "unit": "F"})]


def frame(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    return sse({"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "test-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})  # fmt: skip


def split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def vllm_frames(plan: list[tuple[str, str, dict[str, Any]]], preamble: str = "") -> list[str | bytes]:
    """vLLM (hermes parser): a role chunk with empty content; a call's first chunk has its index, id,
    type and name but no arguments; arguments a few characters at a time; the last fragment rides on
    the chunk with finish_reason; usage in a chunk of its own."""
    frames: list[str | bytes] = [frame({"role": "assistant", "content": ""})]
    frames += [frame({"content": w + " "}) for w in preamble.split(" ") if preamble]
    for index, (call_id, name, arguments) in enumerate(plan):
        frames.append(frame({"tool_calls": [{"id": call_id, "type": "function", "index": index,
                                             "function": {"name": name}}]}))  # fmt: skip
        pieces = split(json.dumps(arguments), 3)
        last = index == len(plan) - 1
        for piece in pieces[:-1] if last else pieces:
            frames.append(frame({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    frames.append(
        frame({"tool_calls": [{"index": len(plan) - 1, "function": {"arguments": pieces[-1]}}]}, "tool_calls")
    )
    return [*frames, usage_chunk(31, 40), DONE]


def llama_cpp_frames(plan: list[tuple[str, str, dict[str, Any]]], preamble: str = "") -> list[str | bytes]:
    """llama.cpp's server: a role chunk with null content; a call's first chunk has its id, name and
    the first piece of its arguments; then argument pieces of a token or so; the last chunk has
    finish_reason, an empty delta, usage and timings. A frame may arrive split in two."""
    frames: list[str | bytes] = [frame({"role": "assistant", "content": None})]
    frames += [frame({"content": w + " "}) for w in preamble.split(" ") if preamble]
    for index, (call_id, name, arguments) in enumerate(plan):
        pieces = split(json.dumps(arguments), 2)
        frames.append(frame({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": pieces[0]}}]}))  # fmt: skip
        frames += [frame({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in pieces[1:]]
    usage = {"prompt_tokens": 31, "completion_tokens": 40, "total_tokens": 71}
    timings = {"prompt_n": 31, "prompt_ms": 12.0, "predicted_n": 40, "predicted_ms": 80.0}
    last = frame({}, "tool_calls", usage=usage, timings=timings).encode()
    return [*frames, last[:40], last[40:], DONE]


def ollama_frames(plan: list[tuple[str, str, dict[str, Any]]], preamble: str = "") -> list[str | bytes]:
    """Ollama's /v1: every call whole in one chunk (arguments as one string), finish_reason "stop"."""
    calls = [{"id": call_id, "index": i, "type": "function", "function": {"name": name,
                                                                          "arguments": json.dumps(arguments)}}
             for i, (call_id, name, arguments) in enumerate(plan)]  # fmt: skip
    frames = [frame({"role": "assistant", "content": preamble}), frame({"role": "assistant", "content": "",
                                                                         "tool_calls": calls})]  # fmt: skip
    return [*frames, frame({"role": "assistant", "content": ""}, "stop"), usage_chunk(31, 40), DONE]


SHAPES = {"vllm": vllm_frames, "llama.cpp": llama_cpp_frames, "ollama": ollama_frames}


def calls_of(events: list[Event]) -> tuple[list[ToolCall | InvalidCall], Finished]:
    done = events[-1]
    assert isinstance(done, Finished)
    parsed = [e for e in events if isinstance(e, ToolCallParsed)]
    assert [e.index for e in parsed] == list(range(len(parsed)))
    assert tuple(e.call for e in parsed) == done.tool_calls
    return [e.call for e in parsed], done


# ----- what goes out


def test_tools_and_the_history_go_out_in_openais_shape(server: FakeOpenAI, backends: Backends) -> None:
    backend = backends.make(server)
    call = ToolCall("abc123XYZ", "get_weather", {"city": "Rome"}, '{"city": "Rome"}')
    history = [
        ChatMessage("system", "Be brief."),
        *ASK,
        ChatMessage("assistant", "Let me look.", tool_calls=(call,)),
        ChatMessage.from_tool_result(ToolResult(call.id, call.name, "Rome: 21 °C")),
        ChatMessage("assistant", "", tool_calls=(ToolCall("def456UVW", "get_time", {}),)),
        ChatMessage("tool", "12:00", tool_call_id="def456UVW"),
    ]
    for request, choice in (
        (TOOLS, "auto"),
        (ToolRequest((SPEC, CLOCK), "required", parallel=False), "required"),
        (ToolRequest((SPEC, CLOCK), "none"), "none"),
        (ToolRequest((SPEC, CLOCK), "get_time"), {"type": "function", "function": {"name": "get_time"}}),
    ):
        drain(backend.chat(history, PARAMS, tools=request))
        body = server.generate_requests()[-1].body
        assert body["tools"] == [SPEC.to_openai(), CLOCK.to_openai()]
        assert body["tool_choice"] == choice
        assert body.get("parallel_tool_calls", True) is request.parallel  # sent only when off (the default is on)
        assert "continue_final_message" not in body  # the conversation ends with results, not a partial answer
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": "abc123XYZ", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "content": "Rome: 21 °C", "tool_call_id": "abc123XYZ"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "def456UVW", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
        ]},
        {"role": "tool", "content": "12:00", "tool_call_id": "def456UVW"},
    ]  # fmt: skip
    drain(backend.chat(ASK, PARAMS))  # no tools: none of the fields
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(server.generate_requests()[-1].body)


# ----- what comes back


@pytest.mark.parametrize("shape", SHAPES)
def test_streamed_calls_are_read_in_every_servers_shape(server: FakeOpenAI, backends: Backends, shape: str) -> None:
    server.stream(SHAPES[shape](PLAN, preamble="Let me check."))
    events, done = drain(backends.make(server).chat(ASK, PARAMS, tools=TOOLS))
    calls, done = calls_of(events)
    assert calls == [ToolCall(i, n, a, json.dumps(a)) for i, n, a in PLAN]  # raw: the arguments as streamed
    assert done.reason == "tool_calls" and done.error is None
    assert done.text.split() == ["Let", "me", "check."]
    assert "".join(e.text for e in events if isinstance(e, Token)) == done.text  # calls are not answer text
    first_call = next(i for i, e in enumerate(events) if isinstance(e, ToolCallParsed))
    assert all(not isinstance(e, Token) or not e.text for e in events[first_call:])
    m = done.metrics
    assert (m.output_tokens, m.prompt_tokens, m.token_count, m.stop_reason) == (40, 31, "exact", "tool_calls")


@pytest.mark.parametrize("shape", SHAPES)
def test_a_call_alone_times_its_first_token(server: FakeOpenAI, backends: Backends, shape: str) -> None:
    """An answer that is only a call: its first fragment is the first token (TTFT), tokens spread over
    the call's chunks."""
    server.stream(SHAPES[shape](PLAN[:1]), interval_s=0.002)
    events, done = drain(backends.make(server).chat(ASK, PARAMS, tools=TOOLS))
    calls, done = calls_of(events)
    assert [(c.id, c.name, c.arguments) for c in calls] == [PLAN[0]]  # type: ignore[union-attr]
    assert done.text == "" and done.reason == "tool_calls"
    assert done.metrics.ttft_s is not None and done.metrics.ttft_s > 0 and done.metrics.output_tokens == 40


def test_odd_shapes_are_read_too(server: FakeOpenAI, backends: Backends) -> None:
    """No index (a new id opens a new call), the name repeated on every chunk, arguments as an object,
    a call without an id (it gets one), several calls in one chunk."""
    server.stream([
        frame({"role": "assistant"}),
        frame({"tool_calls": [{"id": "x1", "function": {"name": "get_weather", "arguments": '{"city": '}}]}),
        frame({"tool_calls": [{"function": {"name": "get_weather", "arguments": '"Lima"}'}}]}),
        frame({"tool_calls": [{"id": "x2", "function": {"name": "get_time", "arguments": {}}}]}),
        frame({"tool_calls": [{"index": 5, "function": {"name": "get_time"}}, {"index": 6, "id": "x4",
                              "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]}),
        frame({}, "tool_calls"),
        DONE,
    ])  # fmt: skip
    calls, done = calls_of(drain(backends.make(server).chat(ASK, PARAMS, tools=TOOLS))[0])
    assert done.reason == "tool_calls" and all(isinstance(c, ToolCall) for c in calls)
    got = [(c.id, c.name, c.arguments) for c in calls if isinstance(c, ToolCall)]
    assert got[:2] == [("x1", "get_weather", {"city": "Lima"}), ("x2", "get_time", {})]
    assert got[2][1:] == ("get_time", {}) and len(got[2][0]) == 9  # an id of Ember's own
    assert got[3] == ("x4", "get_weather", {"city": "Rome"})


def test_calls_that_must_not_run_are_invalid(server: FakeOpenAI, backends: Backends) -> None:
    plan = [
        ("c1", "get_weather", {"town": "Paris"}),  # misses the required city
        ("c2", "launch", {}),  # no such tool
        ("c3", "get_time", {}),  # fine
    ]
    frames = vllm_frames(plan)
    broken = frame({"tool_calls": [{"id": "c4", "index": 3, "type": "function",
                                    "function": {"name": "get_time", "arguments": '{"a": '}}]})  # fmt: skip
    server.stream([*frames[:-3], broken, *frames[-3:]])
    calls, done = calls_of(drain(backends.make(server).chat(ASK, PARAMS, tools=TOOLS))[0])
    assert done.reason == "tool_calls"
    kinds = [(type(c).__name__, c.call.id if isinstance(c, InvalidCall) else c.id) for c in calls]
    assert kinds == [("InvalidCall", "c1"), ("InvalidCall", "c2"), ("ToolCall", "c3"), ("InvalidCall", "c4")]
    assert isinstance(calls[0], InvalidCall) and "city" in calls[0].error
    assert isinstance(calls[1], InvalidCall) and "launch" in calls[1].error
    assert isinstance(calls[3], InvalidCall) and "JSON" in calls[3].error


def test_a_stream_cut_inside_a_call_gives_no_call(server: FakeOpenAI, backends: Backends) -> None:
    frames = llama_cpp_frames(PLAN, preamble="Checking")
    server.stream(frames, cut_after=6)
    events, done = drain(backends.make(server).chat(ASK, PARAMS, tools=TOOLS))
    assert not [e for e in events if isinstance(e, ToolCallParsed)] and done.tool_calls == ()
    assert done.reason == "interrupted" and done.error and done.text == "Checking "


def test_stop_during_a_call_gives_no_call(server: FakeOpenAI, backends: Backends) -> None:
    server.stream(llama_cpp_frames(PLAN), stall_after=4)
    backend = backends.make(server)
    stopper: threading.Thread | None = None
    events: list[Event] = []
    for event in backend.chat(ASK, PARAMS, tools=TOOLS):
        events.append(event)
        if isinstance(event, Token) and stopper is None:  # the call's first fragment has arrived
            stopper = threading.Thread(target=backend.request_stop)
            stopper.start()
    assert stopper is not None
    stopper.join()
    calls, done = calls_of(events)
    assert calls == [] and done.reason == "cancelled"


def test_a_server_without_tool_calling_says_so(server: FakeOpenAI, backends: Backends) -> None:
    """vLLM started without its tool parser refuses tools with a 400: said once, not retried."""
    server.fail(400, {"object": "error", "message": '"auto" tool choice requires --enable-auto-tool-choice and '
                      "--tool-call-parser to be set", "type": "BadRequestError", "code": 400})  # fmt: skip
    server.fail(500, {"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}})
    server.fail(400, {"error": "registry.ollama.ai/library/gemma:2b does not support tools"})
    backend = backends.make(server)
    for _ in range(3):
        with pytest.raises(RemoteError, match="tool calling") as info:
            list(backend.chat(ASK, PARAMS, tools=TOOLS))
        assert "lab" in str(info.value)
    assert len(server.generate_requests()) == 3 and backends.sleeps == []  # not retried
    # another 400 that names a tool is the server's own words, not a claim about tool calling
    server.fail(400, {"error": {"message": "Invalid 'tools[0].function.name': string does not match pattern."}})
    with pytest.raises(RemoteError) as info:
        list(backend.chat(ASK, PARAMS, tools=TOOLS))
    assert "tool calling" not in str(info.value) and "does not match pattern" in str(info.value)


# ----- Ember's remote backend and Ember's own server


@pytest.fixture
def ember() -> Iterator[tuple[ToolBackend, str]]:
    behind = ToolBackend()
    service = EngineService(backend_factory=lambda ref: behind)
    api = ApiServer(service, ServerConfig(port=0))
    try:
        load_blocking(service, LoadConfig(Path("tools.gguf")), "tools")
        api.start()
        yield behind, api.url
    finally:
        api.stop()
        service.close()


def test_the_remote_backend_and_embers_server_speak_tools(ember: tuple[ToolBackend, str]) -> None:
    behind, url = ember
    behind.plan = [("get_weather", {"city": "Paris"}), ("get_time", {})]
    backend = RemoteBackend()
    backend.load(RemoteModelRef(Endpoint("ember", url), "tools"))
    try:
        calls, done = calls_of(drain(backend.chat(ASK, PARAMS, tools=TOOLS))[0])
        assert done.reason == "tool_calls"
        assert [(c.name, c.arguments) for c in calls if isinstance(c, ToolCall)] == behind.plan
        request = behind.tools[-1]
        assert request == TOOLS  # the same tools, choice and parallel reached the engine behind the server
        valid = tuple(c for c in calls if isinstance(c, ToolCall))
        history = [*ASK, ChatMessage("assistant", done.text, tool_calls=valid)]
        history += [ChatMessage.from_tool_result(ToolResult(c.id, c.name, f"result {i}")) for i, c in enumerate(valid)]
        _, answer = drain(backend.chat(history, PARAMS, tools=TOOLS))
        assert answer.reason == "stop" and answer.text == "Here is what I found: result 0; result 1"
        got = behind.requests[-1]
        assert got[1].tool_calls == history[1].tool_calls  # ids, names, arguments: unchanged over the wire
        assert [m.tool_call_id for m in got[2:]] == [c.id for c in history[1].tool_calls]
        # the invalid call's note: an Ember server behind Ember never hands out an invalid call
        behind.plan = [("launch", {})]
        calls, done = calls_of(drain(backend.chat(ASK, PARAMS, tools=TOOLS))[0])
        assert calls == [] and done.reason == "stop" and "launch" in done.text
    finally:
        backend.close()


def test_the_remote_backend_gets_a_forced_call_from_embers_runtime(tiny_model: Path) -> None:
    """Remote backend → Ember's API server → the local runtime, whose grammar forces the named call:
    a valid call arrives whole at the far end."""
    forecast = ToolSpec(
        "get_weather",
        "The weather in a city.",
        {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"type": "integer"}},
         "required": ["city", "days"], "additionalProperties": False},
    )  # fmt: skip
    service = EngineService()
    api = ApiServer(service, ServerConfig(port=0))
    backend = RemoteBackend()
    try:
        load_blocking(service, LoadConfig(tiny_model, n_ctx=2048, threads=1), "tiny")
        api.start()
        backend.load(RemoteModelRef(Endpoint("ember", api.url), "tiny"))
        request = ToolRequest((forecast, CLOCK), "get_weather", parallel=False)
        events, done = drain(backend.chat(ASK, SamplingParams(temperature=0.0, max_tokens=300), tools=request))
        calls, done = calls_of(events)
        assert done.reason == "tool_calls" and len(calls) == 1
        call = calls[0]
        assert isinstance(call, ToolCall) and call.name == "get_weather" and call.arguments["city"] in ("Paris", "Oslo")
        assert done.metrics.output_tokens > 0 and done.metrics.token_count == "exact"
    finally:
        backend.close()
        api.stop()
        service.close()


@pytest.mark.slow  # a real server in its own process
def test_llama_cpp_pythons_server_streams_a_call_the_backend_reads(tiny_model: Path) -> None:
    """llama-cpp-python's own server (chatml-function-calling, a named tool): its chunks repeat the
    call's id and name with every argument piece (and a legacy function_call beside them)."""
    from tests.helpers.peer_servers import llama_cpp_server

    forecast = ToolSpec("get_weather", "w", {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}},
                                             "required": ["city"]})  # fmt: skip
    extra = ("--chat_format", "chatml-function-calling")
    with llama_cpp_server(tiny_model, threads=1, n_ctx=2048, alias="tiny", extra=extra) as url:
        backend = RemoteBackend()
        try:
            backend.load(RemoteModelRef(Endpoint("peer", url), "tiny"))
            request = ToolRequest((forecast,), "get_weather")
            events = list(backend.chat(ASK, SamplingParams(temperature=0.0, max_tokens=60), tools=request))
        finally:
            backend.close()
    calls, done = calls_of(events)
    assert done.reason == "tool_calls" and len(calls) == 1
    call = calls[0]
    assert isinstance(call, ToolCall) and call.name == "get_weather" and call.arguments["city"] in ("Paris", "Oslo")
    assert call.id.startswith("call_")  # the server's own id, kept
