"""What the user set up for tools: MCP servers (stdio or streamable HTTP), the built-in tools, the
tools never asked about, the cap on calls per answer. Saved atomically as tools.json in the config
folder; a damaged file is set aside, never lost. MCP servers are written in the `mcpServers` shape
Claude Desktop and others use, so the file (and an export) can be pasted elsewhere; header secrets
live only in the OS keychain.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember_chat.engine.core.tools import DEFAULT_MAX_TOOL_CALLS, ChatTools
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.atomic import aside_path, write_json_atomically
from ember_chat.engine.tools.mcp_config import (
    BUILTIN_SOURCE,
    TRANSPORTS,
    McpServerConfig,
    _strings,
    clear_header_secrets,
    header_secret,
    header_secret_key,
    looks_secret,
    mcp_servers_json,
    move_headers_to_keychain,
    parse_mcp_servers,
    save_header_secret,
    server_from_data,
    server_to_data,
)

__all__ = [
    "BUILTIN_SOURCE",
    "TRANSPORTS",
    "BuiltinToolsConfig",
    "McpServerConfig",
    "ToolsConfig",
    "ToolsConfigFile",
    "clear_header_secrets",
    "config_to_data",
    "header_secret",
    "header_secret_key",
    "looks_secret",
    "mcp_servers_json",
    "move_headers_to_keychain",
    "parse_mcp_servers",
    "save_header_secret",
    "server_from_data",
    "server_to_data",
]

MAX_CALLS_RANGE = (1, 100)
FILE_VERSION = 1


@dataclass(frozen=True)
class BuiltinToolsConfig:
    """Ember's own tools, each off until the user turns it on."""

    datetime: bool = False
    calculator: bool = False
    files: bool = False
    folders: tuple[str, ...] = ()  # the folders `files` may read

    def __post_init__(self) -> None:
        for name in ("datetime", "calculator", "files"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidParameter(f"Built-in tools: {name} must be true or false.")
        object.__setattr__(self, "folders", _strings(self.folders, "Built-in tools: folders"))


@dataclass(frozen=True)
class ToolsConfig:
    servers: tuple[McpServerConfig, ...] = ()
    builtin: BuiltinToolsConfig = BuiltinToolsConfig()
    never_ask: frozenset[str] = frozenset()  # registry keys "source/name" the user chose never to be asked about
    max_calls: int = DEFAULT_MAX_TOOL_CALLS
    # the tools a new chat starts with (`enabled`, `servers` only): the user's last choices in the Tools
    # popup, and each server added. Never taken from a chat (an imported one's choices came from a file).
    new_chats: ChatTools = dataclasses.field(default_factory=ChatTools)

    def __post_init__(self) -> None:
        object.__setattr__(self, "servers", tuple(self.servers))
        object.__setattr__(self, "never_ask", frozenset(self.never_ask))
        # (what a new chat starts with: no consent, no required call)
        object.__setattr__(self, "new_chats", ChatTools(self.new_chats.enabled, servers=self.new_chats.servers))
        seen: set[str] = set()
        for server in self.servers:
            if not isinstance(server, McpServerConfig):
                raise InvalidParameter(f"{server!r} is not an MCP server's settings.")
            if server.name.casefold() in seen:
                raise InvalidParameter(f"Two MCP servers are named {server.name!r}; each needs its own name.")
            seen.add(server.name.casefold())
        low, high = MAX_CALLS_RANGE
        if isinstance(self.max_calls, bool) or not isinstance(self.max_calls, int) or not low <= self.max_calls <= high:
            raise InvalidParameter(f"The cap on tool calls per answer must be between {low} and {high}.")

    def with_changes(self, **changes: Any) -> ToolsConfig:
        return dataclasses.replace(self, **changes)

    def server(self, name: str) -> McpServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)


# ----- tools.json


class ToolsConfigFile:
    """tools.json: `load` never fails (a missing file gives the defaults; a damaged one is set aside
    and `problem` says so), `save` is atomic."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None

    def load(self) -> ToolsConfig:
        self.problem = None
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ToolsConfig()
        except (OSError, UnicodeDecodeError) as exc:
            return self._set_aside(f"could not be read ({getattr(exc, 'strerror', None) or exc})", ToolsConfig())
        try:
            data = json.loads(text)
        except ValueError as exc:
            return self._set_aside(f"is not valid JSON ({exc})", ToolsConfig())
        if not isinstance(data, dict):
            return self._set_aside("does not hold the tools settings", ToolsConfig())
        config, troubles = _config_from_data(data)
        if troubles:
            return self._set_aside("had settings Ember could not use (" + "; ".join(troubles) + ")", config)
        return config

    def save(self, config: ToolsConfig) -> None:
        write_json_atomically(self.path, config_to_data(config), ensure_ascii=False)

    def _set_aside(self, why: str, config: ToolsConfig) -> ToolsConfig:
        aside = aside_path(self.path)
        try:
            self.path.replace(aside)
        except OSError as exc:
            where = f"it could not be moved aside ({exc.strerror or exc}) and was left as it is"
        else:
            where = f"it was set aside as {aside}"
        kept = "the rest was loaded" if config != ToolsConfig() else "tools start empty"
        self.problem = f"{self.path.name} {why}; {where}; {kept}."
        return config


def config_to_data(config: ToolsConfig) -> dict[str, Any]:
    return {
        "version": FILE_VERSION,
        "mcpServers": {s.name: server_to_data(s, ember_fields=True) for s in config.servers},
        "builtin": {
            "datetime": config.builtin.datetime,
            "calculator": config.builtin.calculator,
            "files": config.builtin.files,
            "folders": list(config.builtin.folders),
        },
        "neverAsk": sorted(config.never_ask),
        "maxCalls": config.max_calls,
        "newChats": {"enabled": sorted(config.new_chats.enabled), "servers": sorted(config.new_chats.servers)},
    }


def _config_from_data(data: Mapping[str, Any]) -> tuple[ToolsConfig, list[str]]:
    """The settings in a tools.json mapping, and what in it could not be used (each a clause)."""
    troubles: list[str] = []
    servers: list[McpServerConfig] = []
    raw_servers = data.get("mcpServers", {})
    if isinstance(raw_servers, dict):
        for name, raw in raw_servers.items():
            try:
                server = server_from_data(name, raw)
            except InvalidParameter as exc:
                troubles.append(str(exc).rstrip("."))
                continue
            if any(s.name.casefold() == server.name.casefold() for s in servers):
                troubles.append(f"a second server named {server.name!r}")
                continue
            servers.append(server)
    else:
        troubles.append("mcpServers is not a mapping of servers")
    builtin = BuiltinToolsConfig()
    raw_builtin = data.get("builtin", {})
    try:
        if not isinstance(raw_builtin, dict):
            raise InvalidParameter("builtin is not a mapping")
        builtin = BuiltinToolsConfig(
            datetime=raw_builtin.get("datetime", False),
            calculator=raw_builtin.get("calculator", False),
            files=raw_builtin.get("files", False),
            folders=tuple(raw_builtin.get("folders", ()) or ()),
        )
    except (InvalidParameter, TypeError) as exc:
        troubles.append(str(exc).rstrip("."))
    never_ask = data.get("neverAsk", [])
    if not isinstance(never_ask, list) or not all(isinstance(k, str) for k in never_ask):
        troubles.append("neverAsk is not a list of tools")
        never_ask = []
    max_calls = data.get("maxCalls", DEFAULT_MAX_TOOL_CALLS)
    low, high = MAX_CALLS_RANGE
    if isinstance(max_calls, bool) or not isinstance(max_calls, int) or not low <= max_calls <= high:
        troubles.append(f"maxCalls {max_calls!r} is not between {low} and {high}")
        max_calls = DEFAULT_MAX_TOOL_CALLS
    new_chats = ChatTools()
    raw_new = data.get("newChats", {})
    lists = [raw_new.get(k, []) for k in ("enabled", "servers")] if isinstance(raw_new, dict) else None
    if lists is None or not all(isinstance(v, list) and all(isinstance(k, str) for k in v) for v in lists):
        troubles.append("newChats is not a mapping of lists of tools and servers")
    else:
        new_chats = ChatTools(frozenset(lists[0]), servers=frozenset(lists[1]))
    return ToolsConfig(tuple(servers), builtin, frozenset(never_ask), max_calls, new_chats), troubles
