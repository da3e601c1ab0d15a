"""Ember's built-in tools, one ToolProvider (source "Built-in"), each off until the user turns it on:
the local date and time, a calculator (builtin_calculator: no eval), and read-only access to text
files in folders the user picked (builtin_files). They run in-process, quickly and boundedly; a
refusal or failure comes back as an error result with a sentence, never as an exception."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime as _datetime
from pathlib import Path
from typing import Any

from ember_chat.engine.core.tools import ToolCall, ToolResult, ToolSpec
from ember_chat.engine.tools.builtin_calculator import CalculatorError, calculate
from ember_chat.engine.tools.builtin_files import READ_LIMIT_BYTES, FileToolError, FolderReader
from ember_chat.engine.tools.config import BuiltinToolsConfig

BUILTIN_SOURCE = "Built-in"

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


class _Refused(Exception):
    """Arguments a tool cannot take: the message is the sentence given back."""


def _zone_name(now: _datetime) -> str:
    """The local time zone's name as the system knows it (Europe/Paris), else its abbreviation (CET)."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if "/" in tz and not tz.startswith("/"):
        return tz
    try:
        link = os.path.realpath("/etc/localtime")
    except OSError:
        link = ""
    if "zoneinfo/" in link and not tz:
        return link.split("zoneinfo/", 1)[1]
    return now.tzname() or "local time"


def current_datetime() -> str:
    now = _datetime.now().astimezone().replace(microsecond=0)
    offset = now.strftime("%z")
    return (
        f"{now.strftime('%A')} {now.day} {now.strftime('%B %Y, %H:%M:%S')} ({now.isoformat()}), "
        f"time zone {_zone_name(now)} (UTC{offset[:3]}:{offset[3:]})."
    )


def _text(arguments: dict[str, Any], name: str, *, default: str | None = None) -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str):
        raise _Refused(f"'{name}' must be text" + (" and is required." if default is None else "."))
    return value


def _flag(arguments: dict[str, Any], name: str) -> bool:
    value = arguments.get(name, False)
    if not isinstance(value, bool):
        raise _Refused(f"'{name}' must be true or false.")
    return value


class BuiltinTools:
    """The built-in tools the user turned on (Settings ▸ Tools), as one tool source."""

    source = BUILTIN_SOURCE

    def __init__(self, *, datetime: bool = False, calculator: bool = False, folders: Sequence[Path] = ()) -> None:
        self.datetime = datetime
        self.calculator = calculator
        self.files = FolderReader([Path(f) for f in folders]) if folders else None

    @classmethod
    def from_config(cls, config: BuiltinToolsConfig) -> BuiltinTools:
        """The tools as Settings ▸ Tools has them: the folders count only while the file tools are on."""
        folders = [Path(f) for f in config.folders] if config.files else []
        return cls(datetime=config.datetime, calculator=config.calculator, folders=folders)

    def list_tools(self, timeout_s: float | None = None) -> list[ToolSpec]:
        specs = []
        if self.datetime:
            specs.append(
                ToolSpec(
                    "current_datetime",
                    "The current local date, time, weekday and time zone of the user's computer.",
                    dict(_NO_ARGUMENTS),
                    read_only=True,
                )
            )
        if self.calculator:
            specs.append(
                ToolSpec(
                    "calculator",
                    "Computes an arithmetic expression exactly: numbers, + - * / // % ** (power), parentheses, "
                    "functions like sqrt, log, sin, round, factorial and the constants pi, e, tau.",
                    {
                        "type": "object",
                        "properties": {
                            "expression": {"type": "string", "description": "For example: 2 * (3 + 4) / sqrt(2)"}
                        },
                        "required": ["expression"],
                    },
                    read_only=True,
                )
            )
        if self.files is not None:
            names = self.files.names()
            specs += [
                ToolSpec(
                    "list_files",
                    f"Lists the files in the folders the user lets you read ({names}). "
                    "Paths start with the folder's name, as the list shows them.",
                    {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string", "description": "A folder to list; empty for the top."},
                            "recursive": {"type": "boolean", "description": "Also list what subfolders hold."},
                        },
                    },
                    read_only=True,
                ),
                ToolSpec(
                    "read_file",
                    f"Reads a text file from the folders the user lets you read ({names}); "
                    f"at most {READ_LIMIT_BYTES // 1024} KB at a time, a longer file says where to read on.",
                    {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string", "description": "The file, as list_files shows it."},
                            "offset": {"type": "integer", "description": "The byte to start at (to read on)."},
                        },
                        "required": ["path"],
                    },
                    read_only=True,
                ),
            ]
        return specs

    def call(self, call: ToolCall, timeout_s: float | None = None, cancel: threading.Event | None = None) -> ToolResult:
        started = time.perf_counter()
        try:
            content = self._run(call, cancel)
            is_error = False
        except (_Refused, CalculatorError, FileToolError) as e:
            content, is_error = str(e), True
        except Exception as e:  # a bug must not take the chat's tool loop down: the model and the card get a sentence
            content, is_error = f"The built-in tool {call.name} failed unexpectedly ({e}).", True
        return ToolResult(call.id, call.name, content, is_error, (time.perf_counter() - started) * 1000)

    def _run(self, call: ToolCall, cancel: threading.Event | None) -> str:
        tools: dict[str, tuple[bool, Callable[[dict[str, Any]], str]]] = {
            "current_datetime": (self.datetime, lambda _: current_datetime()),
            "calculator": (self.calculator, lambda a: calculate(_text(a, "expression"))),
            "list_files": (self.files is not None, lambda a: self._list(a, cancel)),
            "read_file": (self.files is not None, self._read),
        }
        if call.name not in tools:
            raise _Refused(f"Ember's built-in tools have no tool named '{call.name}'.")
        on, run = tools[call.name]
        if not on:
            raise _Refused(
                f"The built-in tool {call.name} is not turned on; the user can turn it on in Settings ▸ Tools."
            )
        return run(call.arguments)

    def _list(self, arguments: dict[str, Any], cancel: threading.Event | None) -> str:
        assert self.files is not None
        return self.files.list_files(_text(arguments, "path", default=""), _flag(arguments, "recursive"), cancel)

    def _read(self, arguments: dict[str, Any]) -> str:
        assert self.files is not None
        offset = arguments.get("offset", 0)
        if isinstance(offset, float) and offset.is_integer():
            offset = int(offset)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise _Refused("'offset' must be a whole number of bytes (0 reads from the start).")
        return self.files.read_file(_text(arguments, "path"), offset)
