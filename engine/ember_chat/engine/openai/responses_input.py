"""A /v1/responses body (OpenAI's Responses API) as Ember's API server reads it: the chat completions
body it means (`ResponsesBody.chat`), so serve/api_request.parse_request checks and reads it as it does
/v1/chat/completions, and what the Response repeats of it (`echo`). Input items become chat messages:
a message's input_text/output_text parts text, input_image an image_url part, input_file a file part;
`function_call` items the assistant message's tool_calls, `function_call_output` items tool messages;
`reasoning` items are left out (as a chat client leaves out reasoning_content). `ember` takes the chat
route's options (`project`: answer in a project, `speculative`), but `trim_history`, which is `truncation`
here. Errors are 400s in OpenAI's shape naming the Responses field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_body import Number, Raw  # (numbers as sent: the chat route reads them)
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.openai.typed_body import Body, Must
from ember_chat.engine.openai.typed_body import read_body as read_typed

ROLES = ("user", "assistant", "system", "developer")
MAX_METADATA = 16  # OpenAI's: keys of at most 64 characters, values of at most 512
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
# A parse_request error names the chat field; the Responses field it came from
CHAT_TO_RESPONSES = {
    "messages": "input", "max_tokens": "max_output_tokens", "response_format": "text",
    "chat_template_kwargs": "reasoning",
}  # fmt: skip


class ResponsesEnvelope(Body):
    """The envelope of a /v1/responses body (openai/typed_body): every top-level field Ember knows with its
    JSON type (None: not sent). What a field holds stays its own reader's: the input items
    (input_messages), tools, tool_choice, text's format, reasoning's effort, metadata's keys; bounds are
    the chat route's."""

    model: str | None = None
    input: Annotated[str | list[object], Must("a string or a non-empty array of input items")] | None = None
    instructions: str | None = None
    tools: Annotated[list[object], Must("an array of function tools")] | None = None
    tool_choice: Annotated[str | Raw, Must("auto, none, required or {'type': 'function', 'name': ...}")] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = None
    temperature: Number | None = None
    top_p: Number | None = None
    stream: bool = False  # (null is no answer to "stream or not": refused, as the chat route does)
    store: bool | None = None  # (None: stored, as OpenAI's)
    previous_response_id: Annotated[str, Field(min_length=1), Must("a response's id")] | None = None
    metadata: Annotated[Raw, Must(f"an object of at most {MAX_METADATA} keys")] | None = None
    text: Annotated[Raw, Must("an object with format (and verbosity)")] | None = None
    reasoning: Annotated[Raw, Must("an object like {'effort': 'low'}")] | None = None
    truncation: Annotated[Literal["auto", "disabled"], Must("auto or disabled")] | None = None
    ember: Annotated[Raw, Must("an object of Ember's options, such as {'project': NAME}")] | None = None
    # ignored as the chat route ignores them (user, service_tier), or asked of every request by agents
    # while meaning nothing here (include: encrypted reasoning Ember has none of; prompt_cache_key: Ember
    # reuses a cached prefix always)
    user: str | None = None
    service_tier: str | None = None
    include: list[str] | None = None
    prompt_cache_key: str | None = None


@dataclass(frozen=True)
class ResponsesBody:
    chat: dict[str, Any]  # the chat completions body it means, without messages (the turn puts them together)
    messages: list[dict[str, Any]]  # the input's, as chat messages (the instructions not among them)
    instructions: str | None
    previous_response_id: str | None
    store: bool
    echo: dict[str, Any]  # what a Response repeats of its request (tools, tool_choice, metadata, …)


def read_body(body: Any, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE) -> ResponsesBody:
    # the envelope (ResponsesEnvelope): unknown fields and each known field's JSON type, named in a 400
    typed = read_typed(ResponsesEnvelope, body, allow_unknown, advice)
    chat: dict[str, Any] = {k: body[k] for k in ("model", "temperature", "top_p", "stream") if k in body}
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    text = body.get("text")
    response_format = _text_format(text)
    if response_format is not None:
        chat["response_format"] = response_format
    reasoning = typed.reasoning
    if reasoning is not None:
        effort = reasoning.get("effort")
        if effort is not None and effort not in REASONING_EFFORTS:
            raise ApiError(400, f"reasoning.effort must be one of {', '.join(REASONING_EFFORTS)}, got {effort!r}.",
                           param="reasoning")  # fmt: skip
        if effort == "none":  # the one effort Ember can honour: a thinking model's switch, off
            chat["chat_template_kwargs"] = {"enable_thinking": False}
    truncation = typed.truncation
    ember = dict(typed.ember or {})  # Ember's options, as the chat route's (ember.project: answer in a project)
    if "trim_history" in ember:
        raise ApiError(400, "ember.trim_history is the Responses API's truncation here: send truncation: \"auto\".",
                       param="ember")  # fmt: skip
    if truncation == "auto":  # leave the oldest turns out when the conversation outgrows the context
        ember["trim_history"] = True
    if ember:
        chat["ember"] = ember
    instructions, previous = typed.instructions, typed.previous_response_id
    store = True if typed.store is None else typed.store
    echo = {
        "instructions": instructions, "max_output_tokens": body.get("max_output_tokens"),
        "metadata": _metadata(body.get("metadata")), "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": previous, "reasoning": {"effort": None, "summary": None, **(reasoning or {})},
        "store": store, "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "text": text if isinstance(text, dict) and text.get("format") else {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice") or "auto", "tools": body.get("tools") or [],
        "truncation": truncation or "disabled", "user": body.get("user"),
    }  # fmt: skip
    return ResponsesBody(chat, input_messages(body.get("input")), instructions, previous, store, echo)


def input_messages(raw: Any) -> list[dict[str, Any]]:
    """`input`: a string (the user's message) or a list of input items, as chat messages."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "input must be a string or a non-empty array of input items.", param="input")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        at = f"input[{i}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"{at} must be an object.", param="input")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in ROLES:
                raise ApiError(400, f"{at}.role must be user, assistant, system or developer, got {role!r}.",
                               param="input")  # fmt: skip
            out.append({"role": role, "content": _content(item.get("content"), f"{at}.content")})
        elif kind == "function_call":
            call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
            if not (isinstance(call_id, str) and call_id and isinstance(name, str) and isinstance(arguments, str)):
                raise ApiError(400, f"{at}: a function_call item needs call_id, name and arguments (JSON text).",
                               param="input")  # fmt: skip
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            if out and out[-1]["role"] == "assistant":  # the calls of the answer just before: one message
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if not (isinstance(call_id, str) and call_id):
                raise ApiError(400, f"{at}: a function_call_output item needs the call_id it answers.", param="input")
            if isinstance(output, list):
                output = _content(output, f"{at}.output")
            if not isinstance(output, str | list):
                raise ApiError(400, f"{at}.output must be a string or a list of input_text parts.", param="input")
            out.append({"role": "tool", "tool_call_id": call_id, "content": output})
        elif kind == "reasoning":  # a thinking model's earlier thoughts: not sent back to it
            continue
        else:
            raise ApiError(400, f"{at}: Ember's server takes message, function_call, function_call_output and "
                           f"reasoning items, not {kind!r}.", param="input")  # fmt: skip
    return out


def _content(raw: Any, at: str) -> str | list[dict[str, Any]]:
    """A message's content: a string, or its parts as the chat route's (text, image_url, file)."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise ApiError(400, f"{at} must be a string or a list of content parts.", param="input")
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(raw):
        kind = part.get("type") if isinstance(part, dict) else None
        where = f"{at}[{i}]"
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image":
            if part.get("file_id") or not isinstance(part.get("image_url"), str):
                raise ApiError(400, f"{where}: Ember has no file store; send the image as a data: URL in image_url.",
                               param="input")  # fmt: skip
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        elif kind == "input_file":
            if part.get("file_url"):
                raise ApiError(
                    400, f"{where}: Ember fetches no URL; send the file's bytes in file_data.", param="input"
                )
            parts.append(
                {"type": "file", "file": {k: part[k] for k in ("file_data", "filename", "file_id") if k in part}}
            )
        else:
            raise ApiError(400, f"{where}: Ember accepts input_text, output_text, input_image and input_file parts, "
                           f"not {kind!r}.", param="input")  # fmt: skip
    return parts


def _tools(raw: Any) -> list[dict[str, Any]]:
    """Function tools in the Responses shape → the chat route's ({"type": "function", "function": {...}})."""
    if raw is None:
        return []
    others = [t.get("type") if isinstance(t, dict) else type(t).__name__ for t in raw]
    others = [str(t) for t in others if t != "function"]
    if others:
        raise ApiError(400, f"tools: Ember's server has function tools only, not {', '.join(others)}.", param="tools")
    out = []
    for i, tool in enumerate(raw):
        if not isinstance(tool.get("name"), str):
            raise ApiError(400, f"tools[{i}]: a function tool needs its name.", param="tools")
        if tool.get("strict") is not None and not isinstance(tool["strict"], bool):
            raise ApiError(400, f"tools[{i}].strict must be true or false.", param="tools")
        function = {k: tool[k] for k in ("name", "description", "parameters") if tool.get(k) is not None}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(raw: Any) -> str | dict[str, Any]:
    if isinstance(raw, str):
        return raw  # (auto, none, required: the chat route checks it)
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("name"), str):
        return {"type": "function", "function": {"name": raw["name"]}}
    raise ApiError(400, "tool_choice must be auto, none, required or {'type': 'function', 'name': ...}.",
                   param="tool_choice")  # fmt: skip


def _text_format(text: Any) -> dict[str, Any] | None:
    """`text.format` → the chat route's response_format (None: plain text)."""
    if text is None:
        return None
    if set(text) - {"format", "verbosity"}:  # (an object: ResponsesEnvelope)
        raise ApiError(400, "text must be an object with format (and verbosity).", param="text")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise ApiError(400, "text.format must be an object such as {'type': 'json_object'}.", param="text")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": spec}
    raise ApiError(400, f"text.format.type must be text, json_object or json_schema, got {kind!r}.", param="text")


def _metadata(raw: Any) -> dict[str, str] | None:
    if raw is None:
        return None
    if len(raw) > MAX_METADATA:  # (an object: ResponsesEnvelope)
        raise ApiError(400, f"metadata must be an object of at most {MAX_METADATA} keys.", param="metadata")
    for key, value in raw.items():
        if len(key) > 64 or not isinstance(value, str) or len(value) > 512:
            raise ApiError(400, "metadata: keys of at most 64 characters, string values of at most 512.",
                           param="metadata")  # fmt: skip
    return dict(raw)
