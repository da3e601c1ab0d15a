"""Tool calling with a remote server: a server that says it does not take tools, and the calls streamed
back (the request's `tools`, `tool_choice` and `parallel_tool_calls` are openai/tool_wire.py's
`tool_fields`; its CallDeltas puts the `delta.tool_calls` pieces together, however the server streams
them). When the stream has ended, each call is checked against the request's tools (calls/formats.py's
check_call): unknown tools, arguments that are not JSON or break the schema come back as InvalidCall,
never to be run.
"""

from __future__ import annotations

import re
from typing import Any

from ember_chat.engine.core.refs import Endpoint
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest
from ember_chat.engine.errors import RemoteError
from ember_chat.engine.inference.calls.formats import check_call, with_unique_id
from ember_chat.engine.openai.api_error import error_detail
from ember_chat.engine.openai.tool_wire import CallDeltas

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


class StreamedCalls:
    """The calls of one streamed answer: their `delta.tool_calls` pieces put together (CallDeltas),
    then each checked against the request's tools."""

    def __init__(self, tools: ToolRequest) -> None:
        self.tools = tools
        self._deltas = CallDeltas()

    def __bool__(self) -> bool:
        return bool(self._deltas)

    def feed(self, deltas: Any) -> str:
        """One chunk's `delta.tool_calls`; returns the text it added (for the token count)."""
        return self._deltas.feed(deltas)

    def parsed(self) -> list[ToolCall | InvalidCall]:
        """The calls in index order, each checked against the tools (after the stream has ended)."""
        out, seen = [], set()
        for call_id, name, text in self._deltas.calls():
            out.append(with_unique_id(check_call(name, text, text, self.tools.tools, call_id or None), seen))
        return out
