"""A second tool source for the registry and session tests, beside the real BuiltinTools: text
operations that really run, whose list of tools is read from a JSON file on disk each time it is
listed (so a test damages the file to make listing fail, as a broken MCP server would)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ember_chat.engine.core.tools import ToolCall, ToolResult, ToolSpec
from ember_chat.engine.errors import ToolError


def _add(arguments: dict[str, Any]) -> str:
    """This source's "calculator": adds the numbers of "1 + 2 + 3" (nothing like the built-in one)."""
    return str(sum(float(part) for part in str(arguments["expression"]).split("+")))


def _word_count(arguments: dict[str, Any]) -> str:
    return str(len(str(arguments["text"]).split()))


def _wait(arguments: dict[str, Any], cancel: threading.Event | None, timeout_s: float | None) -> str:
    """Waits the seconds asked, or until stopped (a long tool a user stops)."""
    seconds = min(60.0 if timeout_s is None else timeout_s, float(arguments.get("seconds", 5)))
    if (cancel or threading.Event()).wait(seconds):
        raise TimeoutError("stopped")
    return "waited"


def _average(arguments: dict[str, Any]) -> str:
    """Has a bug: an empty list divides by zero, and nothing catches it (a source with a bug)."""
    numbers = arguments.get("numbers", [])
    return str(sum(numbers) / len(numbers))


_SCHEMAS: dict[str, dict[str, Any]] = {
    "calculator": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    "word_count": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "wait": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    "average": {"type": "object", "properties": {"numbers": {"type": "array", "items": {"type": "number"}}}},
}


class TextTools:
    """A ToolProvider: `manifest` is a JSON list of the tool names it offers now."""

    def __init__(self, source: str, manifest: Path, *, barrier: threading.Barrier | None = None) -> None:
        self.source = source
        self.manifest = manifest
        self.barrier = barrier  # listing waits for the other sources' listings (proves they run at once)
        self.calls: list[ToolCall] = []  # what it was asked to run, as it received it

    def write(self, *names: str) -> TextTools:
        self.manifest.write_text(json.dumps(list(names)), encoding="utf-8")
        return self

    def list_tools(self, timeout_s: float) -> list[ToolSpec]:
        if self.barrier is not None:
            self.barrier.wait(timeout_s)
        try:
            names = json.loads(self.manifest.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            raise ToolError(f"The tool server {self.source} answered with a damaged list of tools.") from None
        return [ToolSpec(n, f"{n} from {self.source}", _SCHEMAS[n], read_only=n == "word_count") for n in names]

    def call(self, call: ToolCall, timeout_s: float | None = None, cancel: threading.Event | None = None) -> ToolResult:
        self.calls.append(call)
        runs: dict[str, Callable[[dict[str, Any]], str]] = {
            "calculator": _add,
            "word_count": _word_count,
            "wait": lambda a: _wait(a, cancel, timeout_s),
            "average": _average,
        }
        try:
            return ToolResult(call.id, call.name, runs[call.name](call.arguments))
        except KeyError as e:
            return ToolResult(call.id, call.name, f"{self.source} has no {e} to work with.", is_error=True)
        except (ValueError, TimeoutError) as e:
            return ToolResult(call.id, call.name, f"{call.name} could not run: {e}.", is_error=True)
