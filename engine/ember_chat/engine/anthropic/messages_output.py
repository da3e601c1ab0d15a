"""A Message of Anthropic's Messages API as Ember's API server writes it: `content` blocks (a `thinking`
block with a thinking model's thoughts, the answer's `text`, a `tool_use` block per call), `stop_reason`
(end_turn, max_tokens, stop_sequence, tool_use), `usage` (input_tokens not read from the cache,
cache_read_input_tokens, output_tokens); streamed, its events (message_start, content_block_start,
content_block_delta, content_block_stop, message_delta, message_stop); and Anthropic's error shape. Each
is built as its Shape (messages_shapes.py) and written with dump().

A MessagesBuilder is the chat route's ResponseBuilder to the engine's answering (serve/answering.py):
its streamed chunks are each a list of events, `{"events": [...]}`, that the stream writes in order."""

from __future__ import annotations

import uuid
from typing import Any

from ember_chat.engine.anthropic.messages_shapes import (
    ContentBlock,
    Delta,
    ErrorObject,
    ErrorResponse,
    InputJSONDelta,
    Message,
    RawContentBlockDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
    Usage,
)
from ember_chat.engine.anthropic.messages_shapes import StopReason as SaidStop
from ember_chat.engine.core.logprobs import TokenLogprob
from ember_chat.engine.core.reasoning import ThinkingStream, split_thinking
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.responses import Figures, ResponseBuilder, Sample
from ember_chat.engine.openai.tool_wire import ChoiceCalls

# Ember's stop reasons of an answer that ended as it should (unfinished_error first) → Anthropic's
STOP_REASONS: dict[str, SaidStop] = {
    StopReason.STOP: "end_turn",
    StopReason.STOP_STRING: "stop_sequence",
    StopReason.LENGTH: "max_tokens",
    StopReason.CONTEXT_FULL: "max_tokens",
    StopReason.TOOL_CALLS: "tool_use",
}
# an ApiError's status → Anthropic's error type (its API's own list)
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error",
}  # fmt: skip


def error_body(error: ApiError) -> dict[str, Any]:
    """Anthropic's error shape for an error Ember answers with; the field at fault named in the message
    (the shape has no place of its own for it)."""
    message = error.message
    if error.param and error.param not in message:
        message = f"{error.param}: {message}"
    kind = ERROR_TYPES.get(error.status, "invalid_request_error" if 400 <= error.status < 500 else "api_error")
    return ErrorResponse(type="error", error=ErrorObject(type=kind, message=message)).dump()


def message_usage(metrics: Figures | None) -> Usage:
    """Anthropic's usage: input_tokens are the prompt's tokens not read from the cache (its KV reuse)."""
    prompt = metrics.prompt_tokens if metrics else 0
    cached = metrics.prompt_tokens_reused if metrics else 0
    return Usage(
        input_tokens=prompt - cached, cache_creation_input_tokens=0, cache_read_input_tokens=cached,
        output_tokens=metrics.output_tokens if metrics else 0,
    )  # fmt: skip


def _tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> ToolUseBlock:
    return ToolUseBlock(type="tool_use", id=call_id, name=name, input=arguments)


def _block_start(kind: str) -> ContentBlock:
    """An empty thinking or text block, as content_block_start opens it."""
    return (
        ThinkingBlock(type="thinking", thinking="", signature="")
        if kind == "thinking"
        else TextBlock(type="text", text="")
    )


def _delta(index: int, delta: RawContentBlockDelta) -> dict[str, Any]:
    return RawContentBlockDeltaEvent(type="content_block_delta", index=index, delta=delta).dump()


class MessagesBuilder(ResponseBuilder):
    """One Message. `stop_sequences`: the request's, to say which one ended the answer (the engine
    says only that one did: with several, stop_sequence is null)."""

    def __init__(self, model: str, stop_sequences: tuple[str, ...] = ()) -> None:
        super().__init__("messages", model)
        self.id = "msg_" + uuid.uuid4().hex[:24]
        self._stops = stop_sequences
        self._split = ThinkingStream()
        self._blocks = 0  # content blocks opened so far (the next one's index)
        self._open: str | None = None  # the type of the block being streamed

    def _stop(self, reason: str) -> tuple[SaidStop, str | None]:
        said = STOP_REASONS.get(reason, "end_turn")
        return said, self._stops[0] if said == "stop_sequence" and len(self._stops) == 1 else None

    def _message(self, content: list[ContentBlock], reason: str | None, metrics: Figures | None) -> Message:
        stop, sequence = self._stop(reason) if reason is not None else (None, None)
        return Message(
            id=self.id, type="message", role="assistant", model=self.model, content=content,
            stop_reason=stop, stop_sequence=sequence, usage=message_usage(metrics),
        )  # fmt: skip

    def opening(self) -> list[dict[str, Any]]:
        """The event that opens a stream (its usage comes with message_delta, once the prompt is counted)."""
        return [RawMessageStartEvent(type="message_start", message=self._message([], None, None)).dump()]

    # ----- a stream's events (serve/answering.py asks for them as the engine answers)
    def chunk(
        self,
        text: str | None,
        finish: str | None = None,
        first: bool = False,
        index: int = 0,
        logprobs: list[TokenLogprob] | None = None,
    ) -> dict[str, Any]:
        thinking, answer = self._split.feed(text or "")
        return {"events": self._say("thinking", thinking) + self._say("text", answer)}

    def tool_chunk(self, deltas: list[dict[str, Any]], index: int = 0) -> dict[str, Any]:
        events: list[dict[str, Any]] = []
        for delta in deltas:
            function = delta.get("function") or {}
            if "id" in delta:  # a call's head (tool_wire.call_deltas): a new tool_use block
                events += self._start(_tool_use(delta["id"], function.get("name", ""), {}))
            piece = function.get("arguments") or ""
            if piece and self._open == "tool_use":
                events.append(_delta(self._blocks - 1, InputJSONDelta(type="input_json_delta", partial_json=piece)))
        return {"events": events}

    def final_chunk(
        self,
        reason: str,
        metrics: Figures | None,
        index: int = 0,
        logprobs: list[TokenLogprob] | None = None,
        calls: ChoiceCalls | None = None,
        answer: str = "",
    ) -> dict[str, Any]:
        reason = calls.finish_reason(reason) if calls is not None else reason
        thinking, said = self._split.flush()
        events = self._say("thinking", thinking) + self._say("text", said)
        if self._blocks == 0 or self._open == "thinking":  # no answer: an empty text block, as the Message has
            events += self._start(_block_start("text"))
        events += self._close()
        stop, sequence = self._stop(reason)
        ember = self._ember(metrics, answer)  # (`answer`: the whole text, which its project's sources are marked by)
        if calls is not None and calls.invalid:
            ember = {**(ember or {}), "invalid_tool_calls": calls.notes(0)}
        delta = RawMessageDeltaEvent(type="message_delta", delta=Delta(stop_reason=stop, stop_sequence=sequence),
                                     usage=message_usage(metrics), ember=ember)  # fmt: skip
        return {"events": [*events, delta.dump(), RawMessageStopEvent(type="message_stop").dump()]}

    def usage_chunk(self, samples: list[Figures | None]) -> dict[str, Any]:
        return {"events": []}  # (the usage rides on message_delta)

    # ----- the whole Message
    def response(self, samples: list[Sample]) -> dict[str, Any]:
        text, reason, metrics, _entries, calls = samples[0]
        reason = calls.finish_reason(reason)
        split = split_thinking(text)
        content: list[ContentBlock] = []
        if split.thinking:
            content.append(ThinkingBlock(type="thinking", thinking=split.thinking, signature=""))
        if split.answer.strip() or not calls.valid:
            content.append(TextBlock(type="text", text=split.answer))
        content += [_tool_use(c.id, c.name, dict(c.arguments)) for c in calls.valid]
        message = self._message(content, reason, metrics)
        message.ember = self._ember(metrics, text)
        if calls.invalid:
            message.ember = {**(message.ember or {}), "invalid_tool_calls": calls.notes(0)}
        return message.dump()

    # ----- a stream's blocks
    def _say(self, kind: str, text: str) -> list[dict[str, Any]]:
        """Events for `text` of a thinking or text block (opening it after the block before)."""
        if not text:
            return []
        events: list[dict[str, Any]] = []
        if self._open != kind:
            events += self._start(_block_start(kind))
        delta: RawContentBlockDelta = (
            ThinkingDelta(type="thinking_delta", thinking=text) if kind == "thinking"
            else TextDelta(type="text_delta", text=text)
        )  # fmt: skip
        events.append(_delta(self._blocks - 1, delta))
        return events

    def _start(self, block: ContentBlock) -> list[dict[str, Any]]:
        events = self._close()
        self._open = block.type
        start = RawContentBlockStartEvent(type="content_block_start", index=self._blocks, content_block=block)
        events.append(start.dump())
        self._blocks += 1
        return events

    def _close(self) -> list[dict[str, Any]]:
        if self._open is None:
            return []
        events: list[dict[str, Any]] = []
        if self._open == "thinking":  # (the client's accumulated block wants one; Ember signs nothing)
            events.append(_delta(self._blocks - 1, SignatureDelta(type="signature_delta", signature="")))
        self._open = None
        return [*events, RawContentBlockStopEvent(type="content_block_stop", index=self._blocks - 1).dump()]
