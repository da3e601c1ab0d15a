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

ABORT = "ember.abort"  # the scope's key for ending the request's connection at once (a client that stalls)
REFUSED_LINGER_S = 2.0  # how long a refused connection is read (and dropped) for its client to close it


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
    _refused: asyncio.Transport | None = None  # a connection over the bound, answered 503
    _refusal_timer: asyncio.TimerHandle | None = None

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
            # answered on the accepting loop without a task of its own; what the client sends is read
            # and dropped until it closes (closing on unread data would reset the connection, losing
            # the 503 on its way), for REFUSED_LINGER_S at most
            self._refused = transport
            transport.write(busy_response(limit))
            self._refusal_timer = self.loop.call_later(REFUSED_LINGER_S, transport.close)
            return
        super().connection_made(transport)
        self._arm_read_timer()  # a connection that never sends a request is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused is not None:  # (nothing of uvicorn's was set up for it)
            if self._refusal_timer is not None:
                self._refusal_timer.cancel()
            return
        self._cancel_read_timer()
        super().connection_lost(exc)

    def eof_received(self) -> bool | None:
        if self._refused is not None:
            self._refused.close()
        return super().eof_received()

    def data_received(self, data: bytes) -> None:
        if self._refused is not None:
            return
        super().data_received(data)
        if self.transport.is_closing() or not self._between_requests():
            self._cancel_read_timer()  # (a request's body is its route's to wait for: a 408)
        else:
            # a head begun and not ended, or the rest of a body no route reads: the client has the
            # timeout to go on (uvicorn's keep-alive timer stops at any data)
            self._arm_read_timer()

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None:  # (a request's route may end its connection at once: exchange.Call)
            self.cycle.scope.setdefault(ABORT, self.transport.abort)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

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
        if self._between_requests():
            self.transport.close()  # nothing is being answered: the silent client just goes
