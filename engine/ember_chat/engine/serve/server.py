"""Ember's OpenAI-compatible API server over whichever model the engine service has loaded (and, with
a model pool, any installed model a request names).

Starlette on uvicorn (its h11 protocol, `http_protocol.py`), in a thread of its own with its event
loop. Generation blocks on the engine service's queue (shared fairly with the window), so each
request's handler runs in a worker thread (at most one per open connection) and writes through the
loop (`exchange.Call`). Guards: the connection bound, the client read timeout and malformed requests
are the protocol's; who may call (the `Host` header on loopback against DNS rebinding, browser
origins, the API key) and CORS are a middleware before any route (guard_middleware.py); each POST route reads
its body under the size limit and a strict Content-Length; JSON validated with clear 400s; no stack
traces in responses. Bound to 127.0.0.1 by default (another interface needs an API key). A client
that disconnects cancels its generation within one token; a generation that does not finish cleanly
is an error, never `finish_reason: "stop"`. Every request answered is reported to the server's
request listener (`request_log.py`), refusals included, and counted in /metrics. A generation is
answered by an `Answerer` (`answering.py`), streamed through an `EventStream` (`event_stream.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from email.utils import formatdate
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from uvicorn.server import ServerState

from ember_chat.engine.attachments.isolated import ReadingStopped
from ember_chat.engine.core.large_buffers import release_free_memory, return_large_buffers
from ember_chat.engine.errors import ServeError
from ember_chat.engine.inference.pool.pool import ModelPool
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.responses import ResponseBuilder
from ember_chat.engine.projects.turn import ProjectKnowledge, with_instructions
from ember_chat.engine.serve import messages_route, tokens
from ember_chat.engine.serve.answering import Answerer
from ember_chat.engine.serve.api_request import ApiRequest, parse_request
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.embeddings_route import embeddings, refuse_chat
from ember_chat.engine.serve.event_stream import EventStream
from ember_chat.engine.serve.exchange import Call, Message, Receive, Send, error_body
from ember_chat.engine.serve.file_reading import Reading
from ember_chat.engine.serve.guard_middleware import CALL, GuardMiddleware
from ember_chat.engine.serve.guards import bind_option
from ember_chat.engine.serve.http_protocol import GuardedH11Protocol
from ember_chat.engine.serve.infill_request import InfillResponseBuilder, parse_infill
from ember_chat.engine.serve.metrics_export import CONTENT_TYPE, EngineView, MetricsRegistry, kv_cells
from ember_chat.engine.serve.model_routing import Served, own_names, serving, take_ttl
from ember_chat.engine.serve.models_api import load_model, models_list, models_table, unload_model
from ember_chat.engine.serve.projects_option import ServedProjects
from ember_chat.engine.serve.request_log import RequestListener
from ember_chat.engine.serve.rerank_route import rerank
from ember_chat.engine.serve.responses_route import (
    PREFIX,
    ResponsesStream,
    ResponseStore,
    Turn,
    read_turn,
    stored_route,
)
from ember_chat.engine.serve.sink import ClientGone
from ember_chat.engine.serve.tool_checks import check_tool_schemas
from ember_chat.engine.serve.transcriptions_route import SpeechModels, transcribe
from ember_chat.engine.storage.presets import Preset

__all__ = ["ApiServer", "bind_option"]

log = logging.getLogger(__name__)

# (method, path) → the handler's method that answers it; every POST route reads its body first
ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/health"): "health",
    ("GET", "/v1/models"): "models",
    ("GET", "/metrics"): "metrics",  # Prometheus's text (serve/metrics_export.py)
    ("GET", "/api/models"): "models_table",  # serve/models_api.py
    ("POST", "/api/models/load"): "load_model",
    ("POST", "/api/models/unload"): "unload_model",
    ("POST", "/v1/chat/completions"): "chat",
    ("POST", "/v1/completions"): "completion",
    ("POST", "/infill"): "infill",  # llama-server's (serve/infill_request.py)
    ("POST", "/v1/embeddings"): "embeddings",  # serve/embeddings_route.py
    ("POST", "/v1/rerank"): "rerank",  # serve/rerank_route.py; llama-server's names for it too:
    ("POST", "/rerank"): "rerank",
    ("POST", "/v1/reranking"): "rerank",
    ("POST", "/v1/responses"): "responses",  # serve/responses_route.py
    ("GET", PREFIX + "{response_id}"): "stored_response",
    ("DELETE", PREFIX + "{response_id}"): "stored_response",
    ("POST", "/v1/messages"): "messages",  # Anthropic's (serve/messages_route.py)
    ("POST", "/v1/audio/transcriptions"): "transcriptions",  # serve/transcriptions_route.py
    ("POST", "/v1/messages/count_tokens"): "count_tokens",
    ("POST", "/tokenize"): "tokenize",
    ("POST", "/detokenize"): "detokenize",
}
_SERVED_PATHS = frozenset(path for _, path in ROUTES if not path.startswith(PREFIX))
LARGE_BODY_BYTES = 1 << 20  # a request body this large: the memory its reading took is given back after it


class _Shared:
    """What every request of one server reads: its setup, engine, model pool, stores and listeners."""

    def __init__(self, config: ServerConfig, service: EngineService, pool: ModelPool | None, port: int) -> None:
        self.config = config
        self.service = service
        self.pool = pool  # the other installed models, loaded when a request names one (None: only `service`'s)
        self.port = port
        self.on_request: RequestListener | None = None
        self.preset: Callable[[], Preset | None] | None = None
        self.projects: ServedProjects | None = None  # the projects a request's `ember.project` may name
        self.responses = ResponseStore()  # the Responses API's stored responses (in memory: responses_route.py)
        self.metrics = MetricsRegistry()  # what GET /metrics tells (since this server started)
        self.speech = SpeechModels()  # speech models, each loaded at its first transcription
        self.stopping = threading.Event()  # the server is stopping: every generation ends
        # handler threads: one per open connection at most (a generation holds one while it streams)
        self.limiter: anyio.CapacityLimiter | None = None  # (made on the event loop)

    def served_name(self) -> str:
        """The model's name here: the server's alias, else the name it was loaded by."""
        model = self.service.model
        return self.config.alias or self.service.model_alias or (model.name if model else "")

    def model_label(self) -> str:
        """The `model` label of what this server does now: the served model's name, "" with none loaded."""
        return self.served_name() if self.service.model is not None else ""


class _Handler:
    """Answers one request, on a worker thread (generation blocks on the engine's queue)."""

    def __init__(self, shared: _Shared, call: Call) -> None:
        self.shared = shared
        self.call = call

    # ----- endpoints
    def health(self) -> None:
        service = self.shared.service
        running, queued = service.queue_state().count("api")
        self.call.send_json(200, {"status": "ok", "model": self.shared.served_name() if service.model else None,
                                  "running": running, "queued": queued})  # fmt: skip

    def models(self) -> None:
        shared = self.shared
        self.call.send_json(200, models_list(shared.service, shared.pool, shared.config.alias))

    def models_table(self) -> None:
        shared = self.shared
        self.call.send_json(200, models_table(shared.service, shared.pool, shared.config.alias))

    def load_model(self) -> None:
        shared = self.shared
        relaxed, advice = shared.config.allow_unknown_fields, shared.config.unknown_fields_advice
        self.call.send_json(200, load_model(shared.service, shared.pool, shared.config.alias, self.call.body(),
                                            relaxed, advice))  # fmt: skip

    def unload_model(self) -> None:
        relaxed, advice = self.shared.config.allow_unknown_fields, self.shared.config.unknown_fields_advice
        self.call.send_json(200, unload_model(self.shared.pool, self.call.body(), relaxed, advice))

    def metrics(self) -> None:
        shared = self.shared
        pool = shared.pool
        evictions = dict(pool.evictions_by_model) if pool is not None else {}
        label, service = shared.model_label(), shared.service
        engine = EngineView(label, service.queue_state(), self._loads(), evictions, kv_cells(label, service, pool))
        data = shared.metrics.render(engine).encode()
        self.call.send_head(200, {"Content-Type": CONTENT_TYPE, "Content-Length": str(len(data))})
        self.call.write(data)
        self.call.end()

    def chat(self) -> None:
        self._generate("chat")

    def completion(self) -> None:
        self._generate("completion")

    def infill(self) -> None:
        self._generate("infill")

    def responses(self) -> None:
        self._generate("responses")

    def messages(self) -> None:
        self._generate("messages")

    def embeddings(self) -> None:
        config = self.shared.config
        body = embeddings(self.call.body(), self._serving, config.allow_unknown_fields, config.unknown_fields_advice)
        self.call.send_json(200, body)

    def rerank(self) -> None:
        config = self.shared.config
        body = rerank(self.call.body(), self._serving, config.allow_unknown_fields, config.unknown_fields_advice)
        self.call.send_json(200, body)

    def transcriptions(self) -> None:
        """POST /v1/audio/transcriptions: a multipart upload, not JSON (serve/transcriptions_route.py)."""
        call, config = self.call, self.shared.config
        assert call.raw is not None
        content_type = call.headers.get("content-type") or ""
        name, reply = transcribe(call.raw, content_type, self.shared.speech, call.client_gone,
                                 config.allow_unknown_fields, config.unknown_fields_advice)  # fmt: skip
        call.model = name
        call.send_head(200, {"Content-Type": reply.content_type, "Content-Length": str(len(reply.body))})
        call.write(reply.body)
        call.end()

    def tokenize(self) -> None:
        config = self.shared.config
        relaxed, advice = config.allow_unknown_fields, config.unknown_fields_advice
        self.call.send_json(200, tokens.tokenize(self.shared.service, self.call.body(), relaxed, advice))

    def detokenize(self) -> None:
        config = self.shared.config
        relaxed, advice = config.allow_unknown_fields, config.unknown_fields_advice
        self.call.send_json(200, tokens.detokenize(self.shared.service, self.call.body(), relaxed, advice))

    def stored_response(self) -> None:
        """GET or DELETE a stored response (serve/responses_route.py)."""
        path = self.call.path.split("?", 1)[0]
        stored_route(self.call.method, path, self.shared.responses, self.call.send_json)()

    def count_tokens(self) -> None:
        """POST /v1/messages/count_tokens: the prompt's tokens, as a /v1/messages request would have them."""
        config = self.shared.config
        body = self.call.body()
        preset = self._preset_for(body)
        turn = messages_route.read_turn(body, config.allow_unknown_fields, preset, None,
                                        config.unknown_fields_advice, count=True)  # fmt: skip
        with self._serving(turn.request.model) as served:
            refuse_chat(served)  # (an embedding model or a reranker has no messages to count)
            self.call.send_json(200, messages_route.count_tokens(served.service, turn))

    # ----- generation
    def _loads(self) -> dict[str, int]:
        """The engine's model loads by each model's name here (the served model's is the server's alias)."""
        shared = self.shared
        service, loads = shared.service, {}
        for name, count in service.load_counts().items():
            shown = shared.served_name() if service.model is not None and name == service.model_alias else name
            loads[shown] = loads.get(shown, 0) + count
        if shared.pool is not None:  # (the models loaded for requests, each in an engine of its own)
            for name, count in shared.pool.loads_by_model.items():
                loads[name] = loads.get(name, 0) + count
        return loads

    @contextlib.contextmanager
    def _serving(self, requested: str | None, ttl_s: float | None = None) -> Iterator[Served]:
        """The engine serving the model a request names (serve/model_routing.py), held for the request;
        /metrics counts the request under that model."""
        shared = self.shared
        with serving(shared.service, shared.pool, shared.config.alias, requested, ttl_s) as served:
            self.call.model = served.name
            yield served

    def _generate(self, kind: str) -> None:
        config = self.shared.config
        body = self.call.body()
        ttl = take_ttl(body)  # (how long a model loaded for it stays: not a field of the request itself)
        preset = self._preset_for(body)
        # its files are read in child processes that end when the client hangs up or the server stops
        reading = Reading(config.attachment_limits, self.call.client_gone, config.file_turn_wait_s)
        turn: Turn | messages_route.Turn | None = None
        if kind == "messages":
            turn = messages_route.read_turn(body, config.allow_unknown_fields, preset, reading,
                                            config.unknown_fields_advice, speculative=config.speculative)  # fmt: skip
            req = turn.request
        elif kind == "responses":
            turn = read_turn(body, self.shared.responses, config.allow_unknown_fields, preset, reading,
                             config.unknown_fields_advice, speculative=config.speculative)  # fmt: skip
            req = turn.request
        elif kind == "infill":
            req = parse_infill(body, config.allow_unknown_fields, preset, config.unknown_fields_advice,
                               speculative=config.speculative)  # fmt: skip
        else:
            req = parse_request(kind, body, config.allow_unknown_fields, preset, reading, config.unknown_fields_advice,
                                speculative=config.speculative)  # fmt: skip
        with self._serving(req.model, ttl) as served:
            self._answer(kind, req, turn, served)

    def _answer(self, kind: str, req: ApiRequest, turn: Turn | messages_route.Turn | None, served: Served) -> None:
        refuse_chat(served)  # (an embedding model or a reranker: serve/embeddings_route.py)
        name, model, call = served.name, served.service.model, self.call
        if req.infill is not None and model is not None and model.is_remote:
            raise ApiError(400, f"{name} is a remote model: Ember fills in the middle with a local model's own "
                           "fill-in-the-middle tokens.", param="suffix" if kind == "completion" else None)  # fmt: skip
        if req.params.logprobs is not None and model is not None and model.is_remote:
            raise ApiError(400, f"{name} is a remote model: Ember has no logits of it to give log-probabilities.",
                           param="logprobs")  # fmt: skip
        if req.tools is not None and model is not None and not model.is_remote:  # (a remote server checks its own)
            check_tool_schemas(req.tools)
        label = f"{call.method} {call.path} ({call.client})"
        stream = EventStream(call.send_head, call, done=kind != "infill")
        out = InfillResponseBuilder(name) if kind == "infill" else ResponseBuilder(kind, name)
        if isinstance(turn, Turn):
            out = turn.builder(name)
            stream = ResponsesStream(call.send_head, call, out)
        elif turn is not None:
            out = turn.builder(name)
            stream = messages_route.MessagesStream(call.send_head, call, out)
        metrics = self.shared.metrics
        with contextlib.ExitStack() as stack:
            knowledge = None
            if req.project is not None:
                knowledge = self._project(req.project)
                stack.callback(knowledge.close)
                req = replace(req, messages=with_instructions(req.messages or [], knowledge.project.instructions))
            Answerer(
                served.service,
                label,
                call.send_json,
                stream,
                call.client_gone,
                lambda figures, itl_ms: metrics.generation(name, figures, itl_ms),
            ).answer(req, out, knowledge)

    def _project(self, name: str) -> ProjectKnowledge:
        projects = self.shared.projects
        if projects is None:
            raise ApiError(400, f"This server answers in no project, so not in “{name}”.", param="ember.project")
        return projects.open(name)

    def _preset_for(self, body: Any) -> Preset | None:
        """The server's own model's default preset, for a request to that model (a request naming another
        model has what it says itself)."""
        requested = body.get("model") if isinstance(body, dict) else None
        shared = self.shared
        own = not requested or requested in own_names(shared.service, shared.config.alias)
        preset = shared.preset
        return preset() if own and preset is not None else None


class _Endpoint:
    """One route as an ASGI app: its body read (a POST's), then its handler run on a worker thread
    while the loop watches for the client leaving."""

    def __init__(self, shared: _Shared, handler: str, reads_body: bool) -> None:
        self._shared = shared
        self._handler = handler
        self._reads_body = reads_body

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        call: Call = scope[CALL]
        shared = self._shared
        if self._reads_body:  # (an ApiError here is answered by the guard middleware)
            await call.read_body(receive, shared.config.max_body_bytes, shared.config.timeout_s)
        if shared.limiter is None:
            shared.limiter = anyio.CapacityLimiter(shared.config.max_connections)
        async with anyio.create_task_group() as group:
            group.start_soon(call.watch, receive)
            await anyio.to_thread.run_sync(self._run, call, limiter=shared.limiter)
            group.cancel_scope.cancel()
        if call.raw is not None and len(call.raw) >= LARGE_BODY_BYTES:
            call.raw = None
            await anyio.to_thread.run_sync(release_free_memory, limiter=shared.limiter)

    def _run(self, call: Call) -> None:
        try:
            getattr(_Handler(self._shared, call), self._handler)()
        except ApiError as err:
            call.send_error(err)
        except (ClientGone, ReadingStopped):
            pass  # gone (or the server stopping): a stream begun is cut, never ended as if whole
        except Exception:
            log.exception("API request failed")
            if not call.record.status:
                call.send_error(ApiError(500, "Internal server error; see Ember's log.", "server_error"))


async def _unrouted(request: Request, exc: Exception) -> Response:
    """The router's 404 and 405, as the API's errors."""
    assert isinstance(exc, HTTPException)
    method, path = request.method, request.url.path
    if exc.status_code == 405:
        err = ApiError(405, f"{method} is not allowed on {path}.")
    else:
        err = ApiError(404, f"Unknown endpoint {path}.", code="not_found")
    return Response(json.dumps(error_body(err, path)), err.status, err.headers, "application/json")


def _app(shared: _Shared) -> Starlette:
    methods: dict[str, list[str]] = {}
    for method, path in ROUTES:
        methods.setdefault(path, []).append(method)
    routes = [
        Route(path, _Endpoint(shared, ROUTES[(verbs[0], path)], "POST" in verbs), methods=verbs)
        for path, verbs in methods.items()
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(GuardMiddleware, shared=shared, served_paths=_SERVED_PATHS)],
        exception_handlers={HTTPException: _unrouted},
    )


async def _date_headers(state: ServerState, config: uvicorn.Config) -> None:
    """What uvicorn's main loop does and this server's does not run: the headers every response carries
    (ours: `Server: Ember`), with the `Date` HTTP/1.1 asks for, once a second."""
    while True:
        date = formatdate(time.time(), usegmt=True).encode()
        state.default_headers = [(b"date", date), *config.encoded_headers]
        await asyncio.sleep(1)


def _listen(config: ServerConfig) -> socket.socket:
    """The listening socket, bound before the server starts (a port in use is the caller's error)."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        option = getattr(socket, bind_option(sys.platform), None)
        if option is not None:
            sock.setsockopt(socket.SOL_SOCKET, option, 1)
        sock.bind((config.host, config.port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class ApiServer:
    """Start with `start()`, stop with `stop()` (joins the serving thread). `on_request`: told of every
    request answered, on the server's event loop (see request_log.py). `preset`: the served model's
    default preset, asked at each request (on its handler thread): what a request does not say itself
    comes from it. `projects`: those a chat, Messages or Responses request's `"ember": {"project": NAME}` may
    answer in (None: a request naming one is a 400)."""

    def __init__(
        self,
        service: EngineService,
        config: ServerConfig | None = None,
        on_request: RequestListener | None = None,
        preset: Callable[[], Preset | None] | None = None,
        pool: ModelPool | None = None,
        projects: ServedProjects | None = None,
    ) -> None:
        self.service = service
        self.pool = pool
        self.projects = projects
        self.config = config or ServerConfig()
        self.on_request = on_request
        self.preset = preset
        self._shared: _Shared | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    @property
    def running(self) -> bool:
        return self._shared is not None

    @property
    def port(self) -> int:
        assert self._shared is not None
        return self._shared.port

    @property
    def url(self) -> str:
        host = self.config.host if self.config.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}/v1"

    def speech_models(self) -> list[str]:
        """The speech models this server has loaded for /v1/audio/transcriptions (each once)."""
        return self._shared.speech.loaded() if self._shared is not None else []

    def start(self) -> None:
        self.config.check()
        return_large_buffers()  # a client's large bodies must not grow the process for good
        try:
            sock = _listen(self.config)
        except OSError as exc:
            raise ServeError(
                f"The API server cannot listen on {self.config.host}:{self.config.port} ({exc.strerror or exc}). "
                "Is another program using that port? Choose another one."
            ) from exc
        shared = _Shared(self.config, self.service, self.pool, int(sock.getsockname()[1]))
        shared.on_request, shared.preset, shared.projects = self.on_request, self.preset, self.projects
        config = self.config
        server = uvicorn.Server(
            uvicorn.Config(
                _app(shared),
                # the connection bound and the client read timeout are the protocol's (http_protocol.py)
                http=functools.partial(GuardedH11Protocol, max_connections=config.max_connections),
                timeout_keep_alive=config.timeout_s,  # type: ignore[arg-type]
                ws="none",
                lifespan="off",
                interface="asgi3",
                proxy_headers=False,  # (a client's X-Forwarded-For is not its address)
                server_header=False,
                headers=[("Server", "Ember")],
                log_config=None,
                log_level=logging.WARNING,
                access_log=False,  # (every request goes to the request listener, and to /metrics)
            )
        )
        ready = threading.Event()
        self._shared = shared
        self._thread = threading.Thread(target=self._serve, args=(server, sock, ready), name="ember-api", daemon=True)
        self._thread.start()
        ready.wait()

    def _serve(self, server: uvicorn.Server, sock: socket.socket, ready: threading.Event) -> None:
        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            try:
                server.config.load()
                server.lifespan = server.config.lifespan_class(server.config)  # ("off": it does nothing)
                await server.startup(sockets=[sock])
            finally:
                ready.set()
            state = server.server_state
            dating = asyncio.create_task(_date_headers(state, server.config))
            await self._stop.wait()
            dating.cancel()
            # (uvicorn's own shutdown, without its pause): listeners closed; idle connections closed and
            # busy ones ended at once (a stream is cut, as a client sees a server that stops); their
            # handlers end within a token (`stopping`)
            for listener in server.servers:
                listener.close()
            for connection in list(state.connections):
                if connection.cycle is None or connection.cycle.response_complete:
                    connection.shutdown()
                else:
                    connection.transport.abort()
            while state.tasks:
                await asyncio.wait(set(state.tasks))
            for listener in server.servers:
                await listener.wait_closed()

        try:
            asyncio.run(main())
        finally:
            sock.close()
            ready.set()

    def stop_telling(self) -> None:
        """No listener or preset is asked any more, from now on (the window that gave them is closing while
        connections may still be answered)."""
        self.on_request = self.preset = None
        if self._shared is not None:
            self._shared.on_request = self._shared.preset = None

    def stop(self) -> None:
        shared, self._shared = self._shared, None
        if shared is None:
            return
        shared.stopping.set()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # (its loop already ended: a failed start)
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._loop = self._stop = None
        if self.projects is not None:
            self.projects.close()  # (its projects' indexes and models: no request is answered any more)
