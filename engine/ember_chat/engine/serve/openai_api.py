"""The OpenAI wire format of Ember's API server: request validation (clear 400s naming the
parameter) and the exact response, chunk and error shapes.

Extension: the chunk that carries `finish_reason` (and a non-streaming response) has a top-level
`ember` object with Ember's full metrics for the generation (the keys of `GenerationMetrics`: ttft_s,
prefill_tokens_per_s, decode_tokens_per_s, itl_p50_ms, …). Clients that do not know it ignore it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from ember_chat.engine.attachments import Extracted
from ember_chat.engine.core.logprobs import TokenLogprob
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.reasoning import ThinkingStream, split_thinking
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.openai.api_error import TRIM_HINT, ApiError
from ember_chat.engine.openai.content_parts import ContentError, Reading, parse_content
from ember_chat.engine.openai.logprobs import chat_logprobs, completion_logprobs
from ember_chat.engine.openai.tool_wire import ChoiceCalls, check_tool_turns, history_calls, tool_request
from ember_chat.engine.serve.preset_defaults import preset_values, with_preset_system
from ember_chat.engine.serve.request_options import MAX_N, constraint, ember_options, logprobs_wanted
from ember_chat.engine.storage.presets import Preset


@dataclass(frozen=True)
class ApiRequest:
    kind: str  # chat or completion
    model: str | None
    params: SamplingParams
    stream: bool
    include_usage: bool
    messages: list[ChatMessage] | None = None
    prompt: str | None = None
    files: dict[int, list[Extracted]] = field(default_factory=dict)  # message index → its `file` parts, read
    n: int = 1  # samples, one after another with distinct seeds (choices[i])
    trim_history: bool = False  # `"ember": {"trim_history": true}`: leave the oldest messages out, as the window does
    tools: ToolRequest | None = None  # the tools the model may call (chat)


_SAMPLING_FIELDS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repeat_penalty": "repeat_penalty",
    "repetition_penalty": "repeat_penalty",
    "seed": "seed",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "ignore_eos": "ignore_eos",  # llama.cpp's and vLLM's: exactly max_tokens (benchmarks)
}
# Accepted and ignored only at their neutral value; anything else is refused rather than ignored.
_NEUTRAL = {"echo": False, "best_of": 1}
_REFUSED = ("functions", "function_call", "logit_bias", "suffix")
_IGNORED = ("user", "stream_options", "store", "metadata", "service_tier")
# llama.cpp's cache_prompt: Ember always reuses the cached prefix of the prompt; vLLM's pair that
# continues a final assistant message, as Ember always does (its own remote backend sends them)
_NO_OP = ("cache_prompt", "continue_final_message", "add_generation_prompt")
_READ = (
    "model", "stream", "n", "max_tokens", "max_completion_tokens", "stop", "chat_template_kwargs", "response_format",
    "grammar", "json_schema", "logprobs", "top_logprobs", "ember", "tools", "tool_choice", "parallel_tool_calls",
)  # fmt: skip
_KNOWN = {*_SAMPLING_FIELDS, *_NEUTRAL, *_REFUSED, *_IGNORED, *_NO_OP, *_READ}
_KNOWN_BY_KIND = {"chat": _KNOWN | {"messages"}, "completion": _KNOWN | {"prompt"}}


def _messages(raw: Any, files: dict[int, list[Extracted]], reading: Reading | None = None) -> list[ChatMessage]:
    """The messages; a user message's `file` parts go into `files` (message index → files read, as
    `reading` says: limits, and when to stop)."""
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "messages must be a non-empty array.", param="messages")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise ApiError(400, f"messages[{i}] must be an object.", param="messages")
        role = m.get("role")
        role = "system" if role == "developer" else role
        if role not in ("system", "user", "assistant", "tool"):
            raise ApiError(
                400, f"messages[{i}].role must be system, user, assistant or tool, got {role!r}.", param="messages"
            )
        try:
            content = parse_content(m.get("content"), f"messages[{i}].content", reading)
        except ContentError as exc:
            raise ApiError(400, str(exc), param="messages") from None
        if (content.files or content.images) and role != "user":
            raise ApiError(400, f"messages[{i}]: only a user message can carry files and images.", param="messages")
        if content.files:
            files[i] = content.files
        call_id = m.get("tool_call_id")
        if role == "tool" and not (isinstance(call_id, str) and call_id):
            raise ApiError(400, f"messages[{i}] is a tool message without its tool_call_id.", param="messages")
        calls = history_calls(m, f"messages[{i}]")
        tool_id = call_id if role == "tool" else None
        images = tuple(content.images)
        out.append(ChatMessage(role, content.text, images=images, tool_calls=calls, tool_call_id=tool_id))
    check_tool_turns(out)
    if out[-1].role == "system" or not any(m.role == "user" for m in out):
        raise ApiError(
            400,
            "the messages must end with the user's (or the results of tool calls, or a partial answer to continue).",
            param="messages",
        )
    return out


# How the user of `ember-chat serve` has unknown fields ignored; the window's server names its own
# setting instead (ServerConfig.unknown_fields_advice): the 400 must name a switch that server has.
CLI_UNKNOWN_FIELDS_ADVICE = "start the server with --allow-unknown-fields to ignore them"


def check_known_fields(
    body: dict[str, Any], known: set[str], allow_unknown: bool, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> None:
    """A field Ember does not know is a 400 naming it (a client would believe it applied), unless
    `allow_unknown` (the server's option for clients that send vendor noise); `advice` says how the
    server that answers turns that option on."""
    unknown = sorted(set(body) - known)
    if unknown and not allow_unknown:
        raise ApiError(
            400,
            f"Unknown field(s): {', '.join(unknown)}. Ember's server does not know them, so it would not apply "
            f"them; remove them (or {advice}).",
            param=unknown[0],
            code="unknown_field",
        )


def parse_request(
    kind: str,
    body: Any,
    allow_unknown: bool = False,
    preset: Preset | None = None,
    reading: Reading | None = None,
    unknown_advice: str = CLI_UNKNOWN_FIELDS_ADVICE,
) -> ApiRequest:
    """Validate a /v1/chat/completions (kind "chat") or /v1/completions ("completion") body. Unknown
    fields: `check_known_fields` (`allow_unknown`, `unknown_advice`). `preset`: the served model's
    default preset, what the request does not say itself (preset_defaults.py). `reading`: how its files
    are read (content_parts.Reading: the limits, and what says the client is gone)."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    check_known_fields(body, _KNOWN_BY_KIND[kind], allow_unknown, unknown_advice)
    for name in _REFUSED:
        if body.get(name) not in (None, [], {}):
            instead = " (send tools instead)" if name.startswith("function") else ""
            raise ApiError(400, f"{name} is not supported by Ember's server{instead}.", param=name)
    tools = tool_request(body, kind)
    for name, neutral in _NEUTRAL.items():
        if name in body and body[name] not in (None, neutral):
            raise ApiError(400, f"{name}={body[name]!r} is not supported (only {neutral!r}).", param=name)
    values: dict[str, Any] = {**preset_values(preset), **constraint(body)}
    top = logprobs_wanted(kind, body)
    if top is not None:
        values["logprobs"] = top
    sent: dict[str, str] = {}  # SamplingParams field → the request's name for it (for `param`)
    for name, target in _SAMPLING_FIELDS.items():
        if body.get(name) is not None:
            values[target] = body[name]
            sent[target] = name
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        values["max_tokens"] = max_tokens
        sent["max_tokens"] = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or len(stop) > 16:
            raise ApiError(400, "stop must be a string or an array of up to 16 strings.", param="stop")
        values["stop"] = tuple(stop)
    kwargs = body.get("chat_template_kwargs")  # vLLM's and llama.cpp's way to flip a thinking switch
    if kwargs is not None:
        if not isinstance(kwargs, dict):
            raise ApiError(400, "chat_template_kwargs must be an object.", param="chat_template_kwargs")
        if "enable_thinking" in kwargs:
            values["thinking"] = kwargs["enable_thinking"]
            sent["thinking"] = "chat_template_kwargs"
    try:
        params = SamplingParams(**values)
    except InvalidParameter as exc:
        # The message names the parameter as people read it ("top-p", "max tokens").
        message = str(exc).lower().replace("-", "_").replace(" ", "_")
        name = next((k for k in values if k in message), None)
        raise ApiError(400, str(exc), param=sent.get(name or "", name)) from exc
    except TypeError as exc:
        raise ApiError(400, f"invalid parameter: {exc}") from exc
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false.", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object.", param="stream_options")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model must be a string.", param="model")
    n = body.get("n", 1)
    if n is None:
        n = 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
        raise ApiError(400, f"n must be a whole number from 1 to {MAX_N}.", param="n")
    common = {
        "model": model, "params": params, "stream": stream, "include_usage": bool(options.get("include_usage")), "n": n,
    }  # fmt: skip
    if kind == "chat":
        files: dict[int, list[Extracted]] = {}
        messages, files = with_preset_system(_messages(body.get("messages"), files, reading), files, preset)
        trim = ember_options(body.get("ember")).get("trim_history", False)
        return ApiRequest("chat", messages=messages, files=files, trim_history=trim, tools=tools, **common)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt must be a string.", param="prompt")
    ember_options(body.get("ember"))
    return ApiRequest("completion", prompt=prompt, **common)


# Ember's stop reasons of an answer that ended as it should → OpenAI's finish_reason. The others
# (cancelled, interrupted, error) have no OpenAI word, and "stop" would tell a client its answer is
# whole: they are errors (`unfinished_error`).
FINISH_REASONS = {
    StopReason.STOP: "stop",
    StopReason.STOP_STRING: "stop",
    StopReason.LENGTH: "length",
    StopReason.CONTEXT_FULL: "length",
    StopReason.TOOL_CALLS: "tool_calls",
}


def finish_reason(reason: str) -> str:
    """OpenAI's finish_reason for an answer that ended cleanly (check `unfinished_error` first)."""
    try:
        return FINISH_REASONS[reason]
    except KeyError:
        raise ValueError(f"{reason!r} is not the end of a finished answer; answer with unfinished_error().") from None


_STATUS_BY_KIND = {  # the engine's failures (by error class name) that are the request's fault, or 503
    "ContextOverflowError": (400, "context_length_exceeded"),
    "HistoryTooLong": (400, "context_length_exceeded"),
    "InvalidParameter": (400, "invalid_parameter"),
    "ImagesNotSupported": (400, "images_not_supported"),
    "AttachmentError": (400, "invalid_attachment"),
    "NoModelLoaded": (503, "model_not_loaded"),
    "NoRoomInContext": (503, "context_busy"),  # the other answers hold the context: it fits once they end
}


def unfinished_error(reason: str, failure: tuple[str, str] | None) -> ApiError | None:
    """The error for a generation that did not finish, or None when it did. `failure`: the engine's
    message and error kind, if it reported one. Before any output it is the response; in a stream,
    after the 200, it goes out as a `data: {"error": ...}` event, on which the openai client raises."""
    if failure is not None:
        status, code = _STATUS_BY_KIND.get(failure[1], (500, "generation_failed"))
        type_ = "invalid_request_error" if status == 400 else "server_error"
        message = failure[0] + (TRIM_HINT if failure[1] == "HistoryTooLong" else "")
        return ApiError(status, message, type_, code=code)
    if reason in FINISH_REASONS:
        return None
    if reason == StopReason.CANCELLED:
        message = (
            "The generation was cancelled before it finished: Ember stopped it (its server or window is closing, "
            "the model is being unloaded, or it was cancelled in Ember)."
        )
        # 503, but not to be retried: clients that honour x-should-retry (the openai packages) would
        # otherwise send again an answer that Ember, or its user, stopped on purpose
        return ApiError(503, message, "server_error", code="generation_cancelled", headers={"x-should-retry": "false"})
    message = f"The generation ended before it finished ({reason})."
    return ApiError(500, message, "server_error", code="generation_failed")


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


def usage(samples: list[Figures | None]) -> dict[str, Any]:
    """OpenAI's usage of one request: its prompt once, the completions of all its samples."""
    first = samples[0] if samples else None
    prompt = first.prompt_tokens if first else 0
    out = sum(m.output_tokens for m in samples if m)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": out,
        "total_tokens": prompt + out,
        "prompt_tokens_details": {"cached_tokens": first.prompt_tokens_reused if first else 0},
        "completion_tokens_details": {"reasoning_tokens": sum(m.thinking_tokens for m in samples if m)},
    }


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
        self._offset = 0  # the completions API's text_offset of the next logprobs entry (per choice)

    def _ember(self, metrics: Figures | None) -> dict[str, Any] | None:
        ember = metrics.to_dict() if metrics else None
        if self.attachments is not None:
            ember = {**(ember or {}), "attachments": self.attachments}
        return ember

    def _base(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def _logprobs(self, entries: list[TokenLogprob] | None) -> dict[str, Any] | None:
        if entries is None:
            return None
        if self.kind == "chat":
            return chat_logprobs(entries)
        shape = completion_logprobs(entries, self._offset)
        self._offset += sum(len(t) for t in shape["tokens"])
        return shape

    def chunk(
        self,
        text: str | None,
        finish: str | None = None,
        first: bool = False,
        index: int = 0,
        logprobs: list[TokenLogprob] | None = None,
    ) -> dict[str, Any]:
        if first:
            self._offset = 0
        if self.kind == "chat":
            delta: dict[str, Any] = {}
            if first:
                delta["role"] = "assistant"
            if text:
                thinking, answer = self._thinking.setdefault(index, ThinkingStream()).feed(text)
                if thinking:
                    delta["reasoning_content"] = thinking
                if answer or not thinking:
                    delta["content"] = answer
            elif text is not None:
                delta["content"] = text
            choice: dict[str, Any] = {
                "index": index, "delta": delta, "logprobs": self._logprobs(logprobs), "finish_reason": finish,
            }  # fmt: skip
            return {**self._base("chat.completion.chunk"), "system_fingerprint": None, "choices": [choice]}
        choice = {"index": index, "text": text or "", "logprobs": self._logprobs(logprobs), "finish_reason": finish}
        return {**self._base("text_completion"), "choices": [choice]}

    def tool_chunk(self, deltas: list[dict[str, Any]], index: int = 0) -> dict[str, Any]:
        """A chunk of choice `index` with `delta.tool_calls` (see tool_wire.call_deltas)."""
        choice = {"index": index, "delta": {"tool_calls": deltas}, "logprobs": None, "finish_reason": None}
        return {**self._base("chat.completion.chunk"), "system_fingerprint": None, "choices": [choice]}

    def final_chunk(
        self,
        reason: str,
        metrics: Figures | None,
        index: int = 0,
        logprobs: list[TokenLogprob] | None = None,
        calls: ChoiceCalls | None = None,
    ) -> dict[str, Any]:
        """The chunk that ends choice `index`; its `ember` has that sample's metrics (`logprobs`: of
        tokens whose text was held back until the end, if any; `invalid_tool_calls`: its calls that
        were not returned as calls)."""
        reason = calls.finish_reason(reason) if calls is not None else reason
        out = self.chunk(None if self.kind == "chat" else "", finish_reason(reason), index=index, logprobs=logprobs)
        out["ember"] = self._ember(metrics)
        if calls is not None and calls.invalid:
            out["ember"] = {**(out["ember"] or {}), "invalid_tool_calls": calls.notes(index)}
        return out

    def usage_chunk(self, samples: list[Figures | None]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {**self._base(obj), "choices": [], "usage": usage(samples)}

    def response(self, samples: list[Sample]) -> dict[str, Any]:
        """The whole response: a choice per sample (text, stop reason, metrics). Its `ember` has the
        first sample's metrics, and with several samples each one's under `choices`."""
        choices = []
        invalid: list[dict[str, Any]] = []
        for index, (text, reason, _metrics, entries, calls) in enumerate(samples):
            self._offset = 0
            reason = calls.finish_reason(reason)
            invalid += calls.notes(index)
            if self.kind == "chat":
                split = split_thinking(text)
                tool_calls = calls.message_calls()
                content = None if tool_calls and not split.answer.strip() else split.answer  # null beside calls
                message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
                if split.thinking:
                    message["reasoning_content"] = split.thinking
                if tool_calls:
                    message["tool_calls"] = tool_calls
                choices.append({"index": index, "message": message, "logprobs": self._logprobs(entries),
                                "finish_reason": finish_reason(reason)})  # fmt: skip
            else:
                choices.append({"index": index, "text": text, "logprobs": self._logprobs(entries),
                                "finish_reason": finish_reason(reason)})  # fmt: skip
        if self.kind == "chat":
            base = {**self._base("chat.completion"), "system_fingerprint": None}
        else:
            base = self._base("text_completion")
        metrics = [m for _, _, m, _, _ in samples]
        ember = self._ember(metrics[0] if metrics else None)
        if len(samples) > 1:
            ember = {**(ember or {}), "choices": [m.to_dict() if m else None for m in metrics]}
        if invalid:
            ember = {**(ember or {}), "invalid_tool_calls": invalid}
        return {**base, "choices": choices, "usage": usage(metrics), "ember": ember}
