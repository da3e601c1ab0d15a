"""The Responses API's objects as Shapes (openai/responses_shapes.py): a shape refuses a key it does not
declare, and what ResponsesBuilder writes is read by the official client's own types with nothing left
over but Ember's `ember`."""

from __future__ import annotations

from typing import Any

import openai.types.responses as rt
import pydantic
import pytest

from ember_chat.engine.openai.responses_output import ResponsesBuilder
from ember_chat.engine.openai.responses_shapes import ResponseFunctionToolCall, ResponseUsage
from tests.helpers.wire_types import Figures, extras, weather_calls

ECHO: dict[str, Any] = {
    "instructions": "Be brief.", "max_output_tokens": 64, "metadata": {"run": "1"}, "parallel_tool_calls": True,
    "previous_response_id": None, "reasoning": {"effort": None, "summary": None}, "store": True, "temperature": 0.5,
    "top_p": 1, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}], "truncation": "disabled",
    "user": None,
}  # fmt: skip


# (the official Response type does not declare `store`, which OpenAI's own Responses repeat from the request
# as Ember does)


def test_a_shape_refuses_a_key_it_does_not_declare() -> None:
    with pytest.raises(pydantic.ValidationError, match="namespace"):
        ResponseFunctionToolCall(id="fc_1", type="function_call", call_id="c", name="f", arguments="{}",
                                 status="completed", namespace="x")  # type: ignore[call-arg]  # fmt: skip
    with pytest.raises(pydantic.ValidationError, match="input_tokens_details"):
        ResponseUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # type: ignore[call-arg]


def test_a_response_is_read_by_the_official_type_with_only_embers_extension_left_over() -> None:
    body = ResponsesBuilder("tiny", ECHO, None).response([("<think>Rain?</think>Let me look.", "stop", Figures(), None,
                                                           weather_calls("call_"))])  # fmt: skip
    response = rt.Response.model_validate(body)
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output_text == "Let me look." and response.usage is not None
    assert response.usage.input_tokens_details.cached_tokens == 4
    details = response.usage.input_tokens_details
    assert details.cache_write_tokens == response.usage.input_tokens - 4  # (evaluated now, kept for the next)
    assert extras(response) == {"ember": body["ember"], "store": True}
    assert body["ember"]["invalid_tool_calls"][0]["name"] == "nope"


def test_a_streams_events_are_read_by_the_official_types() -> None:
    builder = ResponsesBuilder("tiny", ECHO, None)
    events = builder.opening()
    for piece in ("<think>", "hm", "</think>", "Hel", "lo"):
        events += builder.chunk(piece)["events"]
    events += builder.tool_chunk([{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": ""}}])["events"]
    events += builder.tool_chunk([{"index": 0, "function": {"arguments": '{"a": 1}'}}])["events"]
    events += builder.final_chunk("length", Figures(), calls=weather_calls("call_"))["events"]
    adapter: pydantic.TypeAdapter[rt.ResponseStreamEvent] = pydantic.TypeAdapter(rt.ResponseStreamEvent)
    # (the stream numbers the events as it writes them: serve/responses_route.ResponsesStream)
    read = [adapter.validate_python({**event, "sequence_number": n}) for n, event in enumerate(events)]
    kinds = [e.type for e in read]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.incomplete"
    assert {"response.reasoning_text.delta", "response.output_text.done", "response.function_call_arguments.done",
            "response.content_part.added", "response.output_item.done"} <= set(kinds)  # fmt: skip
    left_over = {i: extras(e) for i, e in enumerate(read) if extras(e)}
    store, ember = {"response.store": True}, events[-1]["response"]["ember"]
    assert left_over == {0: store, 1: store, len(read) - 1: {"response.ember": ember, **store}}
