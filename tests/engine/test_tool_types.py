"""Tool values (engine/core/tools.py): OpenAI's shapes in and out, a chat message's calls and results,
the argument checker, and the cap on calls per answer."""

from __future__ import annotations

import json

import pytest

from ember_chat.engine.core.json_schema import schema_errors
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.tools import (
    DEFAULT_MAX_TOOL_CALLS,
    CallBudget,
    ToolCall,
    ToolResult,
    new_call_id,
)
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.openai.tool_wire import tool_call_from_openai, tool_spec_from_openai

OPENAI_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_a_tool_goes_in_and_out_in_openais_shape() -> None:
    spec = tool_spec_from_openai(OPENAI_TOOL)
    assert (spec.name, spec.description, spec.parameters["required"]) == (
        "get_weather",
        "Current weather in a city.",
        ["city"],
    )
    assert spec.to_openai() == OPENAI_TOOL
    assert tool_spec_from_openai(OPENAI_TOOL["function"]) == spec  # the bare function object too
    bare = tool_spec_from_openai({"type": "function", "function": {"name": "now"}})
    assert bare.parameters == {"type": "object", "properties": {}} and bare.description == ""


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "function", "function": {"name": "has space"}},
        {"type": "function", "function": {"description": "no name"}},
        {"type": "function", "function": {"name": "x", "parameters": {"type": "array"}}},
        {"type": "function", "function": {"name": "x", "description": 3}},
        "get_weather",
    ],
)
def test_a_malformed_tool_is_refused(raw: object) -> None:
    with pytest.raises(InvalidParameter):
        tool_spec_from_openai(raw)


def test_a_call_goes_in_and_out_in_openais_shape() -> None:
    wire = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    call = tool_call_from_openai(wire)
    assert (call.id, call.name, call.arguments, call.raw) == (
        "call_1",
        "get_weather",
        {"city": "Paris"},
        '{"city": "Paris"}',
    )
    out = call.to_openai()
    assert out["id"] == "call_1" and json.loads(out["function"]["arguments"]) == {"city": "Paris"}
    assert call.to_template()["function"]["arguments"] == {"city": "Paris"}  # templates read a mapping
    given_id = tool_call_from_openai({"function": {"name": "now", "arguments": ""}})
    assert given_id.arguments == {} and len(given_id.id) == 9
    for bad in ('{"city": ', "[1, 2]"):
        with pytest.raises(InvalidParameter):
            tool_call_from_openai({"id": "c", "function": {"name": "x", "arguments": bad}})


def test_call_ids_are_nine_letters_and_digits_and_differ() -> None:
    ids = {new_call_id() for _ in range(200)}
    assert len(ids) == 200 and all(len(i) == 9 and i.isalnum() for i in ids)


def test_messages_carry_calls_and_results() -> None:
    call = ToolCall("abc123XYZ", "get_weather", {"city": "Paris"})
    asked = ChatMessage("assistant", "Let me check.", tool_calls=(call,))
    answered = ChatMessage.from_tool_result(ToolResult(call.id, call.name, '{"temp": 18}'))
    assert asked.tool_calls == (call,)
    assert (answered.role, answered.content, answered.tool_call_id) == ("tool", '{"temp": 18}', "abc123XYZ")
    assert ChatMessage("user", "hi").tool_calls == () and ChatMessage("user", "hi").tool_call_id is None
    with pytest.raises(InvalidParameter, match="only an assistant"):
        ChatMessage("user", "x", tool_calls=(call,))
    with pytest.raises(InvalidParameter, match="only a tool message"):
        ChatMessage("assistant", "x", tool_call_id="abc123XYZ")
    with pytest.raises(InvalidParameter, match="role must be one of system, user, assistant, tool"):
        ChatMessage("ipython", "x")


SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "unit": {"enum": ["c", "f"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
            "additionalProperties": False,
        },
        "note": {"type": ["string", "null"]},
    },
    "required": ["city"],
}


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ({"city": "Paris"}, []),
        ({"city": "Paris", "days": 3, "unit": "c", "tags": ["a"], "where": {"lat": 1, "lon": 2.5}, "note": None}, []),
        ({"city": "Paris", "days": 3.0}, []),  # 3.0 is an integer in JSON
        ({}, ["arguments lacks required 'city'"]),
        ({"city": 5}, ["arguments.city must be string, got integer"]),
        ({"city": "P", "days": True}, ["arguments.days must be integer, got boolean"]),
        ({"city": "P", "days": 2.5}, ["arguments.days must be integer, got number"]),
        ({"city": "P", "unit": "k"}, ['arguments.unit must be one of ["c", "f"]']),
        ({"city": "P", "tags": ["a", 1]}, ["arguments.tags[1] must be string, got integer"]),
        ({"city": "P", "where": {"lat": 1}}, ["arguments.where lacks required 'lon'"]),
        ({"city": "P", "where": {"lat": 1, "lon": 2, "alt": 3}}, ["arguments.where has no property 'alt'"]),
        ({"city": "P", "note": 1}, ["arguments.note must be string or null, got integer"]),
        ([], ["arguments must be object, got array"]),
    ],
)
def test_arguments_are_checked_against_the_schema(value: object, errors: list[str]) -> None:
    assert schema_errors(value, SCHEMA, "arguments") == errors


def test_any_of_and_const() -> None:
    schema = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert schema_errors("x", schema, "arguments") == [] and schema_errors(1, schema, "arguments") == []
    assert schema_errors(1.5, schema, "arguments") == ["arguments matches none of the allowed shapes"]
    assert schema_errors("b", {"const": "a"}, "arguments") == ['arguments must be "a"']


def test_the_cap_on_calls_per_answer() -> None:
    assert DEFAULT_MAX_TOOL_CALLS == 8
    budget = CallBudget()
    calls = [ToolCall(new_call_id(), "now") for _ in range(10)]
    allowed, over = budget.take(calls[:5])
    assert (allowed, over, budget.spent) == (calls[:5], [], False)
    allowed, over = budget.take(calls[5:])
    assert allowed == calls[5:8] and over == calls[8:] and budget.spent
    assert budget.take(calls[:1]) == ([], calls[:1])
    assert "more than 8 tool calls" in budget.message
    assert CallBudget(limit=2).take(calls[:3]) == (calls[:2], calls[2:3])
    with pytest.raises(InvalidParameter):
        CallBudget(limit=0)
