"""The API server's guards that need no handler: who may call it (Host, Origin, API key), what
counts as a Content-Length, how the listening socket may share its port, and the answer to a
connection over the limit."""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping

from ember_chat.engine.core.loopback import is_loopback
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.serve.config import LOOPBACK, ServerConfig


def host_allowed(header: str, listener: str, port: int) -> bool:
    """Whether a request's `Host` header may reach a server listening on `listener`:`port`.

    Only a loopback listener checks it: there it stops DNS rebinding (a web page whose name
    suddenly resolves to 127.0.0.1), so the header must name loopback or the listener, at this
    port. A listener on another interface is reached by names Ember cannot know (its LAN address,
    a DNS name, a proxy's), and needs an API key, which is its guard there (as in Ollama)."""
    if not is_loopback(listener):
        return True
    host = header.strip().lower()
    name, _, given_port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
    if not name:
        name, given_port = host, ""
    name = name.strip("[]")
    return name in {*LOOPBACK, listener.lower()} and (not given_port or given_port == str(port))


def check_access(headers: Mapping[str, str], config: ServerConfig, port: int, *, needs_key: bool = True) -> None:
    """Host (DNS rebinding), Origin (CORS) and API key checks, before anything else: ApiError if refused.
    `needs_key`: False for what reveals nothing (/health), still behind the Host and Origin checks."""
    host = headers.get("Host") or ""
    if not host_allowed(host, config.host, port):
        raise ApiError(403, f"Host {host!r} is not this server; use http://127.0.0.1:{port}.", "forbidden")
    origin = headers.get("Origin")
    if origin and origin not in config.allowed_origins:
        raise ApiError(403, f"Requests from the web origin {origin!r} are not allowed.", "forbidden")
    if config.api_key and needs_key:
        auth = headers.get("Authorization") or ""
        given = auth[7:] if auth.lower().startswith("bearer ") else ""
        # Anthropic's clients send the key as x-api-key: either header may carry it
        other = headers.get("x-api-key") or ""
        key = config.api_key.encode()
        if not (hmac.compare_digest(given.encode(), key) | hmac.compare_digest(other.encode(), key)):
            raise ApiError(401, "Invalid or missing API key.", "authentication_error", code="invalid_api_key")


def content_length(value: str) -> int | None:
    """The body length a Content-Length header gives, or None when it is not a plain decimal
    number (`int()` would also take -1, +5 and 1_0, which a proxy in front reads differently)."""
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() else None


def bind_option(platform: str) -> str:
    """The socket option the listener sets before binding, by `sys.platform`.

    On Windows SO_REUSEADDR lets another program bind the same port and take over its
    connections, so the listener claims the port with SO_EXCLUSIVEADDRUSE instead. Elsewhere
    SO_REUSEADDR only lets a restarted server bind while old connections linger in TIME_WAIT."""
    return "SO_EXCLUSIVEADDRUSE" if platform == "win32" else "SO_REUSEADDR"


def busy_response(limit: int) -> bytes:
    """A complete HTTP 503 for a connection over the limit, sent without a thread of its own."""
    message = (
        f"The server already has {limit} open connections, its limit. Close idle connections or try again shortly."
    )
    error = {"message": message, "type": "server_error", "param": None, "code": "too_many_connections"}
    body = json.dumps({"error": error}).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nServer: Ember\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body
