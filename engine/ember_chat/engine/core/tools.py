"""Tools a model may call, the calls it makes and their results, as plain values (no llama.cpp import):
the window, the API server and the MCP client all speak these.

A tool is described by a JSON schema of its arguments, in OpenAI's function shape
(`{"type": "function", "function": {"name", "description", "parameters"}}`), which is also the shape
chat templates read (`tools=` in `transformers.apply_chat_template`).
"""

from __future__ import annotations

import json
import secrets
import string
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ember_chat.engine.errors import InvalidParameter

# An answer that keeps calling tools is stopped after this many calls (the loop LM Studio #1362 lacks).
DEFAULT_MAX_TOOL_CALLS = 8

_ID_ALPHABET = string.ascii_letters + string.digits
_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def new_call_id() -> str:
    """A call id: 9 letters and digits, the one shape every template accepts (Mistral's refuses any other)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(9))


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_EMPTY_OBJECT), hash=False)
    read_only: bool = False  # the tool only reads (MCP's readOnlyHint, the built-in readers): "never ask" may suit it

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-." for c in self.name):
            raise InvalidParameter(f"a tool name is letters, digits, '_', '-' or '.', got {self.name!r}.")
        if not isinstance(self.parameters, dict) or self.parameters.get("type", "object") != "object":
            raise InvalidParameter(f"tool {self.name!r}: parameters must be a JSON schema of type object.")

    def to_openai(self) -> dict[str, Any]:
        """OpenAI's function shape, which chat templates, the chat export and the tools' size estimate
        read as well as the wire (reading one, with its errors for an API client, is openai/tool_wire.py's)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True)
class ToolCall:
    """A call the model made: `arguments` as parsed, `raw` the text the model wrote for it."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict, hash=False)
    raw: str = ""

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)

    def to_openai(self) -> dict[str, Any]:
        """OpenAI's wire shape: arguments as JSON text."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments_json()}}

    def to_template(self) -> dict[str, Any]:
        """The shape chat templates read: arguments as a mapping (`tool_call.arguments | tojson`)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": dict(self.arguments)}}


@dataclass(frozen=True)
class ToolResult:
    """What a call returned (or why it did not run: `is_error`), given back to the model as a `tool` message."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    duration_ms: float | None = None  # how long the tool ran (None: it did not run)


@dataclass(frozen=True)
class InvalidCall:
    """A call that must not run: what the model wrote, and why (shown, and given back as an error)."""

    call: ToolCall
    error: str

    def result(self) -> ToolResult:
        """The error given back to the model in place of a result."""
        return ToolResult(self.call.id, self.call.name, f"Error: {self.error}", is_error=True)


@dataclass(frozen=True)
class CutShort(InvalidCall):
    """A call the answer ended inside (max tokens, the context, a stop): never run, and its markup is
    no text of the answer either (the API leaves it out of `content`; after complete calls of the same
    answer it is dropped, and the answer ends with them: inference/calls/turn.py)."""


# What tool_choice asks: the model may call (auto), must not (none), must call one (required), or must
# call this tool (any other string: a tool's name).
TOOL_CHOICES = ("auto", "none", "required")


@dataclass(frozen=True)
class ToolRequest:
    """The tools one generation may call, as the backends take it (`InferenceBackend.chat(tools=)`)."""

    tools: tuple[ToolSpec, ...]
    choice: str = "auto"  # "auto" | "none" | "required" | the name of the one tool it must call
    parallel: bool = True  # several calls in one answer

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise InvalidParameter(
                "two tools have the same name: " + ", ".join(sorted({n for n in names if names.count(n) > 1})) + "."
            )
        if self.choice not in TOOL_CHOICES and self.choice not in names:
            raise InvalidParameter(f"tool_choice names {self.choice!r}, which is not one of the tools given.")

    @property
    def active(self) -> bool:
        """The model is offered tools at all (some tools, and choice is not "none")."""
        return bool(self.tools) and self.choice != "none"

    @property
    def forced(self) -> bool:
        """The answer must be a call (required, or a named tool): the grammar holds it from the first token."""
        return self.active and self.choice != "auto"


class ToolProvider(Protocol):
    """A source of tools: Ember's built-in tools, or one MCP server. Called off the GUI thread."""

    @property
    def source(self) -> str:
        """Shown on cards and in Settings: "Built-in", or the MCP server's name."""
        ...

    def list_tools(self, timeout_s: float) -> list[ToolSpec]:
        """The tools it offers now (an MCP server is started on demand). Raises ToolError."""
        ...

    def call(self, call: ToolCall, timeout_s: float, cancel: threading.Event | None = None) -> ToolResult:
        """Run one call. A tool's own failure, a timeout or a crashed server come back as a result with
        `is_error` and a sentence a user understands; never raises for those."""
        ...


@dataclass(frozen=True)
class ChatTools:
    """One chat's tool choices, kept with the chat: the tools turned on (registry keys, "source/name")
    and those the user allowed for the rest of this chat ("Always allow this tool in this chat").
    `require_call`: the model must call a tool first in each answer (tool_choice "required" for the
    answer's first generation; for models that do not call tools by themselves, e.g. base models).
    `servers`: the sources (an MCP server's name, "Built-in") whose every tool is on, those it lists
    later too (the Tools popup's "All" switch; a server just added is on in the chat shown and in new
    chats). Every call still asks first unless allowed: these turn tools on, they grant no consent."""

    enabled: frozenset[str] = frozenset()
    always: frozenset[str] = frozenset()
    require_call: bool = False
    servers: frozenset[str] = frozenset()


def tool_limit_message(limit: int) -> str:
    """Said when an answer reached the cap on tool calls and was ended."""
    return (
        f"The model asked for more than {limit} tool calls in one answer, so Ember stopped it there. "
        "Raise the limit in Settings ▸ Tools if this task needs more calls."
    )


@dataclass
class CallBudget:
    """Counts an answer's tool calls against the cap (`take` them as the model makes them); once spent,
    the answer ends with `message`."""

    limit: int = DEFAULT_MAX_TOOL_CALLS
    used: int = 0

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise InvalidParameter(f"the cap on tool calls per answer must be at least 1, got {self.limit}.")

    def take(self, calls: Sequence[ToolCall]) -> tuple[list[ToolCall], list[ToolCall]]:
        """The calls that may run (in order, while the cap allows) and those over it."""
        room = max(0, self.limit - self.used)
        allowed, over = list(calls[:room]), list(calls[room:])
        self.used += len(allowed)
        return allowed, over

    @property
    def spent(self) -> bool:
        return self.used >= self.limit

    @property
    def message(self) -> str:
        return tool_limit_message(self.limit)
