"""Tool calling in OpenAI's shapes. What the remote backend sends: a ToolRequest as the request's `tools`,
`tool_choice` and `parallel_tool_calls` (`tool_fields`); what it reads: the calls streamed back as
`delta.tool_calls` pieces (`CallDeltas`). What Ember's API server reads and writes: the
request's `tools`, `tool_choice` and `parallel_tool_calls` (→ a ToolRequest for the engine), the
history's assistant `tool_calls` and `tool` messages (→ ChatMessage.tool_calls / tool_call_id), and the
model's calls in the answer (`message.tool_calls`, streamed as `delta.tool_calls`: a call's first piece
has its index, id, type, name and `arguments: ""`, the arguments follow; finish_reason "tool_calls").

A call the model made that must not run (InvalidCall: an unknown tool, arguments that are not JSON
or break the tool's schema) is never returned as a call, so no client can run it: it stays what the
model wrote, in the answer's text (`content`, in place), and the response's `ember.invalid_tool_calls`
says which call and why (`[{"choice", "name", "raw", "error"}]`, `raw` the call's text as written;
in the final chunk when streamed). A call the answer ended inside (max_tokens: a CutShort) is noted
there too, but its markup is no part of `content`; after complete calls it is dropped and the answer
ends with them (finish_reason "tool_calls", see inference/calls/turn.py). An answer whose calls were all invalid
ends with finish_reason "stop"; the valid calls keep consecutive indexes (0, 1, …) whatever invalid
ones came between.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.tools import (
    TOOL_CHOICES,
    CutShort,
    InvalidCall,
    ToolCall,
    ToolRequest,
    ToolSpec,
    new_call_id,
)
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.openai.api_error import ApiError

TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls")
ARGUMENT_PIECE_CHARS = 256  # a streamed call's arguments go out in pieces of at most this many characters


def tool_spec_from_openai(raw: Any) -> ToolSpec:
    """A tool from `{"type": "function", "function": {...}}` (or the bare function object)."""
    if isinstance(raw, dict) and raw.get("type", "function") == "function" and isinstance(raw.get("function"), dict):
        raw = raw["function"]
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise InvalidParameter("a tool must be {'type': 'function', 'function': {'name': ..., ...}}.")
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise InvalidParameter(f"tool {raw['name']!r}: description must be a string.")
    parameters = raw.get("parameters")
    if parameters is None:
        return ToolSpec(raw["name"], description)
    return ToolSpec(raw["name"], description, parameters)


def tool_call_from_openai(raw: Any) -> ToolCall:
    """A call from OpenAI's `{"id", "type": "function", "function": {"name", "arguments": "<json text>"}}`
    (a new id when it has none)."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidParameter("a tool call must be {'id': ..., 'function': {'name': ..., 'arguments': ...}}.")
    text = function.get("arguments")
    if isinstance(text, dict):
        arguments, text = text, json.dumps(text, ensure_ascii=False)
    else:
        try:
            arguments = json.loads(text or "{}")
        except (TypeError, json.JSONDecodeError):
            raise InvalidParameter(f"tool call {function['name']!r}: arguments are not JSON.") from None
        if not isinstance(arguments, dict):
            raise InvalidParameter(f"tool call {function['name']!r}: arguments must be a JSON object.")
    call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw["id"] else new_call_id()
    return ToolCall(call_id, function["name"], arguments, text)


def tool_request(body: dict[str, Any], kind: str) -> ToolRequest | None:
    """The request's tools as the engine takes them; None when it gives none. 400 naming the field."""
    given = [name for name in TOOL_FIELDS if body.get(name) is not None]
    if given and kind != "chat":
        raise ApiError(400, f"{given[0]} is for /v1/chat/completions; /v1/completions has no tools.", param=given[0])
    raw, choice, parallel = body.get("tools"), body.get("tool_choice"), body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise ApiError(400, "parallel_tool_calls must be true or false.", param="parallel_tool_calls")
    if raw is not None and not isinstance(raw, list):
        raise ApiError(400, "tools must be an array of {'type': 'function', 'function': {...}}.", param="tools")
    specs = []
    for i, item in enumerate(raw or []):
        if not isinstance(item, dict) or item.get("type", "function") != "function":
            kind_given = item.get("type") if isinstance(item, dict) else type(item).__name__
            raise ApiError(400, f"tools[{i}]: Ember's server has function tools only, not {kind_given!r}.",
                           param="tools")  # fmt: skip
        try:
            specs.append(tool_spec_from_openai(item))
        except InvalidParameter as exc:
            raise ApiError(400, f"tools[{i}]: {exc}", param="tools") from None
    name = _choice(choice)
    if not specs:
        if name not in ("auto", "none"):
            raise ApiError(400, "tool_choice needs tools to choose from; send tools with it.", param="tool_choice")
        return None
    try:
        return ToolRequest(tuple(specs), name, True if parallel is None else parallel)
    except InvalidParameter as exc:
        param = "tools" if "same name" in str(exc) else "tool_choice"
        raise ApiError(400, str(exc), param=param) from None


def tool_fields(tools: ToolRequest) -> dict[str, Any]:
    """The request's fields for its tools (OpenAI's): all the tools, even under tool_choice none;
    `parallel_tool_calls` only when off (on is every server's default, and some models refuse the field)."""
    choice: str | dict[str, Any] = tools.choice
    if tools.choice not in TOOL_CHOICES:
        choice = {"type": "function", "function": {"name": tools.choice}}
    fields = {"tools": [t.to_openai() for t in tools.tools], "tool_choice": choice}
    if not tools.parallel:
        fields["parallel_tool_calls"] = False
    return fields


def _choice(raw: Any) -> str:
    if raw is None:
        return "auto"
    if isinstance(raw, str):
        if raw not in TOOL_CHOICES:
            raise ApiError(400, f"tool_choice must be auto, none, required or a function, got {raw!r}.",
                           param="tool_choice")  # fmt: skip
        return raw
    function = raw.get("function") if isinstance(raw, dict) and raw.get("type") == "function" else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ApiError(400, "a named tool_choice is {'type': 'function', 'function': {'name': ...}}.",
                       param="tool_choice")  # fmt: skip
    return str(function["name"])


def history_calls(message: dict[str, Any], where: str) -> tuple[ToolCall, ...]:
    """An assistant message's `tool_calls` (OpenAI's shape, arguments as JSON text)."""
    raw = message.get("tool_calls")
    if raw is None or raw == []:
        return ()
    if message.get("role") != "assistant":
        raise ApiError(400, f"{where}: only an assistant message has tool_calls.", param="messages")
    if not isinstance(raw, list):
        raise ApiError(400, f"{where}.tool_calls must be an array.", param="messages")
    calls = []
    for i, item in enumerate(raw):
        try:
            calls.append(tool_call_from_openai(item))
        except InvalidParameter as exc:
            raise ApiError(400, f"{where}.tool_calls[{i}]: {exc}", param="messages") from None
        if not isinstance(item.get("id"), str) or not item["id"]:
            raise ApiError(400, f"{where}.tool_calls[{i}] needs its id (the tool message answers it).",
                           param="messages")  # fmt: skip
    return tuple(calls)


def check_tool_turns(messages: list[ChatMessage]) -> None:
    """Every tool message answers a call of the assistant message before it, and an assistant
    message's calls are answered before the conversation goes on (or ends)."""
    open_calls: dict[str, str] = {}  # id → name, of the latest assistant message's calls
    for i, m in enumerate(messages):
        if m.role == "tool":
            if not m.tool_call_id or m.tool_call_id not in open_calls:
                raise ApiError(400, f"messages[{i}] is a tool message that answers no call of the assistant "
                               "message before it (tool_call_id must be one of that message's tool_calls ids).",
                               param="messages")  # fmt: skip
            del open_calls[m.tool_call_id]
            continue
        if open_calls:
            names = ", ".join(sorted(open_calls))
            message = (
                f"messages[{i}]: the tool calls before it ({names}) have no tool message with their result; "
                "send one per call, right after the assistant message."
            )
            raise ApiError(400, message, param="messages")
        open_calls = {c.id: c.name for c in m.tool_calls} if m.role == "assistant" else {}
    if open_calls:
        raise ApiError(400, "the conversation ends with tool calls and no results: send a tool message per call "
                       "(tool_call_id and the result as content).", param="messages")  # fmt: skip


@dataclass
class ChoiceCalls:
    """One choice's calls as the engine parsed them: the valid ones (OpenAI's indexes), the invalid."""

    valid: list[ToolCall] = field(default_factory=list)
    invalid: list[InvalidCall] = field(default_factory=list)

    def add(self, call: ToolCall | InvalidCall) -> tuple[int | None, str]:
        """Take a parsed call: (its index among the valid calls, or None for an invalid one whose text
        goes into the answer: the second item; none for a call cut short)."""
        if isinstance(call, InvalidCall):
            self.invalid.append(call)
            return None, "" if isinstance(call, CutShort) else call.call.raw
        self.valid.append(call)
        return len(self.valid) - 1, ""

    def finish_reason(self, reason: str) -> str:
        """Ember's stop reason for the answer: "tool_calls" only when some call may run."""
        if reason == StopReason.TOOL_CALLS and not self.valid:
            return StopReason.STOP
        return reason

    def message_calls(self) -> list[dict[str, Any]] | None:
        return [c.to_openai() for c in self.valid] or None

    def notes(self, choice: int) -> list[dict[str, Any]]:
        return [{"choice": choice, "name": c.call.name, "raw": c.call.raw, "error": c.error}
                for c in self.invalid]  # fmt: skip


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class CallDeltas:
    """The calls of one streamed answer, put together from their `delta.tool_calls` pieces.

    Servers stream calls differently, and this reads them all: vLLM sends a call's index, id, type and
    name first and its arguments a few characters at a time after (the last piece may ride on the chunk
    with finish_reason); llama.cpp's server sends the first piece of the arguments with the name; Ollama
    sends each call whole in one chunk. The id (and the name) come only on a call's first chunk; the
    calls are told apart by `index`."""

    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def feed(self, deltas: Any) -> str:
        """One chunk's `delta.tool_calls`; returns the text it added (for the token count)."""
        added = []
        for item in deltas if isinstance(deltas, list) else []:
            if not isinstance(item, dict):
                continue
            call = self._call(item)
            function = item.get("function") if isinstance(item.get("function"), dict) else {}
            name, arguments = function.get("name"), function.get("arguments")
            if isinstance(name, str) and name and not call.name:
                call.name = name
                added.append(name)
            if isinstance(arguments, dict):  # a server that sends the arguments as an object
                arguments = json.dumps(arguments, ensure_ascii=False)
            if isinstance(arguments, str) and arguments:
                call.arguments.append(arguments)
                added.append(arguments)
        return "".join(added)

    def _call(self, item: dict[str, Any]) -> _Call:
        index, call_id = item.get("index"), item.get("id")
        call_id = call_id if isinstance(call_id, str) else ""
        if not isinstance(index, int) or isinstance(index, bool):  # no index: a new id opens a new call
            known = next((k for k, c in self._calls.items() if call_id and c.id == call_id), None)
            if known is not None:
                index = known
            elif call_id or not self._calls:
                index = max(self._calls, default=-1) + 1
            else:
                index = max(self._calls)
        call = self._calls.setdefault(index, _Call())
        if call_id and not call.id:
            call.id = call_id
        return call

    def calls(self) -> list[tuple[str, str, str]]:
        """Each call's id ("" when the server sent none), name and arguments as JSON text, in index order
        (after the stream has ended)."""
        return [(call.id, call.name, "".join(call.arguments)) for _, call in sorted(self._calls.items())]


def call_deltas(index: int, call: ToolCall) -> list[list[dict[str, Any]]]:
    """The `delta.tool_calls` of the chunks that stream one call: its head, then its arguments."""
    head = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
    text = call.arguments_json()
    pieces = [text[i : i + ARGUMENT_PIECE_CHARS] for i in range(0, len(text), ARGUMENT_PIECE_CHARS)]
    return [[head]] + [[{"index": index, "function": {"arguments": p}}] for p in pieces]
