"""The API server's guards as a middleware, before any route: a request's path normalised and its Call made
(the request log and /metrics are told of it as its answer ends), CORS's preflight answered, then who may
call checked (the `Host` header on loopback, browser origins, the API key: guards.check_access). Every
answer gets the server's id and, for a listed origin, CORS's headers; one refused before its body was read
closes its connection."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Protocol

from ember_chat.engine.core.instance import SERVER_ID_HEADER
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.exchange import Call, Message, Receive, Send
from ember_chat.engine.serve.guards import check_access
from ember_chat.engine.serve.metrics_export import MetricsRegistry, route_label
from ember_chat.engine.serve.request_log import RequestListener
from ember_chat.engine.serve.responses_route import PREFIX

CALL = "ember.call"  # the scope's key for the request's Call
DRAINED_BODY_BYTES = 64 * 1024  # a refused request's body up to this is read before its connection closes


class Served(Protocol):
    """What the middleware reads of the server it guards."""

    config: ServerConfig
    service: EngineService
    port: int
    metrics: MetricsRegistry
    on_request: RequestListener | None
    stopping: threading.Event

    def model_label(self) -> str: ...


class GuardMiddleware:
    """The middleware every request passes first: its path normalised, its Call made (request log,
    /metrics), CORS's preflight answered, then who may call checked (Host, Origin, key) before any
    route. Every response gets the server's id and, for a listed origin, CORS's headers; one refused
    before its body was read closes the connection (the unread body must not be read as a request)."""

    def __init__(
        self, app: Callable[[Message, Receive, Send], Any], shared: Served, served_paths: frozenset[str]
    ) -> None:
        self.app = app
        self.shared = shared
        self.served_paths = served_paths  # (each a route label of its own in /metrics)

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        shared, config = self.shared, self.shared.config
        path = scope["path"] = scope["path"].rstrip("/")
        origin = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"), None)
        cors = origin is not None and origin in config.allowed_origins
        call: Call
        reported = False

        def report() -> None:
            """Tell the request log and /metrics, once: as the response ends (a request the client
            sends next, on this connection or another, finds it counted), or when it is given up."""
            nonlocal reported
            if reported:
                return
            reported = True
            exchange = call.record.exchange()
            if exchange is not None:
                shared.metrics.request(call.model or shared.model_label(), call.route, exchange)
            call.record.report(shared.on_request)

        async def send_with_ours(message: Message) -> None:
            if message["type"] == "http.response.start":
                call.record.status = message["status"]  # a stream's is its 200
                headers = [
                    *message.get("headers", []),
                    (SERVER_ID_HEADER.lower().encode(), shared.service.server_id.encode()),
                ]
                if cors:
                    headers += [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
                if call.method == "POST" and call.raw is None:
                    # refused before its body was read (401, 404 …): the connection closes (the body must
                    # not be read as a request), a small body read first (closing on unread data resets
                    # the connection, and the client may lose this answer)
                    call.close = True
                    with contextlib.suppress(ApiError):
                        await call.read_body(receive, DRAINED_BODY_BYTES, config.timeout_s)
                if call.close:
                    headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            elif not message.get("more_body", False):
                report()
            await send(message)

        call = scope[CALL] = Call(scope, send_with_ours, shared.stopping, config.timeout_s)
        call.route = route_label(path, self.served_paths, (PREFIX,))  # (before the guards: a 401 has one)
        try:
            if call.method == "OPTIONS":
                await self._preflight(call, cors)
            else:
                # /health reveals nothing (its model name is in every response): load balancers and
                # llama-server's clients poll it without a key. /metrics needs the key: it tells the traffic.
                check_access(call.headers, config, shared.port, needs_key=(call.method, path) != ("GET", "/health"))
                await self.app(scope, receive, send_with_ours)
        except ApiError as err:
            await call.asend_error(err)
        finally:
            report()

    @staticmethod
    async def _preflight(call: Call, cors: bool) -> None:
        if not cors:
            raise ApiError(403, "CORS is not enabled for this origin.", "forbidden")
        headers = {
            "Access-Control-Allow-Methods": "GET, POST, DELETE, OPTIONS",
            # (x-api-key and anthropic-version: Anthropic's clients send them)
            "Access-Control-Allow-Headers": "Authorization, Content-Type, x-api-key, anthropic-version",
            "Content-Length": "0",
        }
        await call.asend_head(204, headers)
        await call.asend_end()
