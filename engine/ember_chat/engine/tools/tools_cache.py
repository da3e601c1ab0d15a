"""MCP servers' tools, remembered between launches, so a server starts only when it is needed: the window
offers a server's tools from the last time it listed them (without starting its process) and starts it
when one of them is called.

`ToolsCache` is mcp-tools-cache.json in the data folder: each server's last tool list, keyed by its
name and a fingerprint of the settings that decide what runs (transport, command, args, env, cwd, url,
headers), so a server whose settings changed is never offered the tools of the old one. It is only a
cache: a damaged or unreadable file is ignored and written again; a write that fails costs nothing
but the next start's memory. Writes are atomic and happen on the thread that listed (never the GUI's).

`CachedServer` is the ToolProvider the registry holds for an MCP server: `list_tools` gives the
remembered tools without starting it (unless told to start it), `call` goes to the real McpServer,
which starts on demand; after the first call since Ember started, the server is listed, so its fresh
list replaces the remembered one and a call to a tool that is gone is an error result in words."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from ember_chat.engine.core.tools import ToolCall, ToolResult, ToolSpec
from ember_chat.engine.errors import EmberError, ToolError
from ember_chat.engine.storage.atomic import write_json_atomically
from ember_chat.engine.tools.mcp_client import McpServer
from ember_chat.engine.tools.mcp_config import McpServerConfig

log = logging.getLogger(__name__)

CACHE_FILE = "mcp-tools-cache.json"
CACHE_VERSION = 1
_MAX_BYTES = 8 * 1024 * 1024  # a bigger file is not Ember's cache: ignored


def server_fingerprint(config: McpServerConfig) -> str:
    """A digest of the settings that decide which program (or address) answers, and so which tools it has."""
    decisive = {
        "transport": config.transport,
        "command": config.command,
        "args": list(config.args),
        "env": dict(sorted(config.env.items())),
        "cwd": config.cwd,
        "url": config.url,
        "headers": dict(sorted(config.headers.items())),
        "secret_headers": sorted(config.secret_headers),
    }
    return hashlib.sha256(json.dumps(decisive, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _spec_to_data(spec: ToolSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        "read_only": spec.read_only,
    }


def _spec_from_data(raw: Any) -> ToolSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ValueError("a tool without a name")
    description, read_only = raw.get("description", ""), raw.get("read_only", False)
    if not isinstance(description, str) or not isinstance(read_only, bool):
        raise ValueError("a tool's description or read_only is not what it should be")
    return ToolSpec(raw["name"], description, raw.get("parameters", {"type": "object"}), read_only)


class ToolsCache:
    """Thread-safe: read by the GUI thread, written by the threads that list and call servers."""

    def __init__(self, path: Path, on_change: Callable[[str], None] | None = None) -> None:
        """`on_change(server name)`: a server's remembered tools changed (called on the thread that listed)."""
        self.path = path
        self.on_change = on_change
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._entries: dict[str, tuple[str, list[ToolSpec]]] = self._load()
        self._fresh: set[tuple[str, str]] = set()  # (name, fingerprint) listed since Ember started

    def _load(self) -> dict[str, tuple[str, list[ToolSpec]]]:
        """What the file holds; anything damaged is left out (a server with a bad entry is listed anew)."""
        try:
            if self.path.stat().st_size > _MAX_BYTES:
                return {}
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.info("%s is ignored (%s); it is written again", self.path.name, exc)
            return {}
        servers = data.get("servers") if isinstance(data, dict) and data.get("version") == CACHE_VERSION else None
        if not isinstance(servers, dict):
            return {}
        entries: dict[str, tuple[str, list[ToolSpec]]] = {}
        for name, raw in servers.items():
            try:
                if not isinstance(raw, dict) or not isinstance(raw.get("fingerprint"), str):
                    raise ValueError("no fingerprint")
                tools = raw.get("tools")
                if not isinstance(tools, list):
                    raise ValueError("no list of tools")
                entries[name] = (raw["fingerprint"], [_spec_from_data(t) for t in tools])
            except (ValueError, EmberError) as exc:
                log.info("%s: the tools of %r are ignored (%s)", self.path.name, name, exc)
        return entries

    def get(self, config: McpServerConfig) -> list[ToolSpec] | None:
        """The server's tools as last listed under these settings; None when there are none."""
        with self._lock:
            entry = self._entries.get(config.name)
        if entry is None or entry[0] != server_fingerprint(config):
            return None
        return list(entry[1])

    def is_fresh(self, config: McpServerConfig) -> bool:
        """Listed since Ember started, under these settings."""
        with self._lock:
            return (config.name, server_fingerprint(config)) in self._fresh

    def put(self, config: McpServerConfig, specs: Sequence[ToolSpec]) -> None:
        """The server's fresh list: it replaces what was remembered (written to the file when it changed).
        Blocking (a file write): call it off the GUI thread."""
        fingerprint = server_fingerprint(config)
        entry = (fingerprint, list(specs))
        with self._lock:
            self._fresh.add((config.name, fingerprint))
            changed = self._entries.get(config.name) != entry
            if changed:
                self._entries[config.name] = entry
        if not changed:
            return
        self._write()
        if self.on_change is not None:
            self.on_change(config.name)

    def _write(self) -> None:
        with self._write_lock:  # one writer at a time, each with what is current when it writes
            with self._lock:
                data = {
                    "version": CACHE_VERSION,
                    "servers": {
                        name: {"fingerprint": fp, "tools": [_spec_to_data(s) for s in specs]}
                        for name, (fp, specs) in self._entries.items()
                    },
                }
            try:
                write_json_atomically(self.path, data, ensure_ascii=False)
            except OSError as exc:  # only a cache: the next start lists the server again
                log.warning("%s could not be written (%s)", self.path, exc.strerror or exc)


class CachedServer:
    """An MCP server as the registry offers it (core.tools.ToolProvider). `start`: list it for real
    (starting it) even when its tools are remembered."""

    def __init__(self, server: McpServer, cache: ToolsCache, start: bool = False) -> None:
        self.server = server
        self.cache = cache
        self.start = start
        self.from_cache = False  # the last list_tools gave the remembered tools

    @property
    def source(self) -> str:
        return self.server.source

    @property
    def config(self) -> McpServerConfig:
        return self.server.config

    @property
    def state(self) -> str:
        return self.server.state

    def list_tools(self, timeout_s: float | None = None) -> list[ToolSpec]:
        if not self.start:
            remembered = self.cache.get(self.config)
            if remembered is not None:
                self.from_cache = True
                return remembered
        specs = self.server.list_tools(timeout_s)  # starts it when it is not running
        self.from_cache = False
        self.cache.put(self.config, specs)
        return specs

    def call(self, call: ToolCall, timeout_s: float | None = None, cancel: threading.Event | None = None) -> ToolResult:
        result = self.server.call(call, timeout_s, cancel)  # (a Stop while it starts is honoured there)
        if self.cache.is_fresh(self.config) or self.server.state != "running":
            return result
        # the tools offered were remembered: now that it runs, its own list replaces them, and a call to a
        # tool it no longer has (the server refused it: nothing ran) is said as such
        try:
            specs = self.server.list_tools()
        except ToolError:
            return result
        self.cache.put(self.config, specs)
        if call.name in {s.name for s in specs} or not result.is_error:
            return result
        return ToolResult(
            call.id,
            call.name,
            f"The MCP server {self.source!r} no longer offers a tool named {call.name!r} (its tools changed "
            "since Ember last listed them), so nothing was run. Its current tools are offered from now on.",
            is_error=True,
            duration_ms=result.duration_ms,
        )


def listing_plan(
    servers: Sequence[McpServer], cache: ToolsCache, start: Collection[str], demand: bool
) -> tuple[list[CachedServer], list[CachedServer], set[str]]:
    """How a listing offers each server: (those listed without starting anything, all of them, the names
    of those it starts). A server is listed for real when it is in `start` (the user saved, added or
    turned it on, or asked to start it again) or has no tools remembered under its settings and is running,
    or stopped once the user asked for tools (`demand`: a failed one waits for "Start again"); else its
    remembered tools are offered; a server with neither is left out (not started)."""
    quick: list[CachedServer] = []
    listed: list[CachedServer] = []
    starting: set[str] = set()
    for server in servers:
        remembered = cache.get(server.config) is not None
        if server.source in start or (
            not remembered and (server.state == "running" or (demand and server.state == "stopped"))
        ):
            listed.append(CachedServer(server, cache, start=True))
            if server.state == "running":
                quick.append(CachedServer(server, cache, start=True))
            else:
                starting.add(server.source)
        elif remembered:
            listed.append(CachedServer(server, cache))
            quick.append(CachedServer(server, cache))
    return quick, listed, starting
