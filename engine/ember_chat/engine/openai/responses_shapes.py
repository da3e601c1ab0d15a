"""The objects of OpenAI's Responses API that Ember's API server writes, as Shapes (wire_shape.py): the
Response, its output items (a message of output_text parts, a function_call, a reasoning item) and usage,
and the payloads of a stream's events. Named after the `openai` package's own types
(openai.types.responses: Response, ResponseOutputMessage, ResponseCreatedEvent, ...), each declaring
only the keys Ember writes; responses_output.py builds them.

A stream's events carry no sequence_number here: the stream numbers them as it writes them
(serve/responses_route.ResponsesStream). What a Response repeats of its request (responses_input's
`echo`) is declared field by field; the request's own objects in it (reasoning, text, tool_choice's
object, tools) are repeated as sent, so they stay plain objects. `ember` is Ember's own extension."""

from __future__ import annotations

from typing import Any, Literal

from ember_chat.engine.openai.wire_shape import Shape

ItemStatus = Literal["in_progress", "completed", "incomplete"]


class InputTokensDetails(Shape):
    cached_tokens: int
    cache_write_tokens: int  # (the openai client's type requires it)


class OutputTokensDetails(Shape):
    reasoning_tokens: int


class ResponseUsage(Shape):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class ResponseOutputText(Shape):
    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, Any]]  # always empty: Ember cites nothing
    logprobs: list[dict[str, Any]]  # always empty: the Responses route gives no log-probabilities


class ResponseOutputMessage(Shape):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    status: ItemStatus
    content: list[ResponseOutputText]


class ReasoningText(Shape):
    """A reasoning item's content part (openai's response_reasoning_item.Content)."""

    type: Literal["reasoning_text"]
    text: str


class ResponseReasoningItem(Shape):
    id: str
    type: Literal["reasoning"]
    summary: list[dict[str, Any]]  # always empty: Ember gives the thoughts themselves, not a summary
    content: list[ReasoningText]
    status: ItemStatus


class ResponseFunctionToolCall(Shape):
    id: str
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str  # JSON text
    status: ItemStatus


ResponseOutputItem = ResponseOutputMessage | ResponseReasoningItem | ResponseFunctionToolCall
ContentPart = ResponseOutputText | ReasoningText


class IncompleteDetails(Shape):
    reason: Literal["max_output_tokens"]


class Response(Shape):
    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["in_progress", "completed", "incomplete"]
    error: None  # (a failed answer is an error body or event, never a Response)
    incomplete_details: IncompleteDetails | None
    model: str
    output: list[ResponseOutputItem]
    # repeated from the request (responses_input's echo)
    instructions: str | None
    max_output_tokens: int | None
    metadata: dict[str, str] | None
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: dict[str, Any]  # effort and summary (null unless sent), and whatever else was sent in it
    store: bool
    temperature: int | float | None  # as sent
    top_p: int | float | None
    text: dict[str, Any]  # {"format": ...} as sent, or {"format": {"type": "text"}}
    tool_choice: str | dict[str, Any]
    tools: list[dict[str, Any]]
    truncation: Literal["auto", "disabled"]
    user: str | None
    usage: ResponseUsage | None  # null until it is finished
    completed_at: int | None
    ember: dict[str, Any] | None = None  # a finished Response's only, not a stream's opening snapshots


class ResponseCreatedEvent(Shape):
    type: Literal["response.created"]
    response: Response


class ResponseInProgressEvent(Shape):
    type: Literal["response.in_progress"]
    response: Response


class ResponseCompletedEvent(Shape):
    type: Literal["response.completed"]
    response: Response


class ResponseIncompleteEvent(Shape):
    type: Literal["response.incomplete"]
    response: Response


class ResponseOutputItemAddedEvent(Shape):
    type: Literal["response.output_item.added"]
    output_index: int
    item: ResponseOutputItem


class ResponseOutputItemDoneEvent(Shape):
    type: Literal["response.output_item.done"]
    output_index: int
    item: ResponseOutputItem


class ResponseContentPartAddedEvent(Shape):
    type: Literal["response.content_part.added"]
    item_id: str
    output_index: int
    content_index: int
    part: ContentPart


class ResponseContentPartDoneEvent(Shape):
    type: Literal["response.content_part.done"]
    item_id: str
    output_index: int
    content_index: int
    part: ContentPart


class ResponseTextDeltaEvent(Shape):
    type: Literal["response.output_text.delta"]
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[dict[str, Any]]  # always empty


class ResponseTextDoneEvent(Shape):
    type: Literal["response.output_text.done"]
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[dict[str, Any]]  # always empty


class ResponseReasoningTextDeltaEvent(Shape):
    type: Literal["response.reasoning_text.delta"]
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ResponseReasoningTextDoneEvent(Shape):
    type: Literal["response.reasoning_text.done"]
    item_id: str
    output_index: int
    content_index: int
    text: str


class ResponseFunctionCallArgumentsDeltaEvent(Shape):
    type: Literal["response.function_call_arguments.delta"]
    item_id: str
    output_index: int
    delta: str


class ResponseFunctionCallArgumentsDoneEvent(Shape):
    type: Literal["response.function_call_arguments.done"]
    item_id: str
    output_index: int
    arguments: str
