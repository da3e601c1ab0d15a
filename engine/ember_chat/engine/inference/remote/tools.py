"""Tool calling with a remote server: a server that says it does not take tools, and the calls streamed
back as `delta.tool_calls` (the request's `tools`, `tool_choice` and `parallel_tool_calls` are
openai/tool_wire.py's `tool_fields`).

Servers stream calls differently, and `StreamedCalls` reads them all: vLLM sends a call's index, id,
type and name first and its arguments a few characters at a time after (the last piece may ride on the
chunk with finish_reason); llama.cpp's server sends the first piece of the arguments with the name;
Ollama sends each call whole in one chunk. The id (and the name) come only on a call's first chunk;
the calls are told apart by `index`. When the stream has ended, each call is checked against the
request's tools (calls/formats.py's check_call): unknown tools, arguments that are not JSON or break the
schema come back as InvalidCall, never to be run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ember_chat.engine.core.refs import Endpoint
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest
from ember_chat.engine.errors import RemoteError
from ember_chat.engine.inference.calls.formats import check_call, with_unique_id
from ember_chat.engine.openai.api_error import error_detail

# How servers say they do not take tools: vLLM without its parser ('"auto" tool choice requires
# --enable-auto-tool-choice and --tool-call-parser'), llama-server without --jinja ("tools param requires
# --jinja flag"), Ollama ("… does not support tools"). Not any error naming a tool (a bad tool name).
_NO_TOOLS = re.compile(
    r"does not support tools|tools? (?:are|is) not supported|not support(?:ed)? tools|tool.?choice|"
    r"tool.?call.?parser|auto.?tool|--jinja|requires? .{0,20}jinja",
    re.I,
)


def tools_refused(endpoint: Endpoint, status: int, body: bytes) -> RemoteError | None:
    """A request with tools that the server rejected because of them (vLLM without its tool parser:
    400; llama-server without --jinja: 500; a model Ollama has no tool template for: 400): said so,
    and not retried. Another error is left to `status_error`."""
    detail = error_detail(body)
    if status in (400, 422, 500, 501) and _NO_TOOLS.search(detail):
        return RemoteError(
            f"{endpoint.name} does not do tool calling as it was started ({status}: {detail}). Start it with tool "
            "calling on (vLLM: --enable-auto-tool-choice and --tool-call-parser; llama-server: --jinja), or turn "
            "this chat's tools off."
        )
    return None


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamedCalls:
    """The calls of one streamed answer, put together from their `delta.tool_calls` pieces."""

    def __init__(self, tools: ToolRequest) -> None:
        self.tools = tools
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

    def parsed(self) -> list[ToolCall | InvalidCall]:
        """The calls in index order, each checked against the tools (after the stream has ended)."""
        out, seen = [], set()
        for _, call in sorted(self._calls.items()):
            text = "".join(call.arguments)
            out.append(with_unique_id(check_call(call.name, text, text, self.tools.tools, call.id or None), seen))
        return out
