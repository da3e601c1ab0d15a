"""A Response of OpenAI's Responses API as Ember's API server writes it: the Response object (`id`
resp_…, `output` items: a `reasoning` item with a thinking model's thoughts, the `message` with its
`output_text`, a `function_call` per tool call; `usage` as input/output tokens; `status` incomplete with
`incomplete_details.reason` max_output_tokens when the answer ran out of tokens), and streamed, the typed
events the official client reads (response.created, response.output_item.added, …,
response.completed, each with its sequence_number; see serve/responses_route.py's stream).

A ResponsesBuilder is the chat route's ResponseBuilder to the engine's answering (serve/answering.py):
its streamed chunks are each a list of events, `{"events": [...]}`, that the stream writes in order. Each
object and event is built as its Shape (responses_shapes.py) and written with dump().
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from ember_chat.engine.core.logprobs import TokenLogprob
from ember_chat.engine.core.reasoning import ThinkingStream, split_thinking
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.openai.responses import Figures, ResponseBuilder, Sample, usage
from ember_chat.engine.openai.responses_shapes import (
    ContentPart,
    IncompleteDetails,
    InputTokensDetails,
    ItemStatus,
    OutputTokensDetails,
    ReasoningText,
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseReasoningTextDeltaEvent,
    ResponseReasoningTextDoneEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
)
from ember_chat.engine.openai.tool_wire import ChoiceCalls

# told the finished Response and the answer as a chat message (for a later turn's previous_response_id)
Keep = Callable[[dict[str, Any], dict[str, Any]], None]
_CUT = (StopReason.LENGTH, StopReason.CONTEXT_FULL)  # the answer ran out of tokens: an incomplete response


def _id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def response_usage(metrics: Figures | None) -> ResponseUsage:
    """The Responses API's usage: the chat route's figures under its names."""
    chat = usage([metrics])
    cached = chat["prompt_tokens_details"]["cached_tokens"]
    # (the prompt tokens evaluated now are kept in the KV cache for the next request that shares them)
    written = chat["prompt_tokens"] - cached
    return ResponseUsage(
        input_tokens=chat["prompt_tokens"],
        input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=written),
        output_tokens=chat["completion_tokens"],
        output_tokens_details=OutputTokensDetails(
            reasoning_tokens=chat["completion_tokens_details"]["reasoning_tokens"]
        ),
        total_tokens=chat["total_tokens"],
    )


def _text(text: str) -> ResponseOutputText:
    return ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])


def _message(text: str, status: ItemStatus) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=_id("msg_"), type="message", role="assistant", status=status,
                                 content=[_text(text)])  # fmt: skip


def _reasoning(text: str) -> ResponseReasoningItem:
    content = [ReasoningText(type="reasoning_text", text=text)]
    return ResponseReasoningItem(id=_id("rs_"), type="reasoning", summary=[], content=content, status="completed")


def _call(call_id: str, name: str, arguments: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=_id("fc_"), type="function_call", call_id=call_id, name=name,
                                    arguments=arguments, status="completed")  # fmt: skip


def _part(item: ResponseOutputMessage | ResponseReasoningItem, text: str) -> ContentPart:
    """The item's one content part, with `text`."""
    return item.content[0].model_copy(update={"text": text})


class ResponsesBuilder(ResponseBuilder):
    """One Response: `echo` is what it repeats of its request (responses_input.ResponsesBody.echo);
    `keep` is told of it when it is finished (the server's store), if it is to be kept."""

    def __init__(self, model: str, echo: dict[str, Any], keep: Keep | None) -> None:
        super().__init__("responses", model)
        self.id = _id("resp_")
        self._echo = echo
        self._keep = keep
        self._split = ThinkingStream()
        self._done: list[ResponseOutputItem] = []  # a stream's output items, finished
        self._open: ResponseOutputItem | None = None  # the item being streamed
        self._text = ""  # its text (a message's, a reasoning's) or arguments (a call's) so far

    def _snapshot(self, status: str, output: list[ResponseOutputItem], metrics: Figures | None = None) -> Response:
        incomplete = IncompleteDetails(reason="max_output_tokens") if status == "incomplete" else None
        done = status in ("completed", "incomplete")
        return Response(
            id=self.id, object="response", created_at=self.created, status=status, error=None,
            incomplete_details=incomplete, model=self.model, output=output, **self._echo,
            usage=response_usage(metrics) if done else None,
            completed_at=int(time.time()) if status == "completed" else None,
        )  # fmt: skip

    def opening(self) -> list[dict[str, Any]]:
        """The events that open a stream."""
        shape = self._snapshot("in_progress", [])
        return [
            ResponseCreatedEvent(type="response.created", response=shape).dump(),
            ResponseInProgressEvent(type="response.in_progress", response=shape).dump(),
        ]

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
        return {"events": self._say("reasoning", thinking) + self._say("message", answer)}

    def tool_chunk(self, deltas: list[dict[str, Any]], index: int = 0) -> dict[str, Any]:
        events: list[dict[str, Any]] = []
        for delta in deltas:
            function = delta.get("function") or {}
            if "id" in delta:  # a call's head (tool_wire.call_deltas): a new function_call item
                events += self._close("completed")
                events += self._start(_call(delta["id"], function.get("name", ""), ""))
            piece = function.get("arguments") or ""
            if piece and self._open is not None:
                self._text += piece
                events.append(
                    ResponseFunctionCallArgumentsDeltaEvent(
                        type="response.function_call_arguments.delta", **self._at(), delta=piece
                    ).dump()
                )
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
        status: ItemStatus = "incomplete" if reason in _CUT else "completed"
        thinking, said = self._split.flush()  # (what the splitter held back; `answer` is the whole text)
        events = self._say("reasoning", thinking) + self._say("message", said)
        items = [*self._done, *([self._open] if self._open else [])]
        if all(item.type == "reasoning" for item in items):  # no answer: an empty message, as response() has
            events += self._close("completed") + self._start(_message("", "in_progress"))
        events += self._close(status)
        response = self._finish(status, self._done, metrics, calls, answer)
        finished = (
            ResponseIncompleteEvent(type="response.incomplete", response=response) if status == "incomplete"
            else ResponseCompletedEvent(type="response.completed", response=response)
        )  # fmt: skip
        events.append(finished.dump())
        return {"events": events}

    def usage_chunk(self, samples: list[Figures | None]) -> dict[str, Any]:
        return {"events": []}  # (the usage rides on response.completed)

    # ----- the whole Response
    def response(self, samples: list[Sample]) -> dict[str, Any]:
        text, reason, metrics, _entries, calls = samples[0]
        status: ItemStatus = "incomplete" if reason in _CUT else "completed"
        split = split_thinking(text)
        output: list[ResponseOutputItem] = [_reasoning(split.thinking)] if split.thinking else []
        if split.answer.strip() or not calls.valid:
            output.append(_message(split.answer, status))
        output += [_call(c.id, c.name, c.arguments_json()) for c in calls.valid]
        return self._finish(status, output, metrics, calls, text).dump()

    def _finish(
        self,
        status: str,
        output: list[ResponseOutputItem],
        metrics: Figures | None,
        calls: ChoiceCalls | None,
        answer: str,
    ) -> Response:
        """The finished Response (`answer`: its whole text, which its project's sources say they were
        used by or not), kept if it is to be."""
        response = self._snapshot(status, output, metrics)
        response.ember = self._ember(metrics, answer)
        if calls is not None and calls.invalid:
            response.ember = {**(response.ember or {}), "invalid_tool_calls": calls.notes(0)}
        if self._keep is not None:
            stored = "".join(p.text for item in output if isinstance(item, ResponseOutputMessage) for p in item.content)
            calls_made = [c for c in output if isinstance(c, ResponseFunctionToolCall)]
            tool_calls = [{"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                          for c in calls_made]  # fmt: skip
            message: dict[str, Any] = {"role": "assistant", "content": stored}
            if tool_calls:
                message["tool_calls"] = tool_calls
            self._keep(response.dump(), message)
        return response

    # ----- a stream's items
    def _say(self, kind: str, text: str) -> list[dict[str, Any]]:
        """Events for `text` of a reasoning or message item (opening it after the item before)."""
        if not text:
            return []
        events: list[dict[str, Any]] = []
        if self._open is None or self._open.type != kind:
            events += self._close("completed")
            events += self._start(_reasoning("") if kind == "reasoning" else _message("", "in_progress"))
        self._text += text
        at = self._at()
        delta = (
            ResponseReasoningTextDeltaEvent(type="response.reasoning_text.delta", **at, content_index=0, delta=text)
            if kind == "reasoning"
            else ResponseTextDeltaEvent(
                type="response.output_text.delta", **at, content_index=0, delta=text, logprobs=[]
            )
        )
        events.append(delta.dump())
        return events

    def _start(self, item: ResponseOutputItem) -> list[dict[str, Any]]:
        self._open, self._text = item, ""
        update: dict[str, Any] = {"status": "in_progress"}
        if not isinstance(item, ResponseFunctionToolCall):
            update["content"] = []
        shown = item.model_copy(update=update)
        added = ResponseOutputItemAddedEvent(
            type="response.output_item.added", output_index=len(self._done), item=shown
        )
        events = [added.dump()]
        if not isinstance(item, ResponseFunctionToolCall):
            part = ResponseContentPartAddedEvent(
                type="response.content_part.added", **self._at(), content_index=0, part=_part(item, "")
            )
            events.append(part.dump())
        return events

    def _close(self, status: ItemStatus) -> list[dict[str, Any]]:
        item = self._open
        if item is None:
            return []
        events: list[dict[str, Any]] = []
        at = self._at()
        if isinstance(item, ResponseFunctionToolCall):
            item.arguments = self._text
            events.append(
                ResponseFunctionCallArgumentsDoneEvent(
                    type="response.function_call_arguments.done", **at, arguments=self._text
                ).dump()
            )
        else:
            part = _part(item, self._text)
            if isinstance(item, ResponseOutputMessage):
                assert isinstance(part, ResponseOutputText)
                item.content = [part]
                done: ResponseTextDoneEvent | ResponseReasoningTextDoneEvent = ResponseTextDoneEvent(
                    type="response.output_text.done", **at, content_index=0, text=self._text, logprobs=[]
                )
            else:
                assert isinstance(part, ReasoningText)
                item.content = [part]
                done = ResponseReasoningTextDoneEvent(
                    type="response.reasoning_text.done", **at, content_index=0, text=self._text
                )
            events.append(done.dump())
            events.append(
                ResponseContentPartDoneEvent(type="response.content_part.done", **at, content_index=0, part=part).dump()
            )
            if isinstance(item, ResponseOutputMessage):
                item.status = status
        item_done = ResponseOutputItemDoneEvent(
            type="response.output_item.done", output_index=len(self._done), item=item
        )
        events.append(item_done.dump())
        self._done.append(item)
        self._open, self._text = None, ""
        return events

    def _at(self) -> dict[str, Any]:
        """Where an event of the open item is: its item_id and output_index."""
        assert self._open is not None
        return {"item_id": self._open.id, "output_index": len(self._done)}
