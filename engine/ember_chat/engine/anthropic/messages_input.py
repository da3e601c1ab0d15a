"""A /v1/messages body (Anthropic's Messages API) as Ember's API server reads it: the chat completions
body it means (`MessagesBody.chat`), so serve/api_request.parse_request checks and reads it as it does
/v1/chat/completions (sampling, tools, images, the model's template). `system` (a string or text
blocks) is the system message; a message's blocks become chat parts: text, image (base64) an image_url
data: URL; an assistant's `tool_use` blocks its tool_calls, a user's `tool_result` blocks tool messages
(before the user's own words, as Anthropic orders them); `thinking` blocks are not sent back (as a chat
client leaves out reasoning_content). Errors are 400s naming the Messages field."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_body import Number, Raw  # (numbers as sent: the chat route reads them)
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.openai.typed_body import Body, Must
from ember_chat.engine.openai.typed_body import read_body as read_typed


class CountTokensEnvelope(Body):
    """The envelope of a /v1/messages/count_tokens body (openai/typed_body): every top-level field Ember
    knows with its JSON type (None: not sent). What a field holds stays its own reader's: the messages and
    their blocks (messages), system's blocks, tools, tool_choice, thinking, output_config."""

    model: str | None = None  # (required and non-empty: read_body says it as Anthropic's API does)
    messages: Annotated[list[object], Must("a non-empty array of messages")] | None = None
    system: Annotated[str | list[object], Must("a string or an array of text blocks")] | None = None
    tools: Annotated[list[object], Must("an array of tools")] | None = None
    tool_choice: Raw | None = None
    thinking: Raw | None = None
    output_config: Raw | None = None
    # ignored, as meaning nothing on one local server: cache markers (Ember reuses a cached prefix
    # always), a hosted model's speed, who asks and for which workspace
    cache_control: Raw | None = None
    speed: str | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None


class MessagesEnvelope(CountTokensEnvelope):
    """The envelope of a /v1/messages body: count_tokens' fields and the generation's."""

    max_tokens: int | None = None  # (required: read_body says it as Anthropic's API does)
    # (temperature, top_p and top_k: older clients' and other servers'; the current client no longer sends them)
    temperature: Number | None = None
    top_p: Number | None = None
    top_k: int | None = None
    stop_sequences: (
        Annotated[list[Annotated[str, Field(min_length=1), Must("a non-empty string")]],
                  Must("an array of non-empty strings")] | None
    ) = None  # fmt: skip
    stream: bool | None = None
    metadata: Raw | None = None
    # ignored: a hosted queue's tier and region, cache-miss diagnostics
    service_tier: str | None = None
    inference_geo: str | None = None
    # Ember's own options, as on the chat route (openai/chat_request.py ember_options): `{"project": NAME}`
    # answers with the project's instructions and knowledge, its sources in the answer's `ember`
    ember: Raw | None = None
    diagnostics: Raw | None = None


THINKING = ("enabled", "adaptive", "between_tools", "disabled")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# A parse_request error names the chat field; the Messages field it came from
CHAT_TO_MESSAGES = {"stop": "stop_sequences", "chat_template_kwargs": "thinking", "parallel_tool_calls": "tool_choice",
                    "response_format": "output_config"}  # fmt: skip


@dataclass(frozen=True)
class MessagesBody:
    chat: dict[str, Any]  # the chat completions body it means (messages included)
    stop_sequences: tuple[str, ...]  # to say which one ended the answer


def read_body(
    body: Any, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE, *, count: bool = False
) -> MessagesBody:
    """A /v1/messages body (`count`: a /v1/messages/count_tokens one, which has no max_tokens)."""
    # the envelope (CountTokensEnvelope, MessagesEnvelope): unknown fields and each known field's JSON type
    read_typed(CountTokensEnvelope if count else MessagesEnvelope, body, allow_unknown, advice)
    if not body.get("model"):
        raise ApiError(400, "model: a model's name is required.", param="model")
    chat: dict[str, Any] = {"model": body["model"]}
    if not count:
        if body.get("max_tokens") is None:  # required by Anthropic's API: a client relying on a default is wrong
            raise ApiError(400, "max_tokens: Field required.", param="max_tokens")
        chat["max_tokens"] = body["max_tokens"]
        chat.update({k: body[k] for k in ("temperature", "top_p", "top_k", "stream") if body.get(k) is not None})
    stops = body.get("stop_sequences")
    if stops is not None:
        chat["stop"] = stops
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
    if body.get("tool_choice") is not None:
        chat.update(_tool_choice(body["tool_choice"]))
    thinking = body.get("thinking")
    if thinking is not None:
        kind = thinking.get("type") if isinstance(thinking, dict) else None
        if kind not in THINKING:
            raise ApiError(400, f"thinking.type must be one of {', '.join(THINKING)}, got {kind!r}.", param="thinking")
        # a thinking model's switch (budget_tokens has no counterpart: the model decides how long it thinks)
        chat["chat_template_kwargs"] = {"enable_thinking": kind != "disabled"}
    response_format = _output_config(body.get("output_config"))
    if response_format is not None:
        chat["response_format"] = response_format
    if not count and body.get("ember") is not None:
        chat["ember"] = body["ember"]  # (checked by the chat route's parse_request)
    chat["messages"] = _system(body.get("system")) + messages(body.get("messages"))
    return MessagesBody(chat, tuple(stops or ()))


def _output_config(raw: Any) -> dict[str, Any] | None:
    """output_config: `format` (a JSON schema) → the chat route's response_format; `effort` is accepted
    (a local model has no effort setting: its thinking switch is `thinking`)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"effort", "format"}:
        raise ApiError(400, "output_config must be an object with effort and format.", param="output_config")
    if raw.get("effort") is not None and raw["effort"] not in EFFORTS:
        raise ApiError(400, f"output_config.effort must be one of {', '.join(EFFORTS)}, got {raw['effort']!r}.",
                       param="output_config")  # fmt: skip
    fmt = raw.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise ApiError(400, "output_config.format must be {'type': 'json_schema', 'schema': {...}}.",
                       param="output_config")  # fmt: skip
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}


def _system(raw: Any) -> list[dict[str, Any]]:
    if raw is None or raw == "" or raw == []:
        return []
    if isinstance(raw, str):
        return [{"role": "system", "content": raw}]
    if isinstance(raw, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in raw):
        parts = [_text(b, f"system[{i}]", "system") for i, b in enumerate(raw)]
        return [{"role": "system", "content": parts}]
    raise ApiError(400, "system must be a string or an array of text blocks.", param="system")


def messages(raw: Any) -> list[dict[str, Any]]:
    """`messages`: user and assistant turns, each content a string or blocks, as chat messages."""
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "messages must be a non-empty array of messages.", param="messages")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(raw):
        at = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"{at} must be an object.", param="messages")
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            raise ApiError(400, f"{at}.role must be user or assistant, got {role!r}.", param="messages")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise ApiError(400, f"{at}.content must be a string or an array of content blocks.", param="messages")
        blocks = [(b.get("type") if isinstance(b, dict) else None, b, f"{at}.content[{j}]") for j, b in
                  enumerate(content)]  # fmt: skip
        out += _assistant(blocks) if role == "assistant" else _user(blocks)
    return out


Blocks = list[tuple[Any, Any, str]]  # each block's type, the block, where it is


def _assistant(blocks: Blocks) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for kind, block, at in blocks:
        if kind == "text":
            parts.append(_text(block, at))
        elif kind == "tool_use":
            call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
            if not (isinstance(call_id, str) and call_id and isinstance(name, str) and isinstance(arguments, dict)):
                raise ApiError(400, f"{at}: a tool_use block needs id, name and input (an object).", param="messages")
            function = {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}
            calls.append({"id": call_id, "type": "function", "function": function})
        elif kind in ("thinking", "redacted_thinking"):  # the model's earlier thoughts: not sent back to it
            continue
        else:
            raise ApiError(400, f"{at}: an assistant message takes text, tool_use and thinking blocks, not {kind!r}.",
                           param="messages")  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": parts or ("" if not calls else None)}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _user(blocks: Blocks) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []  # tool messages: the results of the assistant's calls just before
    parts: list[dict[str, Any]] = []
    for kind, block, at in blocks:
        if kind == "text":
            parts.append(_text(block, at))
        elif kind == "image":
            parts.append(_image(block, at))
        elif kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not (isinstance(call_id, str) and call_id):
                raise ApiError(400, f"{at}: a tool_result block needs the tool_use_id it answers.", param="messages")
            results.append({"role": "tool", "tool_call_id": call_id, "content": _result(block.get("content"), at)})
        else:
            raise ApiError(400, f"{at}: a user message takes text, image and tool_result blocks, not {kind!r} "
                           "(Ember's server reads no document blocks: send the text).", param="messages")  # fmt: skip
    if not parts:
        return results if results else [{"role": "user", "content": ""}]
    return [*results, {"role": "user", "content": parts}]


def _text(block: dict[str, Any], at: str, param: str = "messages") -> dict[str, Any]:
    if not isinstance(block.get("text"), str):
        raise ApiError(400, f"{at}: a text block needs its text (a string).", param=param)
    return {"type": "text", "text": block["text"]}


def _image(block: dict[str, Any], at: str) -> dict[str, Any]:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        raise ApiError(400, f"{at}: Ember fetches no URL nor file; send the image as a base64 source.",
                       param="messages")  # fmt: skip
    media, data = source.get("media_type"), source.get("data")
    if media not in IMAGE_TYPES or not isinstance(data, str):
        raise ApiError(400, f"{at}: an image's source needs media_type (one of {', '.join(IMAGE_TYPES)}) and its "
                       "base64 data.", param="messages")  # fmt: skip
    return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}


def _result(raw: Any, at: str) -> str | list[dict[str, Any]]:
    """A tool_result's content: a string, or text (and image) blocks."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise ApiError(400, f"{at}.content must be a string or an array of text blocks.", param="messages")
    out = []
    for j, block in enumerate(raw):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            out.append(_text(block, f"{at}.content[{j}]"))
        elif kind == "image":
            out.append(_image(block, f"{at}.content[{j}]"))
        else:
            raise ApiError(400, f"{at}.content[{j}]: a tool_result takes text and image blocks, not {kind!r}.",
                           param="messages")  # fmt: skip
    return out


def _tools(raw: Any) -> list[dict[str, Any]]:
    """Client tools ({name, description, input_schema}) → the chat route's function tools."""
    if raw is None:
        return []
    others = [str(t.get("type")) for t in raw if isinstance(t, dict) and t.get("type") not in (None, "custom")]
    if others:
        raise ApiError(400, f"tools: Ember's server runs no server tools ({', '.join(others)}); give client tools "
                       "with name, description and input_schema.", param="tools")  # fmt: skip
    out = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise ApiError(400, f"tools[{i}]: a tool needs its name.", param="tools")
        if not isinstance(tool.get("input_schema"), dict):
            raise ApiError(400, f"tools[{i}]: a tool needs its input_schema (a JSON schema object).", param="tools")
        function = {"name": tool["name"], "parameters": tool["input_schema"]}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(raw: Any) -> dict[str, Any]:
    """tool_choice → the chat route's (auto, required, none, a function), and parallel_tool_calls."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    choice: str | dict[str, Any]
    if kind in ("auto", "none"):
        choice = kind
    elif kind == "any":
        choice = "required"
    elif kind == "tool" and isinstance(raw.get("name"), str):
        choice = {"type": "function", "function": {"name": raw["name"]}}
    else:
        raise ApiError(400, "tool_choice must be {'type': 'auto'}, {'type': 'any'}, {'type': 'none'} or "
                       "{'type': 'tool', 'name': ...}.", param="tool_choice")  # fmt: skip
    out: dict[str, Any] = {"tool_choice": choice}
    if raw.get("disable_parallel_tool_use") is not None:
        out["parallel_tool_calls"] = not raw["disable_parallel_tool_use"]
    return out
