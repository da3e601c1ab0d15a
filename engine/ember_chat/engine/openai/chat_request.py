"""What a /v1/chat/completions or /v1/completions body may carry, as Ember's API server reads it: the
fields it knows (sampling, refused, accepted at their neutral value, ignored), a field it does not
know (a 400 naming it), the messages (roles, content parts, tool calls and results), Ember's `ember`
extension, the number of samples and log-probabilities, each with a 400 naming what is wrong.
serve/api_request.py puts them together with the served model's preset and the grammar's checks."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ember_chat.engine.attachments import Extracted
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import MAX_LOGIT_BIAS, SPECULATIVE_MODES
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.content_parts import ContentError, PartReader, parse_content
from ember_chat.engine.openai.tool_wire import check_tool_turns, history_calls

SAMPLING_FIELDS = {
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
NEUTRAL = {"echo": False, "best_of": 1}
REFUSED = ("functions", "function_call")
_IGNORED = ("user", "stream_options", "store", "metadata", "service_tier")
# llama.cpp's cache_prompt: Ember always reuses the cached prefix of the prompt; vLLM's pair that
# continues a final assistant message, as Ember always does (its own remote backend sends them)
_NO_OP = ("cache_prompt", "continue_final_message", "add_generation_prompt")
_READ = (
    "model", "stream", "n", "max_tokens", "max_completion_tokens", "stop", "chat_template_kwargs", "response_format",
    "grammar", "json_schema", "logprobs", "top_logprobs", "ember", "tools", "tool_choice", "parallel_tool_calls",
    "logit_bias",
)  # fmt: skip
_KNOWN = {*SAMPLING_FIELDS, *NEUTRAL, *REFUSED, *_IGNORED, *_NO_OP, *_READ}
KNOWN_BY_KIND = {"chat": _KNOWN | {"messages"}, "completion": _KNOWN | {"prompt", "suffix"}}


def read_messages(raw: Any, files: dict[int, list[Extracted]], reading: PartReader) -> list[ChatMessage]:
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


MAX_N = 16  # samples per request (each is a whole generation, in turn)


@dataclass(frozen=True)
class EmberOptions:
    """The request's `ember` extension object (Ember's own options), read."""

    trim_history: bool = False  # leave the oldest messages out, as the window does
    speculative: str | None = None  # one of SPECULATIVE_MODES; None: the server's default (serve --speculative)
    project: str | None = None  # answer in this project (its instructions and knowledge): a chat request's


_EMBER_OPTIONS = tuple(f.name for f in fields(EmberOptions))


def ember_options(raw: Any) -> EmberOptions:
    """The request's `ember` extension object, each option checked (a 400 naming it)."""
    if raw is None:
        return EmberOptions()
    if not isinstance(raw, dict):
        raise ApiError(400, "ember must be an object.", param="ember")
    unknown = sorted(set(raw) - set(_EMBER_OPTIONS))
    if unknown:
        known = ", ".join(_EMBER_OPTIONS)
        raise ApiError(400, f"ember: unknown option(s) {', '.join(unknown)} (known: {known}).", param="ember")
    trim = raw.get("trim_history", False)
    if not isinstance(trim, bool):
        raise ApiError(400, "ember.trim_history must be true or false.", param="ember")
    speculative = raw.get("speculative")
    if speculative is not None and speculative not in SPECULATIVE_MODES:
        allowed = ", ".join(SPECULATIVE_MODES)
        raise ApiError(
            400, f"ember.speculative must be one of {allowed}, got {speculative!r}.", param="ember.speculative"
        )
    project = raw.get("project")
    if project is not None and (not isinstance(project, str) or not project.strip()):
        raise ApiError(400, "ember.project must be a project's name.", param="ember.project")
    return EmberOptions(trim_history=trim, speculative=speculative, project=project)


def logprobs_wanted(kind: str, body: dict[str, Any]) -> int | None:
    """How many alternatives per token a request wants with its log-probabilities (None: none):
    chat's `logprobs: true` with `top_logprobs` (0-20), or the completions API's `logprobs` (0-5)."""
    logprobs, top = body.get("logprobs"), body.get("top_logprobs")

    def whole(value: Any, high: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high

    if kind == "completion":
        if top is not None:
            raise ApiError(400, "top_logprobs is chat's; completions take logprobs (0 to 5).", param="top_logprobs")
        if logprobs is not None and not whole(logprobs, 5):
            raise ApiError(400, "logprobs must be a whole number from 0 to 5.", param="logprobs")
        return logprobs if isinstance(logprobs, int) else None
    if not isinstance(logprobs, bool | None):
        raise ApiError(400, "logprobs must be true or false.", param="logprobs")
    if top is not None and not whole(top, 20):
        raise ApiError(400, "top_logprobs must be a whole number from 0 to 20.", param="top_logprobs")
    if top is not None and not logprobs:
        raise ApiError(400, "top_logprobs needs logprobs: true.", param="top_logprobs")
    return (top or 0) if logprobs else None


def read_logit_bias(raw: Any) -> tuple[tuple[int, float], ...]:
    """`logit_bias` as (token id, bias) pairs: OpenAI's object of token ids (as strings) to a bias from
    -100 to 100, or llama.cpp's server's array of [id, bias] pairs; a bias of `false` (llama.cpp's
    server's) bans the token, as -100 does. null, {} and [] are none. (Whether the ids are in the model's
    vocabulary is the local runtime's check; a remote server checks its own.)"""
    if raw is None:
        return ()
    if isinstance(raw, dict):
        items = list(raw.items())
    elif isinstance(raw, list):
        if not all(isinstance(item, list) and len(item) == 2 for item in raw):
            raise ApiError(
                400, "logit_bias: each entry of the array form must be a [token id, bias] pair.", param="logit_bias"
            )
        items = [(token, bias) for token, bias in raw]
        text = next((token for token, _bias in items if isinstance(token, str)), None)
        if text is not None:  # (llama.cpp's server would tokenize it: Ember does not guess its tokens)
            raise ApiError(
                400, f"logit_bias: the array form takes token ids, not text ({text[:40]!r}).", param="logit_bias"
            )
    else:
        raise ApiError(
            400, 'logit_bias must be an object of token ids to biases, like {"1234": -100}.', param="logit_bias"
        )
    if len(items) > MAX_LOGIT_BIAS:
        raise ApiError(
            400, f"logit_bias has {len(items):,} entries; at most {MAX_LOGIT_BIAS:,} are allowed.", param="logit_bias"
        )
    pairs: dict[int, float] = {}
    for key, bias in items:
        token = _token_id(key)
        if token is None:
            raise ApiError(
                400, f"logit_bias: {str(key)[:40]!r} is not a token id (a whole number from 0).", param="logit_bias"
            )
        if token in pairs:
            raise ApiError(400, f"logit_bias: token {token} is given twice.", param="logit_bias")
        if bias is False:
            bias = -100
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not -100 <= bias <= 100:
            wrong = f"must be a number from -100 to 100 (or false), got {bias!r}"
            raise ApiError(400, f"logit_bias: the bias of token {token} {wrong}.", param="logit_bias")
        pairs[token] = float(bias)
    return tuple(sorted(pairs.items()))


def _token_id(key: Any) -> int | None:
    """A token id as the object form spells it (a string of digits) or the array form (a number)."""
    if isinstance(key, str) and key.isascii() and key.isdigit():
        return int(key)
    if isinstance(key, int) and not isinstance(key, bool) and key >= 0:
        return key
    return None
