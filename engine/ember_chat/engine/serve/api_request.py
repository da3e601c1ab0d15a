"""What Ember's API server makes of a request: the body read as the OpenAI wire says
(openai/chat_request.py), over the served model's default preset, its constrained output checked
against the grammar (request_options.py), as an ApiRequest for the engine; and the error for an answer
that did not finish."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ember_chat.engine.attachments import Extracted
from ember_chat.engine.core.infill import Infill
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.openai.api_error import TRIM_HINT, ApiError
from ember_chat.engine.openai.chat_body import BODY_BY_KIND, ChatBody
from ember_chat.engine.openai.chat_request import (
    CLI_UNKNOWN_FIELDS_ADVICE,
    MAX_N,
    NEUTRAL,
    REFUSED,
    SAMPLING_FIELDS,
    ember_options,
    logprobs_wanted,
    read_logit_bias,
    read_messages,
)
from ember_chat.engine.openai.responses import FINISH_REASONS
from ember_chat.engine.openai.tool_wire import tool_request
from ember_chat.engine.openai.typed_body import read_body
from ember_chat.engine.serve.file_reading import Reading
from ember_chat.engine.serve.preset_defaults import preset_values, with_preset_system
from ember_chat.engine.serve.request_options import constraint
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
    infill: Infill | None = None  # fill-in-the-middle: `suffix` on a completion, or /infill (infill_request.py)
    project: str | None = None  # `"ember": {"project": NAME}`: answer with that project's instructions and knowledge


def parse_request(
    kind: str,
    body: Any,
    allow_unknown: bool = False,
    preset: Preset | None = None,
    reading: Reading | None = None,
    unknown_advice: str = CLI_UNKNOWN_FIELDS_ADVICE,
    *,
    speculative: str = "auto",
) -> ApiRequest:
    """Validate a /v1/chat/completions (kind "chat") or /v1/completions ("completion") body. Its
    envelope is read as openai/chat_body's model of its kind (unknown fields: `allow_unknown`,
    `unknown_advice`). `preset`: the served model's default preset, what the request does not say itself
    (preset_defaults.py). `reading`: how its files are read (file_reading.Reading: the limits, and what
    says the client is gone). `speculative`: the server's speculative decoding, for a request whose
    `ember` does not name one (serve --speculative)."""
    # the envelope (openai/chat_body): unknown fields and each known field's JSON type, named in a 400
    typed = read_body(BODY_BY_KIND[kind], body, allow_unknown, unknown_advice)
    for name in REFUSED:
        if body.get(name) not in (None, [], {}):
            instead = " (send tools instead)" if name.startswith("function") else ""
            raise ApiError(400, f"{name} is not supported by Ember's server{instead}.", param=name)
    tools = tool_request(body, kind)
    for name, neutral in NEUTRAL.items():
        if name in body and body[name] not in (None, neutral):
            raise ApiError(400, f"{name}={body[name]!r} is not supported (only {neutral!r}).", param=name)
    ember = ember_options(body.get("ember"))
    # the server's speculative decoding, under the preset's values and the request's own
    values: dict[str, Any] = {"speculative": speculative, **preset_values(preset), **constraint(body)}
    if ember.speculative is not None:
        values["speculative"] = ember.speculative
    top = logprobs_wanted(kind, body)
    if top is not None:
        values["logprobs"] = top
    bias = read_logit_bias(body.get("logit_bias"))
    if bias:
        values["logit_bias"] = bias
    sent: dict[str, str] = {}  # SamplingParams field → the request's name for it (for `param`)
    for name, target in SAMPLING_FIELDS.items():
        if body.get(name) is not None:
            values[target] = body[name]
            sent[target] = name
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        values["max_tokens"] = max_tokens
        sent["max_tokens"] = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    if typed.stop is not None:
        values["stop"] = tuple(typed.stop)
    kwargs = typed.chat_template_kwargs  # vLLM's and llama.cpp's way to flip a thinking switch
    if kwargs is not None and "enable_thinking" in kwargs:
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
    options = typed.stream_options or {}
    n = 1 if typed.n is None else typed.n
    if not 1 <= n <= MAX_N:
        raise ApiError(400, f"n must be a whole number from 1 to {MAX_N}.", param="n")
    common = {
        "model": typed.model, "params": params, "stream": typed.stream, "n": n,
        "include_usage": bool(options.get("include_usage")),
    }  # fmt: skip
    if isinstance(typed, ChatBody):
        files: dict[int, list[Extracted]] = {}
        messages, files = with_preset_system(read_messages(typed.messages, files, reading or Reading()), files, preset)
        trim = ember.trim_history
        return ApiRequest(
            "chat", messages=messages, files=files, trim_history=trim, tools=tools, project=ember.project, **common
        )
    if ember.project is not None:
        raise ApiError(400, "ember.project needs a chat request (/v1/chat/completions).", param="ember.project")
    prompt: str | list[str] = typed.prompt
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt must be a string.", param="prompt")
    suffix = typed.suffix  # the text after the middle: the model writes what goes between
    infill = Infill(prefix=prompt, suffix=suffix) if suffix is not None else None
    return ApiRequest("completion", prompt=prompt, infill=infill, **common)


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
