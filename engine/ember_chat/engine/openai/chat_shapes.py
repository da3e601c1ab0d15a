"""The bodies of /v1/chat/completions and /v1/completions as Ember writes them (openai/responses.py's
ResponseBuilder builds them): chat.completion, chat.completion.chunk and text_completion, each a `Shape`
named after the `openai` package's own type (openai.types.chat.ChatCompletion, ...). They declare only
what Ember writes, in the order it writes it: a field without a default is on every body (null when
None), one with a default only where the builder sets it (a delta's role on a choice's first chunk, the
usage of the last chunk, a chunk's `ember` on the one that ends its choice).

`ember` (Ember's metrics, the request's attachments, invalid tool calls) is Ember's extension; it stays a
plain object here (its keys are GenerationMetrics.to_dict()'s and the builder's)."""

from __future__ import annotations

from typing import Any, Literal

from ember_chat.engine.openai.wire_shape import Shape

FinishReason = Literal["stop", "length", "tool_calls"]  # responses.FINISH_REASONS' values
Ember = dict[str, Any] | None


class PromptTokensDetails(Shape):
    cached_tokens: int


class CompletionTokensDetails(Shape):
    reasoning_tokens: int


class CompletionUsage(Shape):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails


class TopLogprob(Shape):
    token: str
    logprob: float
    bytes: list[int] | None


class ChatCompletionTokenLogprob(Shape):
    token: str
    logprob: float
    bytes: list[int] | None
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(Shape):
    """Chat's log-probabilities (openai/logprobs.chat_logprobs)."""

    content: list[ChatCompletionTokenLogprob] | None
    refusal: list[ChatCompletionTokenLogprob] | None


class Function(Shape):
    name: str
    arguments: str  # JSON text


class ChatCompletionMessageToolCall(Shape):
    id: str
    type: Literal["function"]
    function: Function


class ChatCompletionMessage(Shape):
    role: Literal["assistant"]
    content: str | None  # null beside tool calls with no text
    refusal: str | None
    reasoning_content: str | None = None  # the thinking, when the answer had some (llama.cpp's and vLLM's key)
    tool_calls: list[ChatCompletionMessageToolCall] | None = None


class Choice(Shape):
    index: int
    message: ChatCompletionMessage
    logprobs: ChoiceLogprobs | None
    finish_reason: FinishReason


class ChatCompletion(Shape):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    system_fingerprint: str | None
    choices: list[Choice]
    usage: CompletionUsage
    ember: Ember


class ChoiceDeltaToolCallFunction(Shape):
    name: str | None = None  # on a call's first piece
    arguments: str | None = None


class ChoiceDeltaToolCall(Shape):
    """A piece of a streamed call (tool_wire.call_deltas): its head has id, type and name."""

    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: ChoiceDeltaToolCallFunction | None = None


class ChoiceDelta(Shape):
    role: Literal["assistant"] | None = None  # a choice's first chunk
    reasoning_content: str | None = None
    content: str | None = None
    tool_calls: list[ChoiceDeltaToolCall] | None = None


class ChunkChoice(Shape):
    index: int
    delta: ChoiceDelta
    logprobs: ChoiceLogprobs | None
    finish_reason: FinishReason | None


class ChatCompletionChunk(Shape):
    """A streamed chunk; the last one (with stream_options.include_usage) has no choices and the usage,
    and no system_fingerprint."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None
    ember: Ember = None  # on the chunk that ends a choice


class Logprobs(Shape):
    """The completions API's log-probabilities (openai/logprobs.completion_logprobs)."""

    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class CompletionChoice(Shape):
    index: int
    text: str
    logprobs: Logprobs | None
    finish_reason: FinishReason | None  # None on a streamed chunk that does not end its choice


class Completion(Shape):
    """text_completion, whole or streamed (the same object for both, as OpenAI's)."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: CompletionUsage | None = None  # the whole answer's, or the last chunk's
    ember: Ember = None  # the whole answer's, or the chunk's that ends a choice
