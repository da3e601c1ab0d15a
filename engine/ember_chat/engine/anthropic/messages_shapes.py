"""The objects of Anthropic's Messages API that Ember's API server writes, as Shapes (openai/wire_shape.py):
the Message, its content blocks (text, tool_use, thinking) and usage, a stream's events and their deltas,
and the error body. Named after the `anthropic` package's own types (anthropic.types: Message, TextBlock,
RawMessageStartEvent, ...), each declaring only the keys Ember writes; messages_output.py builds them.

`ember` is Ember's own extension (the generation's figures, attachments, invalid tool calls): a plain
object, its keys Ember's, not Anthropic's."""

from __future__ import annotations

from typing import Any, Literal

from ember_chat.engine.openai.wire_shape import Shape

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]
ErrorType = Literal[
    "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large",
    "rate_limit_error", "overloaded_error", "api_error",
]  # fmt: skip


class Usage(Shape):
    """A Message's usage, and message_delta's (anthropic's MessageDeltaUsage: Ember writes the same keys)."""

    input_tokens: int  # the prompt's tokens not read from the cache
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int


class TextBlock(Shape):
    type: Literal["text"]
    text: str


class ThinkingBlock(Shape):
    type: Literal["thinking"]
    thinking: str
    signature: str  # always "": Ember signs nothing


class ToolUseBlock(Shape):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]  # the call's arguments as the model wrote them: any JSON object


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock


class Message(Shape):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ContentBlock]
    stop_reason: StopReason | None  # null in message_start's Message
    stop_sequence: str | None
    usage: Usage
    ember: dict[str, Any] | None = None  # the whole Message's only (null without figures), not message_start's


class TextDelta(Shape):
    type: Literal["text_delta"]
    text: str


class ThinkingDelta(Shape):
    type: Literal["thinking_delta"]
    thinking: str


class SignatureDelta(Shape):
    type: Literal["signature_delta"]
    signature: str


class InputJSONDelta(Shape):
    type: Literal["input_json_delta"]
    partial_json: str


RawContentBlockDelta = TextDelta | ThinkingDelta | SignatureDelta | InputJSONDelta


class RawMessageStartEvent(Shape):
    type: Literal["message_start"]
    message: Message


class RawContentBlockStartEvent(Shape):
    type: Literal["content_block_start"]
    index: int
    content_block: ContentBlock


class RawContentBlockDeltaEvent(Shape):
    type: Literal["content_block_delta"]
    index: int
    delta: RawContentBlockDelta


class RawContentBlockStopEvent(Shape):
    type: Literal["content_block_stop"]
    index: int


class Delta(Shape):
    """message_delta's `delta` (anthropic's raw_message_delta_event.Delta)."""

    stop_reason: StopReason
    stop_sequence: str | None


class RawMessageDeltaEvent(Shape):
    type: Literal["message_delta"]
    delta: Delta
    usage: Usage
    ember: dict[str, Any] | None


class RawMessageStopEvent(Shape):
    type: Literal["message_stop"]


class ErrorObject(Shape):
    type: ErrorType
    message: str


class ErrorResponse(Shape):
    type: Literal["error"]
    error: ErrorObject
