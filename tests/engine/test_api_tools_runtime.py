"""Tool calling through Ember's API server with the real local runtime on a tiny random-weight GGUF,
driven by the official `openai` client: tool_choice required / a named tool makes the grammar force a
valid call; a schema no grammar can hold is a 400 naming the tool; a call cut by max tokens is no call
and no text of the answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.json_schema import schema_errors
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.calls.formats import CUT_SHORT
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_tools import ASK
from tests.helpers.runtime_tools import FORECAST

CLOCK = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time now.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}


@pytest.fixture(scope="module")
def tiny_client(tiny_model: Path) -> Iterator[openai.OpenAI]:
    service = EngineService()
    server = ApiServer(service, ServerConfig(port=0))
    try:
        load_blocking(service, LoadConfig(tiny_model, n_ctx=2048, threads=1), "tiny")
        server.start()
        with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=60) as client:
            yield client
    finally:
        server.stop()
        service.close()


def test_a_schema_no_grammar_can_hold_is_400_naming_the_tool(tiny_client: openai.OpenAI) -> None:
    strange = {"type": "function", "function": {"name": "strange", "parameters": {
        "type": "object", "properties": {"x": {"type": "strange"}}, "required": ["x"]}}}  # fmt: skip
    with pytest.raises(openai.BadRequestError) as info:
        tiny_client.chat.completions.create(model="tiny", messages=ASK, tools=[FORECAST, strange], max_tokens=4)
    assert info.value.param == "tools" and "tools[1] (strange)" in info.value.message


def test_a_call_cut_by_max_tokens_is_not_a_call(tiny_client: openai.OpenAI) -> None:
    """The runtime's call cut short by max_tokens (no complete call before it) is no call: no
    tool_calls, finish_reason length, ember.invalid_tool_calls saying so, and its markup is not in
    content (issue 27, item 10: it was, and a client sent it back as the assistant's words). Streamed
    the same way."""
    kwargs: dict[str, Any] = {"model": "tiny", "messages": ASK, "tools": [FORECAST], "tool_choice": "required",
                              "max_tokens": 16, "temperature": 0}  # fmt: skip
    response = tiny_client.chat.completions.create(**kwargs)
    choice = response.choices[0]
    assert choice.finish_reason == "length" and choice.message.tool_calls is None
    notes = (response.model_extra or {})["ember"]["invalid_tool_calls"]
    assert len(notes) == 1 and notes[0]["error"] == CUT_SHORT and notes[0]["raw"].startswith("<tool_call>")
    assert not choice.message.content
    # (the SDK's helper refuses an answer cut short)
    with tiny_client.chat.completions.stream(**kwargs) as stream, pytest.raises(openai.LengthFinishReasonError):
        stream.get_final_completion()
    chunks = list(tiny_client.chat.completions.create(**kwargs, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert not any(d.tool_calls for d in deltas) and chunks[-1].choices[0].finish_reason == "length"
    assert not "".join(d.content or "" for d in deltas)


def valid_call(call: Any) -> dict[str, Any]:
    """A returned call's arguments, checked against its tool's schema."""
    spec = {"get_weather": FORECAST, "get_time": CLOCK}[call.function.name]["function"]
    arguments = json.loads(call.function.arguments)
    assert schema_errors(arguments, spec.get("parameters", {"type": "object"}), "arguments") == []
    return arguments


def test_the_tool_loop_with_the_local_runtime(tiny_client: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris for 3 days?"}]
    for seed in (1, 2):
        first = tiny_client.chat.completions.create(
            model="tiny", messages=messages, tools=[FORECAST, CLOCK], tool_choice="required",
            temperature=1.0, seed=seed, max_tokens=600,
        )  # fmt: skip
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        assert choice.message.tool_calls and all(valid_call(c) is not None for c in choice.message.tool_calls)
        assert not (choice.message.content or "").strip()  # the call is not answer text
        ember = (first.model_extra or {})["ember"]
        assert first.usage is not None and first.usage.completion_tokens == ember["output_tokens"] > 0
        assert "invalid_tool_calls" not in ember
    calls = choice.message.tool_calls
    messages.append(choice.message.model_dump(exclude_none=True))
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"{call.function.name}: sunny, 21 °C"})
    second = tiny_client.chat.completions.create(
        model="tiny", messages=messages, tools=[FORECAST, CLOCK], tool_choice="none", max_tokens=6, temperature=0
    )
    assert second.choices[0].finish_reason == "length" and second.choices[0].message.tool_calls is None
    assert second.usage is not None and second.usage.completion_tokens == 6
    # the calls and their results were in the prompt: longer than the question alone (same tool_choice)
    alone = tiny_client.chat.completions.create(
        model="tiny", messages=messages[:1], tools=[FORECAST, CLOCK], tool_choice="none", max_tokens=1
    )
    assert alone.usage is not None and second.usage.prompt_tokens > alone.usage.prompt_tokens + 10 * len(calls)


def test_a_named_tool_streamed_matches_the_answer_not_streamed(tiny_client: openai.OpenAI) -> None:
    ask: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    named = {"type": "function", "function": {"name": "get_weather"}}
    kwargs: dict[str, Any] = {"model": "tiny", "messages": ask, "tools": [FORECAST, CLOCK], "tool_choice": named,
                              "parallel_tool_calls": False, "temperature": 0, "max_tokens": 300}  # fmt: skip
    whole = tiny_client.chat.completions.create(**kwargs)
    calls = whole.choices[0].message.tool_calls
    assert whole.choices[0].finish_reason == "tool_calls" and calls is not None
    assert [c.function.name for c in calls] == ["get_weather"]
    with tiny_client.chat.completions.stream(**kwargs, stream_options={"include_usage": True}) as stream:
        kinds = [event.type for event in stream]
        streamed = stream.get_final_completion()
    assert "tool_calls.function.arguments.done" in kinds
    got = streamed.choices[0].message.tool_calls
    assert streamed.choices[0].finish_reason == "tool_calls" and got is not None
    assert [(c.function.name, valid_call(c)) for c in got] == [
        ("get_weather", valid_call(calls[0]))
    ]  # greedy: same call
    assert streamed.usage is not None and whole.usage is not None
    assert streamed.usage.completion_tokens == whole.usage.completion_tokens
