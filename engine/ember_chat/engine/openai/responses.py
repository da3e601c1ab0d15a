"""Responses in OpenAI's shapes: those Ember's API server writes (chat.completion,
chat.completion.chunk and text_completion, their finish_reason and usage), and a streamed chunk as
the remote backend reads it from another server (`read_chunk`). The bodies Ember writes are built as the
shapes of openai/chat_shapes.py and written with their `dump()`.

Extension: the chunk that carries `finish_reason` (and a non-streaming response) has a top-level
`ember` object with Ember's full metrics for the generation (the keys of `GenerationMetrics`: ttft_s,
prefill_tokens_per_s, decode_tokens_per_s, itl_p50_ms, …). Clients that do not know it ignore it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ember_chat.engine.core.logprobs import TokenLogprob
from ember_chat.engine.core.reasoning import ThinkingStream, split_thinking
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.openai.chat_shapes import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatCompletionMessageToolCall,
    Choice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceLogprobs,
    ChunkChoice,
    Completion,
    CompletionChoice,
    CompletionTokensDetails,
    CompletionUsage,
    FinishReason,
    Logprobs,
    PromptTokensDetails,
)
from ember_chat.engine.openai.logprobs import chat_logprobs, completion_logprobs
from ember_chat.engine.openai.tool_wire import ChoiceCalls

# Ember's stop reasons of an answer that ended as it should → OpenAI's finish_reason. The others
# (cancelled, interrupted, error) have no OpenAI word, and "stop" would tell a client its answer is
# whole: they are errors (`unfinished_error`).
FINISH_REASONS: dict[str, FinishReason] = {
    StopReason.STOP: "stop",
    StopReason.STOP_STRING: "stop",
    StopReason.LENGTH: "length",
    StopReason.CONTEXT_FULL: "length",
    StopReason.TOOL_CALLS: "tool_calls",
}


def finish_reason(reason: str) -> FinishReason:
    """OpenAI's finish_reason for an answer that ended cleanly (check `unfinished_error` first)."""
    try:
        return FINISH_REASONS[reason]
    except KeyError:
        raise ValueError(f"{reason!r} is not the end of a finished answer; answer with unfinished_error().") from None


class Figures(Protocol):
    """What a response reads of a generation's metrics (inference/metrics.py's GenerationMetrics is
    one): the shapes of a response take them without importing the inference that measures them."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def prompt_tokens_reused(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def thinking_tokens(self) -> int: ...
    def to_dict(self) -> dict[str, Any]: ...


def completion_usage(samples: list[Figures | None]) -> CompletionUsage:
    """OpenAI's usage of one request: its prompt once, the completions of all its samples."""
    first = samples[0] if samples else None
    prompt = first.prompt_tokens if first else 0
    out = sum(m.output_tokens for m in samples if m)
    return CompletionUsage(
        prompt_tokens=prompt,
        completion_tokens=out,
        total_tokens=prompt + out,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=first.prompt_tokens_reused if first else 0),
        completion_tokens_details=CompletionTokensDetails(
            reasoning_tokens=sum(m.thinking_tokens for m in samples if m)
        ),
    )


def usage(samples: list[Figures | None]) -> dict[str, Any]:
    """`completion_usage` as plain values (the Responses API's usage is read from it)."""
    return completion_usage(samples).dump()


# A project's knowledge as an answer's `ember` gives it (project, knowledge, sources), for that answer's whole
# text: each source says whether the answer used it (`cited`, `quoted`: projects/turn.py answered_json)
KnowledgeReport = Callable[[str], dict[str, Any]]

# One sample's answer: text, stop reason, metrics, its tokens' log-probabilities if asked for, its tool calls
Sample = tuple[str, str, Figures | None, list[TokenLogprob] | None, ChoiceCalls]


class ResponseBuilder:
    """Ids, timestamps and shapes of one response (chat.completion[.chunk] or text_completion)."""

    def __init__(self, kind: str, model: str) -> None:
        self.kind = kind
        self.model = model
        self.id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self._thinking: dict[int, ThinkingStream] = {}  # per choice: thinking goes out as reasoning_content
        self.attachments: list[dict[str, Any]] | None = None  # how the request's files were used (`ember`)
        self.knowledge: KnowledgeReport | None = None  # a project's passages given (`ember`: project, sources…)
        self._offset = 0  # the completions API's text_offset of the next logprobs entry (per choice)

    def _ember(self, metrics: Figures | None, answer: str = "") -> dict[str, Any] | None:
        """The `ember` of an answer: its metrics, how the request's files were used, and its project's
        knowledge, whose sources say whether `answer` (that answer's whole text) used each."""
        ember = metrics.to_dict() if metrics else None
        if self.attachments is not None:
            ember = {**(ember or {}), "attachments": self.attachments}
        if self.knowledge is not None:
            ember = {**(ember or {}), **self.knowledge(answer)}
        return ember

    def _choice_ember(self, metrics: Figures | None, answer: str) -> dict[str, Any] | None:
        """One choice's entry in `ember.choices` (of several): its metrics, and in a project the numbers of
        the sources it `cited` and `quoted` (the top-level `ember.sources` say so of the first choice)."""
        ember = metrics.to_dict() if metrics else None
        if self.knowledge is not None:
            sources = self.knowledge(answer)["sources"]
            used = {key: [s["n"] for s in sources if s[key]] for key in ("cited", "quoted")}
            ember = {**(ember or {}), **used}
        return ember

    def _base(self) -> dict[str, Any]:
        return {"id": self.id, "created": self.created, "model": self.model}

    def _logprobs(self, entries: list[TokenLogprob] | None) -> dict[str, Any] | None:
        if entries is None:
            return None
        if self.kind == "chat":
            return chat_logprobs(entries)
        shape = completion_logprobs(entries, self._offset)
        self._offset += sum(len(t) for t in shape["tokens"])
        return shape

    def _chat_logprobs(self, entries: list[TokenLogprob] | None) -> ChoiceLogprobs | None:
        shape = self._logprobs(entries)
        return None if shape is None else ChoiceLogprobs.model_validate(shape)

    def _completion_logprobs(self, entries: list[TokenLogprob] | None) -> Logprobs | None:
        shape = self._logprobs(entries)
        return None if shape is None else Logprobs.model_validate(shape)

    def chunk(
        self,
        text: str | None,
        finish: FinishReason | None = None,
        first: bool = False,
        index: int = 0,
        logprobs: list[TokenLogprob] | None = None,
    ) -> dict[str, Any]:
        return self._chunk(text, finish, first, index, logprobs).dump()

    def _chunk(
        self,
        text: str | None,
        finish: FinishReason | None,
        first: bool,
        index: int,
        logprobs: list[TokenLogprob] | None,
    ) -> ChatCompletionChunk | Completion:
        if first:
            self._offset = 0
        if self.kind == "chat":
            delta = ChoiceDelta()
            if first:
                delta.role = "assistant"
            if text:
                thinking, answer = self._thinking.setdefault(index, ThinkingStream()).feed(text)
                if thinking:
                    delta.reasoning_content = thinking
                if answer or not thinking:
                    delta.content = answer
            elif text is not None:
                delta.content = text
            choice = ChunkChoice(index=index, delta=delta, logprobs=self._chat_logprobs(logprobs), finish_reason=finish)
            return ChatCompletionChunk(
                **self._base(), object="chat.completion.chunk", system_fingerprint=None, choices=[choice]
            )
        text_choice = CompletionChoice(
            index=index, text=text or "", logprobs=self._completion_logprobs(logprobs), finish_reason=finish
        )
        return Completion(**self._base(), object="text_completion", choices=[text_choice])

    def tool_chunk(self, deltas: list[dict[str, Any]], index: int = 0) -> dict[str, Any]:
        """A chunk of choice `index` with `delta.tool_calls` (see tool_wire.call_deltas)."""
        delta = ChoiceDelta(tool_calls=[ChoiceDeltaToolCall.model_validate(d) for d in deltas])
        choice = ChunkChoice(index=index, delta=delta, logprobs=None, finish_reason=None)
        return ChatCompletionChunk(
            **self._base(), object="chat.completion.chunk", system_fingerprint=None, choices=[choice]
        ).dump()

    def final_chunk(
        self,
        reason: str,
        metrics: Figures | None,
        index: int = 0,
        logprobs: list[TokenLogprob] | None = None,
        calls: ChoiceCalls | None = None,
        answer: str = "",
    ) -> dict[str, Any]:
        """The chunk that ends choice `index`; its `ember` has that sample's metrics (`logprobs`: of
        tokens whose text was held back until the end, if any; `invalid_tool_calls`: its calls that
        were not returned as calls; `answer`: the choice's whole text, which its project's sources say
        they were used by or not)."""
        reason = calls.finish_reason(reason) if calls is not None else reason
        out = self._chunk(None if self.kind == "chat" else "", finish_reason(reason), False, index, logprobs)
        ember = self._ember(metrics, answer)
        if calls is not None and calls.invalid:
            ember = {**(ember or {}), "invalid_tool_calls": calls.notes(index)}
        out.ember = ember
        return out.dump()

    def usage_chunk(self, samples: list[Figures | None]) -> dict[str, Any]:
        if self.kind == "chat":
            return ChatCompletionChunk(
                **self._base(), object="chat.completion.chunk", choices=[], usage=completion_usage(samples)
            ).dump()
        return Completion(**self._base(), object="text_completion", choices=[], usage=completion_usage(samples)).dump()

    def response(self, samples: list[Sample]) -> dict[str, Any]:
        """The whole response: a choice per sample (text, stop reason, metrics). Its `ember` has the
        first sample's metrics (and in a project, its sources as the first choice used them), and with
        several samples each one's under `choices` (in a project, with the sources it cited and quoted)."""
        chat_choices: list[Choice] = []
        text_choices: list[CompletionChoice] = []
        invalid: list[dict[str, Any]] = []
        for index, (text, reason, _metrics, entries, calls) in enumerate(samples):
            self._offset = 0
            reason = calls.finish_reason(reason)
            invalid += calls.notes(index)
            if self.kind == "chat":
                split = split_thinking(text)
                tool_calls = calls.message_calls()
                content = None if tool_calls and not split.answer.strip() else split.answer  # null beside calls
                message = ChatCompletionMessage(role="assistant", content=content, refusal=None)
                if split.thinking:
                    message.reasoning_content = split.thinking
                if tool_calls:
                    message.tool_calls = [ChatCompletionMessageToolCall.model_validate(c) for c in tool_calls]
                logs = self._chat_logprobs(entries)
                chat_choices.append(
                    Choice(index=index, message=message, logprobs=logs, finish_reason=finish_reason(reason))
                )
            else:
                text_logs = self._completion_logprobs(entries)
                text_choices.append(
                    CompletionChoice(index=index, text=text, logprobs=text_logs, finish_reason=finish_reason(reason))
                )
        metrics = [m for _, _, m, _, _ in samples]
        ember = self._ember(metrics[0] if metrics else None, samples[0][0] if samples else "")
        if len(samples) > 1:
            ember = {**(ember or {}), "choices": [self._choice_ember(m, text) for text, _, m, _, _ in samples]}
        if invalid:
            ember = {**(ember or {}), "invalid_tool_calls": invalid}
        if self.kind == "chat":
            return ChatCompletion(
                **self._base(),
                object="chat.completion",
                system_fingerprint=None,
                choices=chat_choices,
                usage=completion_usage(metrics),
                ember=ember,
            ).dump()
        return Completion(
            **self._base(), object="text_completion", choices=text_choices, usage=completion_usage(metrics), ember=ember
        ).dump()


@dataclass(frozen=True)
class ChunkRead:
    """What one chunk of a streamed answer from another server carries, each field read by type (one of
    the wrong type is absent). Servers differ: the thinking comes as `reasoning_content` (vLLM,
    llama.cpp) or `reasoning` (Ollama); usage may ride on every chunk (vLLM's continuous usage), on a
    last chunk with no choices, or never; llama.cpp's server adds its `timings`."""

    text: str = ""  # the answer's text: chat's delta.content, the completions API's text
    reasoning: str = ""  # chat: the thinking
    tool_calls: Any = None  # chat: delta.tool_calls as sent, in pieces (tool_wire.CallDeltas reads them)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    choices: bool = False  # the chunk has choices (usage beside them is a running count)
    error: tuple[str, object] | None = None  # an error event: its message and its `code` as sent


def read_chunk(obj: dict[str, Any], chat: bool) -> ChunkRead:
    """One event's JSON object of a streamed chat completion (`chat`) or completion."""
    if obj.get("error"):  # (what else it carries is not read: the answer ends there)
        err = obj["error"]
        message = err.get("message", json.dumps(err)) if isinstance(err, dict) else str(err)
        return ChunkRead(error=(message, err.get("code") if isinstance(err, dict) else None))
    choices = obj.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    text = reasoning = ""
    tool_calls = None
    if chat:
        delta = choice.get("delta") or {}
        reasoning = _text(delta.get("reasoning_content")) or _text(delta.get("reasoning"))
        text = _text(delta.get("content"))
        tool_calls = delta.get("tool_calls")
    else:
        text = _text(choice.get("text"))
    return ChunkRead(
        text,
        reasoning,
        tool_calls,
        str(choice["finish_reason"]) if choice.get("finish_reason") else None,
        obj["usage"] if isinstance(obj.get("usage"), dict) else None,
        obj["timings"] if isinstance(obj.get("timings"), dict) else None,
        bool(choices),
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
