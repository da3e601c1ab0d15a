"""One API request as the server handles it (`Call`): what the client asked (method, path, headers,
its address, the body once read), what was answered (for the request log and /metrics), and the
ways to answer — from the request's handler thread (`send_json`, `send_head`, `write`, `end`) or
from the event loop (`asend_json`). Generations block on the engine's queue, so handlers run in
worker threads; every write goes through the event loop that owns the connection.

Whether the client is still there (`client_gone`) is an event the loop sets when the connection
closes (or the server stops), so a generation is cancelled within a token of it."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import anyio.from_thread
from starlette.datastructures import Headers

from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.serve import messages_route
from ember_chat.engine.serve.guards import content_length
from ember_chat.engine.serve.http_protocol import ABORT
from ember_chat.engine.serve.metrics_export import OTHER_ROUTE
from ember_chat.engine.serve.request_log import RequestRecord
from ember_chat.engine.serve.sink import ClientGone

# a body over the limit up to this size is read and dropped before the 413: closing a connection with
# unread data resets it, and the client may lose the answer it was sent (a 2 MB upload to a 2 MB limit)
DISCARDED_BODY_BYTES = 32 * 1024 * 1024

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
Receive = Callable[[], Awaitable[Message]]


def _header_list(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


def json_messages(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[Message]:
    """The ASGI messages of a whole JSON response."""
    data = json.dumps(body).encode()
    head = {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}
    return [
        {"type": "http.response.start", "status": status, "headers": _header_list(head)},
        {"type": "http.response.body", "body": data, "more_body": False},
    ]


def error_body(err: ApiError, path: str) -> dict[str, Any]:
    """An error in the shape of the API the path belongs to (Anthropic's on its Messages routes)."""
    return messages_route.error_body(err) if messages_route.is_messages_path(path) else err.body()


class Call:
    """One request. `send`: the connection's ASGI send (the middleware's, which adds what every
    response carries). `stopping`: set when the server stops (every generation ends then)."""

    def __init__(self, scope: Message, send: Send, stopping: threading.Event, timeout_s: float) -> None:
        self.method: str = scope["method"]
        query = scope.get("query_string", b"")
        self.path: str = scope["path"] + ("?" + query.decode("latin-1") if query else "")
        self.headers = Headers(scope=scope)
        client = scope.get("client")
        self.client: str = client[0] if client else ""
        self.record = RequestRecord(self.method, self.path, self.client)
        self.route = OTHER_ROUTE  # its route as /metrics counts it (route_label)
        self.model: str | None = None  # the model that answered it (its `model` label in /metrics), once known
        self.raw: bytearray | None = None  # the body, once read (`read_body`)
        self.close = False  # the connection closes after the response (where the next request begins is unknown)
        self.gone = threading.Event()  # the client closed the connection
        self._stopping = stopping
        self._send = send
        self._timeout_s = timeout_s  # a client that takes nothing we write for this long is given up
        self._abort: Callable[[], None] | None = scope.get(ABORT)  # ends the connection at once

    def client_gone(self) -> bool:
        return self.gone.is_set() or self._stopping.is_set()

    # ----- from the handler's thread
    def send_json(self, status: int, body: dict[str, Any], extra: dict[str, str] | None = None) -> None:
        for message in json_messages(status, body, extra):
            self._sync_send(message)

    def send_head(self, status: int, headers: dict[str, str]) -> None:
        """The status and these headers, for a body written as it comes (`write`, then `end`)."""
        self._sync_send({"type": "http.response.start", "status": status, "headers": _header_list(headers)})

    def write(self, data: bytes) -> None:
        if data:
            self._sync_send({"type": "http.response.body", "body": data, "more_body": True})

    def end(self) -> None:
        self._sync_send({"type": "http.response.body", "body": b"", "more_body": False})

    def send_error(self, err: ApiError) -> None:
        self.send_json(err.status, error_body(err, self.path), err.headers)

    def _sync_send(self, message: Message) -> None:
        anyio.from_thread.run(self._send_or_give_up, message)

    async def _send_or_give_up(self, message: Message) -> None:
        """Send, waiting for the client to take what was written before for `timeout_s` at most: one
        that stops reading (its window full) would hold its generation, and the server's stop, forever."""
        with anyio.move_on_after(self._timeout_s) as waited:
            await self._send(message)
        if waited.cancelled_caught:
            self.gone.set()
            if self._abort is not None:
                self._abort()  # (what it has not taken is dropped)
            raise ClientGone

    # ----- from the event loop
    async def asend_json(self, status: int, body: dict[str, Any], extra: dict[str, str] | None = None) -> None:
        for message in json_messages(status, body, extra):
            await self._send(message)

    async def asend_head(self, status: int, headers: dict[str, str]) -> None:
        await self._send({"type": "http.response.start", "status": status, "headers": _header_list(headers)})

    async def asend_end(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def asend_error(self, err: ApiError) -> None:
        await self.asend_json(err.status, error_body(err, self.path), err.headers)

    async def read_body(self, receive: Receive, max_bytes: int, timeout_s: float) -> None:
        """Read the request's body into `raw`: its Content-Length required and within `max_bytes`,
        each part within `timeout_s` of the last. ApiError (with `close` set where the rest of the
        body is left unread) when it is refused."""
        length = self.headers.get("content-length")
        if length is None:
            raise ApiError(411, "A Content-Length header is required.")
        n = content_length(length)
        if n is None:
            self.close = True
            raise ApiError(400, f"The Content-Length header must be a whole number of bytes, not {length!r}.")
        if n > max_bytes:
            self.close = True  # (not `>> 20` MB: a small limit read "0 MB")
            if n <= DISCARDED_BODY_BYTES:
                await self._discard(receive, timeout_s)
            raise ApiError(413, f"The request body is larger than the server's limit of {max_bytes:,} bytes.")
        # one buffer of the announced size, filled as the parts come (a large body is not copied again)
        raw, got = bytearray(n), 0
        while True:
            with anyio.move_on_after(timeout_s) as waited:
                message = await receive()
            if waited.cancelled_caught:
                self.close = True
                raise ApiError(408, f"The request body did not arrive in time (nothing for {timeout_s:g} seconds).")
            if message["type"] == "http.disconnect":
                self.gone.set()
                self.close = True
                raise ApiError(400, f"The request body ended after {got:,} of its {n:,} bytes.")
            part = message.get("body", b"")
            raw[got : got + len(part)] = part
            got += len(part)
            if not message.get("more_body", False):
                break
        self.raw = raw

    async def _discard(self, receive: Receive, timeout_s: float) -> None:
        """Read the body and drop it (each part within `timeout_s` of the last); it counts as read."""
        while True:
            with anyio.move_on_after(timeout_s) as waited:
                message = await receive()
            if waited.cancelled_caught:
                break
            if message["type"] == "http.disconnect":
                self.gone.set()
                break
            if not message.get("more_body", False):
                break
        self.raw = bytearray()  # (read: nothing is to be drained again before the answer)

    async def watch(self, receive: Receive) -> None:
        """Wait for the client to close the connection (its request's body already read), then say so."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone.set()

    def body(self) -> Any:
        """The body as JSON (parsed on the handler's thread: a large one would hold the event loop)."""
        assert self.raw is not None, "the route reads its body before its handler runs"
        try:
            return json.loads(self.raw)
        except ValueError as exc:
            raise ApiError(400, f"The request body is not valid JSON ({exc.msg} at position {exc.pos}).") from None
