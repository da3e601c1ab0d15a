"""The API server's HTTP/1.1 connections (uvicorn's h11 protocol) with the guards that act before a
request exists: a bound on open connections (one over it gets a 503 at once and is closed), a
timeout on a client that is silent while it sends a request's head (a body's is the route's), and
a malformed request answered in JSON like every other refusal."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from ember_chat.engine.serve.guards import busy_response


class _Connection(h11.Connection):
    """h11's connection, keeping what it found wrong with a request (uvicorn's 400 drops it)."""

    error = ""

    def next_event(self) -> type[h11.PAUSED] | type[h11.NEED_DATA] | h11.Event:  # type: ignore[override]
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.error = str(exc)
            raise


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol; `max_connections` the bound on open connections (uvicorn's own
    `limit_concurrency` would also refuse the requests of connections already open),
    `timeout_keep_alive` the client read timeout."""

    _read_timer: asyncio.TimerHandle | None = None

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        max_connections: int,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.max_connections = max_connections
        size = config.h11_max_incomplete_event_size
        self._h11 = self.conn = _Connection(h11.SERVER, size if size is not None else DEFAULT_MAX_INCOMPLETE_EVENT_SIZE)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limit = self.max_connections
        if len(self.connections) >= limit:
            # answered on the accepting loop without a task of its own, then closed
            transport.write(busy_response(limit))
            transport.close()
            return
        super().connection_made(transport)
        self._arm_read_timer()  # a connection that never sends a request is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:  # refused in connection_made: nothing of it was set up
            return
        self._cancel_read_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._cancel_read_timer()
        elif self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self._arm_read_timer()  # a head begun and not ended: it has the timeout to go on
        else:
            self._cancel_read_timer()

    def on_response_complete(self) -> None:
        self._cancel_read_timer()  # (uvicorn's keep-alive timer, the same length, takes over)
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot read (a malformed Content-Length, a broken head): a JSON 400 that
        says what h11 found, then the connection is closed (where the request ends is unknown)."""
        detail = self._h11.error or "it is not valid HTTP/1.1"
        error = {
            "message": f"The request cannot be read: {detail}.",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
        body = json.dumps({"error": error}).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        try:
            self.transport.write(self.conn.send(h11.Response(status_code=400, headers=headers, reason=b"Bad Request")))
            self.transport.write(self.conn.send(h11.Data(data=body)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
        except h11.LocalProtocolError:
            pass  # a response was already under way: closing is all that is left
        self.transport.close()

    def _arm_read_timer(self) -> None:
        self._cancel_read_timer()
        self._read_timer = self.loop.call_later(self.timeout_keep_alive, self._read_timed_out)

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete):
            self.transport.close()  # nothing was asked of us: the client just goes
