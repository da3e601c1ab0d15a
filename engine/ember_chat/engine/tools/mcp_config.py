"""One MCP server's settings (McpServerConfig), the `mcpServers` JSON shape Claude Desktop, Cursor,
Cline and VS Code use (paste, export), and the server's header secrets in the OS keychain. Re-exported
by engine/tools/config.py, which keeps them with the rest of the tools settings in tools.json."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.secrets import SecretStore

TRANSPORTS = ("stdio", "http")
BUILTIN_SOURCE = "Built-in"  # the built-in tools' source name: no server may take it
TIMEOUT_RANGE = (1.0, 3600.0)

# ----- checks


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise InvalidParameter(f"{what} must be a list of strings.")
    return tuple(value)


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidParameter(f"{what} must map names to strings.")
    return dict(value)


def _scalar(value: Any, what: str) -> str:
    """Pasted configs write numbers and booleans where strings belong (a port, "true"): take them as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise InvalidParameter(f"{what} must hold strings, not {json.dumps(value)[:40]}.")


def _scalar_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InvalidParameter(f"{what} must map names to strings.")
    return {str(k): _scalar(v, f"{what} ({k})") for k, v in value.items()}


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidParameter(f"{what} must be true or false.")
    return value


def _http_url(url: str, where: str) -> str:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParameter(f"{where} needs an http(s) address, for example http://127.0.0.1:8000/mcp.")
    return url


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server: a command Ember runs (stdio) or an address it posts to (streamable HTTP)."""

    name: str  # unique, shown on cards ("source")
    transport: str = "stdio"  # "stdio" | "http" (streamable HTTP)
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, hash=False)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict, hash=False)  # non-secret headers only
    secret_headers: tuple[str, ...] = ()  # names whose values live in the keychain (`header_secret`)
    enabled: bool = True
    start_timeout_s: float = 20.0
    call_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidParameter("An MCP server needs a name.")
        name = self.name.strip()
        object.__setattr__(self, "name", name)
        if len(name) > 64 or "/" in name:
            raise InvalidParameter(f"The server name {name!r} must be 1–64 characters without '/'.")
        if name.casefold() == BUILTIN_SOURCE.casefold():
            raise InvalidParameter(
                f"{BUILTIN_SOURCE!r} is the name of Ember's own tools; give the server another name."
            )
        where = f"Server {name!r}"
        if self.transport not in TRANSPORTS:
            raise InvalidParameter(f"{where}: the transport must be stdio or http, not {self.transport!r}.")
        object.__setattr__(self, "args", _strings(self.args, f"{where}: args"))
        object.__setattr__(self, "env", _string_map(self.env, f"{where}: env"))
        object.__setattr__(self, "headers", _string_map(self.headers, f"{where}: headers"))
        object.__setattr__(self, "secret_headers", _strings(self.secret_headers, f"{where}: secret headers"))
        if not isinstance(self.command, str) or not isinstance(self.url, str):
            raise InvalidParameter(f"{where}: the command and the url must be text.")
        if self.cwd is not None and not isinstance(self.cwd, str):
            raise InvalidParameter(f"{where}: the working folder must be text.")
        object.__setattr__(self, "cwd", self.cwd.strip() or None if self.cwd else None)
        if self.transport == "stdio":
            if not self.command.strip():
                raise InvalidParameter(f"{where} needs a command to run (for example npx or uvx).")
            object.__setattr__(self, "command", self.command.strip())
        else:
            object.__setattr__(self, "url", _http_url(self.url, where))
        clash = {h.casefold() for h in self.headers} & {h.casefold() for h in self.secret_headers}
        if clash:
            raise InvalidParameter(f"{where}: the header {sorted(clash)[0]!r} is both plain and secret.")
        if not isinstance(self.enabled, bool):
            raise InvalidParameter(f"{where}: enabled must be true or false.")
        for label, value in (("start timeout", self.start_timeout_s), ("call timeout", self.call_timeout_s)):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (TIMEOUT_RANGE[0] <= value <= TIMEOUT_RANGE[1])
            ):
                raise InvalidParameter(f"{where}: the {label} must be between 1 and 3600 seconds, not {value!r}.")
        object.__setattr__(self, "start_timeout_s", float(self.start_timeout_s))
        object.__setattr__(self, "call_timeout_s", float(self.call_timeout_s))

    def with_changes(self, **changes: Any) -> McpServerConfig:
        return dataclasses.replace(self, **changes)

    def secret_key(self, header: str) -> str:
        return header_secret_key(self.name, header)


# ----- the mcpServers shape (Claude Desktop, Cursor, Cline, VS Code's "servers")


def server_to_data(server: McpServerConfig, ember_fields: bool = False) -> dict[str, Any]:
    """One server in the `mcpServers` shape; `ember_fields` adds what only Ember reads (timeouts,
    secret header names). Secret values are never in it."""
    data: dict[str, Any]
    if server.transport == "stdio":
        data = {"command": server.command, "args": list(server.args)}
        if server.env:
            data["env"] = dict(server.env)
        if server.cwd:
            data["cwd"] = server.cwd
    else:
        data = {"type": "http", "url": server.url}
        if server.headers:
            data["headers"] = dict(server.headers)
    if not server.enabled:
        data["disabled"] = True
    if ember_fields:
        if server.secret_headers:
            data["secretHeaders"] = list(server.secret_headers)
        data["startTimeout"] = server.start_timeout_s
        data["callTimeout"] = server.call_timeout_s
    return data


_HTTP_TYPES = ("http", "streamable-http", "streamable_http", "streamablehttp")


def server_from_data(name: Any, raw: Any) -> McpServerConfig:
    """One entry of an `mcpServers` mapping; InvalidParameter saying which server and what is wrong."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidParameter("A server in the list has an empty name.")
    where = f"Server {name.strip()!r}"
    if not isinstance(raw, dict):
        raise InvalidParameter(f"{where} must be an object with a command or a url.")
    kind = raw.get("type", raw.get("transport"))
    kind = kind.casefold() if isinstance(kind, str) else kind
    url = raw.get("url", raw.get("serverUrl"))
    if kind == "sse":
        raise InvalidParameter(
            f"{where} uses the older SSE transport, which Ember does not support; use the server's streamable "
            "HTTP address (often ending in /mcp) instead."
        )
    if kind not in (None, "stdio", *_HTTP_TYPES):
        raise InvalidParameter(f"{where} has the type {raw.get('type')!r}; Ember knows stdio and http.")
    if "command" in raw and url is not None:
        raise InvalidParameter(f"{where} has both a command and a url; keep one.")
    common: dict[str, Any] = {
        "enabled": not _flag(raw.get("disabled", False), f"{where}: disabled"),
        "start_timeout_s": raw.get("startTimeout", 20.0),
        "call_timeout_s": raw.get("callTimeout", 60.0),
    }
    if "command" in raw or kind == "stdio":
        command = raw.get("command")
        if not isinstance(command, str) or not command.strip():
            raise InvalidParameter(f"{where} needs a command to run (for example npx or uvx).")
        args = raw.get("args", [])
        if not isinstance(args, list):
            raise InvalidParameter(f"{where}: args must be a list of strings.")
        return McpServerConfig(
            name,
            "stdio",
            command=command,
            args=tuple(_scalar(a, f"{where}: args") for a in args),
            env=_scalar_map(raw.get("env") or {}, f"{where}: env"),
            cwd=raw.get("cwd") or None,
            **common,
        )
    if url is None:
        raise InvalidParameter(f"{where} has neither a command nor a url.")
    secret = raw.get("secretHeaders", [])
    if not isinstance(secret, list):
        raise InvalidParameter(f"{where}: secretHeaders must be a list of header names.")
    return McpServerConfig(
        name,
        "http",
        url=url if isinstance(url, str) else "",
        headers=_scalar_map(raw.get("headers") or {}, f"{where}: headers"),
        secret_headers=tuple(secret),
        **common,
    )


def parse_mcp_servers(text: str) -> list[McpServerConfig]:
    """Servers from pasted JSON: `{"mcpServers": {...}}` (Claude Desktop, Cursor), `{"servers": {...}}`
    (VS Code) or the bare mapping of names to servers. InvalidParameter with one sentence when it is
    not usable: which server, and what is wrong."""
    if not text.strip():
        raise InvalidParameter("Nothing was pasted: paste the mcpServers JSON from the server's instructions.")
    try:
        data = json.loads(text)
    except ValueError as exc:
        where = getattr(exc, "lineno", None)
        at = f" at line {where}, column {getattr(exc, 'colno', '?')}" if where else ""
        message = getattr(exc, "msg", str(exc))
        raise InvalidParameter(f"The pasted text is not valid JSON ({message}{at}).") from None
    if not isinstance(data, dict):
        raise InvalidParameter('The pasted JSON must be an object like {"mcpServers": {"name": {...}}}.')
    for key in ("mcpServers", "servers"):
        if key in data:
            data = data[key]
            if not isinstance(data, dict):
                raise InvalidParameter(f"{key} must map each server's name to its settings.")
            break
    else:
        if "command" in data or "url" in data or "serverUrl" in data:
            raise InvalidParameter(
                'The pasted JSON is one server without a name; put it under a name: {"mcpServers": {"name": {...}}}.'
            )
    if not data:
        raise InvalidParameter("The pasted JSON lists no servers.")
    servers: list[McpServerConfig] = []
    for name, raw in data.items():
        server = server_from_data(name, raw)
        if any(s.name.casefold() == server.name.casefold() for s in servers):
            raise InvalidParameter(f"The pasted JSON names two servers {server.name!r}.")
        servers.append(server)
    return servers


def mcp_servers_json(servers: Iterable[McpServerConfig]) -> str:
    """The servers as `{"mcpServers": {...}}` (export); secret header values are not included."""
    return json.dumps({"mcpServers": {s.name: server_to_data(s) for s in servers}}, indent=2, ensure_ascii=False)


# ----- header secrets in the keychain


def header_secret_key(server: str, header: str) -> str:
    return f"mcp:{server}:{header}"


def save_header_secret(server: str, header: str, value: str, secrets: SecretStore) -> None:
    """Keep a header's value (a token, an API key) in the OS keychain; an empty value removes it."""
    secrets.set(header_secret_key(server, header), value, f"The {header} header of {server}")


def header_secret(server: str, header: str, secrets: SecretStore) -> str | None:
    """The header's value from the keychain; None when none is stored. SecretStoreError when the
    keychain cannot be read."""
    return secrets.read(header_secret_key(server, header), f"The {header} header of {server}")


def clear_header_secrets(server: McpServerConfig, secrets: SecretStore) -> None:
    """Forget a removed server's secrets."""
    for header in server.secret_headers:
        secrets.clear(header_secret_key(server.name, header))


_SECRET_WORDS = ("authorization", "token", "key", "secret", "password", "cookie")


def looks_secret(header: str) -> bool:
    """A header whose value is probably a credential (Authorization, X-Api-Key, …)."""
    return any(word in header.casefold() for word in _SECRET_WORDS)


def move_headers_to_keychain(
    server: McpServerConfig, secrets: SecretStore, headers: Sequence[str] | None = None
) -> McpServerConfig:
    """The server with these headers' values (by default those that `looks_secret`) moved from its
    plain headers into the keychain, for a pasted config whose token must not stay in tools.json."""
    names = [h for h in server.headers if (looks_secret(h) if headers is None else h in headers)]
    for header in names:
        save_header_secret(server.name, header, server.headers[header], secrets)
    plain = {h: v for h, v in server.headers.items() if h not in names}
    return server.with_changes(headers=plain, secret_headers=tuple(dict.fromkeys((*server.secret_headers, *names))))
