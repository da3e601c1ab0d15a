"""The Messages API's objects as Shapes (anthropic/messages_shapes.py): a shape refuses a key it does not
declare, and what MessagesBuilder writes is read by the official client's own types with nothing left over
but Ember's `ember`."""

from __future__ import annotations

import anthropic.types as at
import pydantic
import pytest

from ember_chat.engine.anthropic.messages_output import MessagesBuilder
from ember_chat.engine.anthropic.messages_shapes import TextBlock, Usage
from tests.helpers.wire_types import Figures, extras, weather_calls


def test_a_shape_refuses_a_key_it_does_not_declare() -> None:
    with pytest.raises(pydantic.ValidationError, match="citations"):
        TextBlock(type="text", text="hi", citations=[])  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError, match="server_tool_use"):
        Usage(input_tokens=1, cache_creation_input_tokens=0, cache_read_input_tokens=0, output_tokens=1,
              server_tool_use={})  # type: ignore[call-arg]  # fmt: skip


def test_a_message_is_read_by_the_official_type_with_only_embers_extension_left_over() -> None:
    builder = MessagesBuilder("tiny")
    sample = ("<think>Rain?</think>Let me look.", "tool_calls", Figures(), None, weather_calls("toolu_"))
    body = builder.response([sample])
    message = at.Message.model_validate(body)
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert message.stop_reason == "tool_use" and message.usage.input_tokens == 8
    assert extras(message) == {"ember": body["ember"]}
    assert body["ember"]["invalid_tool_calls"][0]["name"] == "nope"


def test_a_streams_events_are_read_by_the_official_types() -> None:
    builder = MessagesBuilder("tiny", ("END",))
    events = builder.opening()
    for piece in ("<think>", "hm", "</think>", "Hel", "lo"):
        events += builder.chunk(piece)["events"]
    events += builder.tool_chunk([{"index": 0, "id": "toolu_1", "function": {"name": "f", "arguments": ""}}])["events"]
    events += builder.tool_chunk([{"index": 0, "function": {"arguments": '{"a": 1}'}}])["events"]
    events += builder.final_chunk("stop_string", Figures(), calls=weather_calls("toolu_"))["events"]
    adapter: pydantic.TypeAdapter[at.RawMessageStreamEvent] = pydantic.TypeAdapter(at.RawMessageStreamEvent)
    read = [adapter.validate_python(event) for event in events]
    assert [e.type for e in read][:3] == ["message_start", "content_block_start", "content_block_delta"]
    assert [e.type for e in read][-2:] == ["message_delta", "message_stop"]
    deltas = {e.delta.type for e in read if isinstance(e, at.RawContentBlockDeltaEvent)}
    assert deltas == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    left_over = {i: extras(e) for i, e in enumerate(read) if extras(e)}
    assert left_over == {len(read) - 2: {"ember": events[-2]["ember"]}}  # message_delta's only
