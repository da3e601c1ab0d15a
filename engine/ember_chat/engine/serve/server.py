"""Ember's OpenAI-compatible API server over whichever model the engine service has loaded.

Standard library HTTP (one thread per connection, up to a limit; generation itself is serialised by
the engine service's queue, shared fairly with the window). Guards (the socket-free ones in
`guards.py`): bound to 127.0.0.1 by default (another interface needs an API key); on loopback the
`Host` header must name this server (DNS rebinding); no CORS headers, and requests from a browser
origin refused, unless the origin is listed; a body size limit and a strict Content-Length; a
timeout on reads from the client (never on the wait for tokens); JSON validated with clear 400s; no
stack traces in responses. A client that disconnects cancels its generation within one token; a
generation that does not finish cleanly is an error, never `finish_reason: "stop"`. Every request
answered is reported to the server's request listener (`request_log.py`), refusals included. A
generation is answered by an `Answerer` (`answering.py`), streamed through an `EventStream`
(`event_stream.py`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ember_chat.engine.attachments.isolated import ReadingStopped
from ember_chat.engine.core.instance import SERVER_ID_HEADER
from ember_chat.engine.errors import ServeError
from ember_chat.engine.inference.pool.pool import ModelPool
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.responses import ResponseBuilder
from ember_chat.engine.serve import messages_route, tokens
from ember_chat.engine.serve.answering import Answerer
from ember_chat.engine.serve.api_request import ApiRequest, parse_request
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.embeddings_route import embeddings, refuse_chat
from ember_chat.engine.serve.event_stream import EventStream
from ember_chat.engine.serve.file_reading import Reading
from ember_chat.engine.serve.guards import bind_option, check_access, content_length, refuse
from ember_chat.engine.serve.infill_request import InfillResponseBuilder, parse_infill
from ember_chat.engine.serve.metrics_export import (
    CONTENT_TYPE,
    OTHER_ROUTE,
    EngineView,
    MetricsRegistry,
    kv_cells,
    route_label,
)
from ember_chat.engine.serve.model_routing import Served, own_names, serving, take_ttl
from ember_chat.engine.serve.models_api import load_model, models_list, models_table, unload_model
from ember_chat.engine.serve.request_log import RequestListener, RequestRecord
from ember_chat.engine.serve.rerank_route import rerank
from ember_chat.engine.serve.responses_route import (
    PREFIX,
    ResponsesStream,
    ResponseStore,
    Turn,
    read_turn,
    stored_route,
)
from ember_chat.engine.serve.sink import ClientGone, client_gone
from ember_chat.engine.serve.tool_checks import check_tool_schemas
from ember_chat.engine.storage.presets import Preset

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "Ember"
    _body_read = False  # this request's body has been read (else an error response closes the connection)
    _record: RequestRecord | None = None  # the request being answered, for the server's request listener
    _route = OTHER_ROUTE  # its route as /metrics counts it (route_label)
    _model: str | None = None  # the model that answered it (its `model` label in /metrics), once known
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a token is a small write
        # Reads from a silent client (a half-sent request, an idle keep-alive) end after this; the
        # wait for tokens reads nothing, so a slow model is never cut by it.
        self.connection.settimeout(self.server.config.timeout_s)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    # ----- plumbing
    def send_response(self, code: int, message: str | None = None) -> None:
        if self._record is not None:
            self._record.status = code  # a stream's is its 200
        super().send_response(code, message)

    def end_headers(self) -> None:
        # the engine's id: a connection leading back to this engine is refused (it would wait for itself)
        self.send_header(SERVER_ID_HEADER, self.server.service.server_id)
        super().end_headers()

    def _cors(self) -> dict[str, str]:
        origin = self.headers.get("Origin")
        if origin and origin in self.server.config.allowed_origins:
            return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
        return {}

    def _send_json(self, status: int, body: dict[str, Any], extra: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in {**self._cors(), **(extra or {})}.items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")  # else the client may reuse it before it sees the close
        self.end_headers()
        self.wfile.write(data)

    def _send_head(self, status: int, headers: dict[str, str]) -> None:
        """A status line and these headers, then CORS's, for a body written as it comes (a stream)."""
        self.send_response(status)
        for k, v in {**headers, **self._cors()}.items():
            self.send_header(k, v)
        self.end_headers()

    def _client_gone(self) -> bool:
        return client_gone(self.connection)

    def _send_error(self, err: ApiError) -> None:
        body = messages_route.error_body(err) if messages_route.is_messages_path(self.path) else err.body()
        self._send_json(err.status, body, err.headers)

    def _body(self) -> Any:
        length = self.headers.get("Content-Length")
        if length is None:
            raise ApiError(411, "A Content-Length header is required.")
        n = content_length(length)
        if n is None:
            self.close_connection = True  # where this body ends is unknown
            raise ApiError(400, f"The Content-Length header must be a whole number of bytes, not {length!r}.")
        if n > self.server.config.max_body_bytes:
            self.close_connection = True
            limit = self.server.config.max_body_bytes  # not `>> 20` MB: a small limit read "0 MB"
            raise ApiError(413, f"The request body is larger than the server's limit of {limit:,} bytes.")
        try:
            raw = self.rfile.read(n)
        except TimeoutError:
            self.close_connection = True
            raise ApiError(
                408, f"The request body did not arrive in time (nothing for {self.server.config.timeout_s:g} seconds)."
            ) from None
        self._body_read = True
        if len(raw) < n:
            self.close_connection = True
            raise ApiError(400, f"The request body ended after {len(raw):,} of its {n:,} bytes.")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, f"The request body is not valid JSON ({exc.msg} at position {exc.pos}).") from None

    def _handle(self, method: str) -> None:
        self._body_read = False
        try:
            path = self.path.split("?", 1)[0].rstrip("/")
            service, config, pool = self.server.service, self.server.config, self.server.pool
            relaxed, advice = config.allow_unknown_fields, config.unknown_fields_advice
            routes = {
                ("GET", "/health"): self._health,
                ("GET", "/v1/models"): self._models,
                ("GET", "/metrics"): self._metrics,  # Prometheus's text (serve/metrics_export.py)
                ("GET", "/api/models"): lambda: self._send_json(200, models_table(service, pool, config.alias)),
                ("POST", "/api/models/load"): lambda: self._send_json(  # serve/models_api.py
                    200, load_model(service, pool, config.alias, self._body())
                ),
                ("POST", "/api/models/unload"): lambda: self._send_json(200, unload_model(pool, self._body())),
                ("POST", "/v1/chat/completions"): lambda: self._generate("chat"),
                ("POST", "/v1/completions"): lambda: self._generate("completion"),
                ("POST", "/infill"): lambda: self._generate("infill"),  # llama-server's (serve/infill_request.py)
                ("POST", "/v1/embeddings"): lambda: self._send_json(  # serve/embeddings_route.py
                    200, embeddings(self._body(), self._serving, relaxed, advice)
                ),
                ("POST", "/v1/rerank"): self._rerank,  # serve/rerank_route.py; llama-server's names for it too:
                ("POST", "/rerank"): self._rerank,
                ("POST", "/v1/reranking"): self._rerank,
                ("POST", "/v1/responses"): lambda: self._generate("responses"),  # serve/responses_route.py
                ("POST", "/v1/messages"): lambda: self._generate("messages"),  # Anthropic's (serve/messages_route.py)
                ("POST", "/v1/messages/count_tokens"): self._count_tokens,
                ("POST", "/tokenize"): lambda: self._send_json(
                    200, tokens.tokenize(service, self._body(), relaxed, advice)
                ),
                ("POST", "/detokenize"): lambda: self._send_json(
                    200, tokens.detokenize(service, self._body(), relaxed, advice)
                ),
            }
            self._route = route_label(path, (p for _, p in routes), (PREFIX,))  # (before the guards: a 401 has one)
            # /health reveals nothing (its model name is in every response): load balancers and
            # llama-server's clients poll it without a key. /metrics needs the key: it tells the traffic.
            key = (method, path) != ("GET", "/health")
            check_access(self.headers, self.server.config, self.server.server_address[1], needs_key=key)
            route = routes.get((method, path))
            if route is None and path.startswith(PREFIX):  # a stored response: GET, DELETE
                route = stored_route(method, path, self.server.responses, self._send_json)
            if route is None:
                if any(p == path for _, p in routes):
                    raise ApiError(405, f"{method} is not allowed on {path}.")
                raise ApiError(404, f"Unknown endpoint {path}.", code="not_found")
            route()
        except ApiError as err:
            if method == "POST" and not self._body_read:  # refused before its body was read (401, 404, …)
                self.close_connection = True  # the unread body must not be parsed as a request
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError, ClientGone, ReadingStopped, TimeoutError):
            self.close_connection = True  # gone, or stopped reading what we write
        except Exception:
            log.exception("API request failed")
            self._send_error(ApiError(500, "Internal server error; see Ember's log.", "server_error"))

    def _logged(self, method: str, handle: Callable[[], None]) -> None:
        """Handle the request, then tell the server's request listener (if it still has one) what was sent."""
        record = self._record = RequestRecord(method, self.path, self.client_address[0])
        self._route, self._model = OTHER_ROUTE, None
        try:
            handle()
        finally:
            self._record = None
            exchange = record.exchange()
            if exchange is not None:
                self.server.metrics.request(self._model or self._model_label(), self._route, exchange)
            record.report(self.server.on_request)

    def do_GET(self) -> None:
        self._logged("GET", lambda: self._handle("GET"))

    def do_POST(self) -> None:
        self._logged("POST", lambda: self._handle("POST"))

    def do_DELETE(self) -> None:
        self._logged("DELETE", lambda: self._handle("DELETE"))

    def do_OPTIONS(self) -> None:
        self._logged("OPTIONS", self._options)

    def _options(self) -> None:
        origin = self.headers.get("Origin")
        if origin and origin in self.server.config.allowed_origins:
            self.send_response(204)
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
            # (x-api-key and anthropic-version: Anthropic's clients send them)
            self.send_header(
                "Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, anthropic-version"
            )
            self.send_header("Vary", "Origin")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._send_error(ApiError(403, "CORS is not enabled for this origin.", "forbidden"))

    # ----- endpoints
    def _health(self) -> None:
        model = self.server.service.model
        running, queued = self.server.service.queue_state().count("api")
        self._send_json(200, {"status": "ok", "model": self._served_name() if model else None,
                              "running": running, "queued": queued})  # fmt: skip

    def _models(self) -> None:
        self._send_json(200, models_list(self.server.service, self.server.pool, self.server.config.alias))

    def _metrics(self) -> None:
        pool = self.server.pool
        evictions = dict(pool.evictions_by_model) if pool is not None else {}
        label, service = self._model_label(), self.server.service
        engine = EngineView(label, service.queue_state(), self._loads(), evictions, kv_cells(label, service, pool))
        data = self.server.metrics.render(engine).encode()
        self._send_head(200, {"Content-Type": CONTENT_TYPE, "Content-Length": str(len(data))})
        self.wfile.write(data)

    def _loads(self) -> dict[str, int]:
        """The engine's model loads by each model's name here (the served model's is the server's alias)."""
        service, loads = self.server.service, {}
        for name, count in service.load_counts().items():
            shown = self._served_name() if service.model is not None and name == service.model_alias else name
            loads[shown] = loads.get(shown, 0) + count
        if self.server.pool is not None:  # (the models loaded for requests, each in an engine of its own)
            for name, count in self.server.pool.loads_by_model.items():
                loads[name] = loads.get(name, 0) + count
        return loads

    def _model_label(self) -> str:
        """The `model` label of what this server does now: the served model's name, "" with none loaded."""
        return self._served_name() if self.server.service.model is not None else ""

    def _served_name(self) -> str:
        """The model's name here: the server's alias, else the name it was loaded by."""
        service = self.server.service
        model = service.model
        return self.server.config.alias or service.model_alias or (model.name if model else "")

    @contextlib.contextmanager
    def _serving(self, requested: str | None, ttl_s: float | None = None) -> Iterator[Served]:
        """The engine serving the model a request names (serve/model_routing.py), held for the request;
        /metrics counts the request under that model."""
        with serving(self.server.service, self.server.pool, self.server.config.alias, requested, ttl_s) as served:
            self._model = served.name
            yield served

    def _generate(self, kind: str) -> None:
        config = self.server.config
        body = self._body()
        ttl = take_ttl(body)  # (how long a model loaded for it stays: not a field of the request itself)
        preset = self._preset_for(body)
        # its files are read in child processes that end when the client hangs up or the server stops
        reading = Reading(config.attachment_limits, self._client_gone, config.file_turn_wait_s)
        turn: Turn | messages_route.Turn | None = None
        if kind == "messages":
            turn = messages_route.read_turn(body, config.allow_unknown_fields, preset, reading,
                                            config.unknown_fields_advice)  # fmt: skip
            req = turn.request
        elif kind == "responses":
            turn = read_turn(body, self.server.responses, config.allow_unknown_fields, preset, reading,
                             config.unknown_fields_advice)  # fmt: skip
            req = turn.request
        elif kind == "infill":
            req = parse_infill(body, config.allow_unknown_fields, preset, config.unknown_fields_advice)
        else:
            req = parse_request(kind, body, config.allow_unknown_fields, preset, reading, config.unknown_fields_advice)
        with self._serving(req.model, ttl) as served:
            self._answer(kind, req, turn, served)

    def _rerank(self) -> None:
        config = self.server.config
        body = rerank(self._body(), self._serving, config.allow_unknown_fields, config.unknown_fields_advice)
        self._send_json(200, body)

    def _answer(self, kind: str, req: ApiRequest, turn: Turn | messages_route.Turn | None, served: Served) -> None:
        refuse_chat(served)  # (an embedding model or a reranker: serve/embeddings_route.py)
        name, model = served.name, served.service.model
        if req.infill is not None and model is not None and model.is_remote:
            raise ApiError(400, f"{name} is a remote model: Ember fills in the middle with a local model's own "
                           "fill-in-the-middle tokens.", param="suffix" if kind == "completion" else None)  # fmt: skip
        if req.params.logprobs is not None and model is not None and model.is_remote:
            raise ApiError(400, f"{name} is a remote model: Ember has no logits of it to give log-probabilities.",
                           param="logprobs")  # fmt: skip
        if req.tools is not None and model is not None and not model.is_remote:  # (a remote server checks its own)
            check_tool_schemas(req.tools)
        label = f"{self.command} {self.path} ({self.client_address[0]})"
        stream = EventStream(self._send_head, self.wfile, done=kind != "infill")
        out = InfillResponseBuilder(name) if kind == "infill" else ResponseBuilder(kind, name)
        if isinstance(turn, Turn):
            out = turn.builder(name)
            stream = ResponsesStream(self._send_head, self.wfile, out)
        elif turn is not None:
            out = turn.builder(name)
            stream = messages_route.MessagesStream(self._send_head, self.wfile, out)
        metrics = self.server.metrics
        Answerer(
            served.service,
            label,
            self._send_json,
            stream,
            self._client_gone,
            lambda figures, itl_ms: metrics.generation(name, figures, itl_ms),
        ).answer(req, out)

    def _preset_for(self, body: Any) -> Preset | None:
        """The server's own model's default preset, for a request to that model (a request naming another
        model has what it says itself)."""
        requested = body.get("model") if isinstance(body, dict) else None
        own = not requested or requested in own_names(self.server.service, self.server.config.alias)
        return self.server.preset() if own and self.server.preset is not None else None

    def _count_tokens(self) -> None:
        """POST /v1/messages/count_tokens: the prompt's tokens, as a /v1/messages request would have them."""
        config = self.server.config
        body = self._body()
        preset = self._preset_for(body)
        turn = messages_route.read_turn(body, config.allow_unknown_fields, preset, None,
                                        config.unknown_fields_advice, count=True)  # fmt: skip
        with self._serving(turn.request.model) as served:
            self._send_json(200, messages_route.count_tokens(served.service, turn))


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every connection's thread
    block_on_close = True
    allow_reuse_address = False  # server_bind sets the platform's option (bind_option)
    allow_reuse_port = False

    def __init__(self, config: ServerConfig, service: EngineService, pool: ModelPool | None = None) -> None:
        self.config = config
        self.service = service
        self.pool = pool  # the other installed models, loaded when a request names one (None: only `service`'s)
        self.on_request: RequestListener | None = None
        self.preset: Callable[[], Preset | None] | None = None
        self.responses = ResponseStore()  # the Responses API's stored responses (in memory: responses_route.py)
        self.metrics = MetricsRegistry()  # what GET /metrics tells (since this server started)
        self.connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        if ":" in config.host:
            self.address_family = socket.AF_INET6
        super().__init__((config.host, config.port), _Handler)

    def server_bind(self) -> None:
        option = getattr(socket, bind_option(sys.platform), None)
        if option is not None:
            self.socket.setsockopt(socket.SOL_SOCKET, option, 1)
        super().server_bind()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its connection is normal; anything else goes to the log, not stderr."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError | TimeoutError):
            log.exception("API connection from %s failed", client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            full = len(self.connections) >= self.config.max_connections
            if not full:
                self.connections.add(request)
        if full:  # a 503 on this (the accepting) thread, never blocking, then close
            refuse(request, self.config.max_connections)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Wake every connection thread (idle keep-alive or streaming) so it ends now."""
        with self._connections_lock:
            conns = list(self.connections)
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class ApiServer:
    """Start with `start()`, stop with `stop()` (joins the serving thread). `on_request`: told of every
    request answered, on the connection's thread (see request_log.py). `preset`: the served model's
    default preset, asked at each request (on the connection's thread): what a request does not say
    itself comes from it."""

    def __init__(
        self,
        service: EngineService,
        config: ServerConfig | None = None,
        on_request: RequestListener | None = None,
        preset: Callable[[], Preset | None] | None = None,
        pool: ModelPool | None = None,
    ) -> None:
        self.service = service
        self.pool = pool
        self.config = config or ServerConfig()
        self.on_request = on_request
        self.preset = preset
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self.config.host if self.config.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}/v1"

    def start(self) -> None:
        self.config.check()
        try:
            self._server = _Server(self.config, self.service, self.pool)
        except OSError as exc:
            raise ServeError(
                f"The API server cannot listen on {self.config.host}:{self.config.port} ({exc.strerror or exc}). "
                "Is another program using that port? Choose another one."
            ) from exc
        self._server.on_request = self.on_request
        self._server.preset = self.preset
        self._thread = threading.Thread(target=self._server.serve_forever, name="ember-api", daemon=True)
        self._thread.start()

    def stop_telling(self) -> None:
        """No listener or preset is asked any more, from now on (the window that gave them is closing while
        connections may still be answered)."""
        self.on_request = self.preset = None
        if self._server is not None:
            self._server.on_request = self._server.preset = None

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.drop_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
