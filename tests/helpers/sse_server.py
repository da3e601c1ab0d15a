"""A fault-injecting OpenAI-compatible server for the remote backend's tests (standard library only).

`FakeOpenAI` is an HTTP/1.1 `ThreadingHTTPServer` on 127.0.0.1 (port 0, optionally HTTPS) that serves
`GET /v1/models`, `POST /v1/chat/completions` and `POST /v1/completions`. Each test scripts it:

- `fail(status, body, ...)`: answer the next N requests with an error (JSON, FastAPI or plain text,
  optional headers such as Retry-After);
- `stream(frames, ...)`: the raw SSE frames of the next answers (chunked transfer encoding), with
  pauses before given frames, a pace between frames, a cut (socket closed, no terminating chunk) or
  a stall (nothing more until teardown or the client leaves) after K frames;
  (`stall_before_headers`: before even the status line);
- `redirect_to`: answer every request with a 307 to another origin;
- `stall_models`: `GET /v1/models` answers nothing (a server that hangs while being connected to).

Every request is recorded (headers, JSON body). A client that goes away mid-stream (a failed write,
or end-of-file seen while the server is pausing) sets `disconnected`. Every wait is on the
`closing` event, which teardown sets, so `stop()` returns at once and joins every thread.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GENERATE_PATHS = ("/v1/chat/completions", "/v1/completions")
MODELS_PATHS = ("/v1/models",)
DONE = "data: [DONE]\n\n"
PING = ": ping\n\n"


def sse(obj: object) -> str:
    """One SSE frame carrying `obj` as JSON."""
    return f"data: {json.dumps(obj)}\n\n"


def chunk(
    content: str | None = None,
    *,
    role: str | None = None,
    reasoning_content: str | None = None,
    reasoning: str | None = None,
    finish: str | None = None,
    **extra: Any,
) -> str:
    """A chat.completion.chunk frame with one choice; only the delta fields given are set."""
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if reasoning_content is not None:
        delta["reasoning_content"] = reasoning_content
    if reasoning is not None:
        delta["reasoning"] = reasoning
    obj: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return sse(obj)


def text_chunk(text: str, *, finish: str | None = None) -> str:
    """A text_completion frame (`/v1/completions`)."""
    return sse({"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]})


def usage_chunk(prompt: int, completion: int, cached: int | None = None) -> str:
    """The final usage-only chunk (`choices: []`) sent with `stream_options.include_usage`."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return sse({"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [], "usage": usage})


@dataclass
class Failure:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str]
    paths: tuple[str, ...]
    times: int


@dataclass
class Stream:
    frames: list[str | bytes]
    pauses: dict[int, float] = field(default_factory=dict)  # seconds to wait before frame i
    interval_s: float = 0.0  # wait before every frame after the first
    cut_after: int | None = None  # close the socket after this many frames (no terminating chunk)
    stall_after: int | None = None  # after this many frames send nothing more (until teardown)
    stall_before_headers: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # the JSON body, or None


DEFAULT_MODELS: list[dict[str, Any]] = [
    {"id": "test-model", "object": "model", "owned_by": "tests", "max_model_len": 8192},
]


class FakeOpenAI:
    """Start with `with FakeOpenAI() as server:` (or `start()` / `stop()`); `server.base_url` ends in /v1."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.models: list[dict[str, Any]] = [dict(m) for m in DEFAULT_MODELS]
        self.redirect_to: str | None = None  # another origin, e.g. "http://127.0.0.1:1234"
        self.stall_models = False  # GET /models answers nothing until teardown or the client leaves
        self.requests: list[Recorded] = []
        self.disconnected = threading.Event()  # a client went away mid-stream
        self.request_arrived = threading.Event()  # set on every request (clear it to wait for the next)
        self.closing = threading.Event()  # teardown: every wait ends
        self.handshake_failures = 0
        self._failures: list[Failure] = []
        self._stream = Stream([chunk("Hello", role="assistant"), chunk(" world"), chunk(finish="stop"), DONE])
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----- scripting (from the test thread, before the request)
    def fail(
        self,
        status: int,
        body: object = "",
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        paths: tuple[str, ...] = GENERATE_PATHS,
    ) -> None:
        """Answer the next `times` requests to `paths` with `status` and `body` (a dict or list is
        sent as JSON, a str as plain text)."""
        if isinstance(body, dict | list):
            raw, ctype = json.dumps(body).encode(), "application/json"
        elif isinstance(body, bytes):
            raw, ctype = body, "application/octet-stream"
        else:
            raw, ctype = str(body).encode(), "text/plain; charset=utf-8"
        with self._lock:
            self._failures.append(Failure(status, raw, ctype, dict(headers or {}), paths, times))

    def stream(
        self,
        frames: list[str | bytes],
        *,
        pauses: dict[int, float] | None = None,
        interval_s: float = 0.0,
        cut_after: int | None = None,
        stall_after: int | None = None,
        stall_before_headers: bool = False,
    ) -> None:
        """What every following generation request streams: `frames` as written (raw SSE text; bytes
        to split a frame anywhere, even inside a UTF-8 character), one HTTP chunk each."""
        with self._lock:
            self._stream = Stream(
                list(frames), dict(pauses or {}), interval_s, cut_after, stall_after, stall_before_headers
            )

    def received(self, path: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]

    def generate_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path in GENERATE_PATHS]

    # ----- lifecycle
    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    @property
    def origin(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    def start(self) -> FakeOpenAI:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        httpd.daemon_threads = False  # server_close() joins the handler threads
        httpd.block_on_close = True
        if self.tls is not None:
            # The handshake happens in the handler thread, never in the accept loop.
            httpd.socket = self.tls.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=f"fake-openai-{self.port}"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """End every wait, stop accepting, unblock idle keep-alive connections, join every thread."""
        self.closing.set()
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        with self._lock:
            open_now = list(self._open)
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        httpd.server_close()  # joins the handler threads
        assert self._thread is not None
        self._thread.join()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----- internals
    def _next_failure(self, path: str) -> Failure | None:
        with self._lock:
            for f in self._failures:
                if path in f.paths and f.times > 0:
                    f.times -= 1
                    if f.times == 0:
                        self._failures.remove(f)
                    return f
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                with fake._lock:
                    fake._open.add(self.connection)

            def finish(self) -> None:
                with fake._lock:
                    fake._open.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def handle(self) -> None:
                if isinstance(self.connection, ssl.SSLSocket):
                    try:
                        self.connection.do_handshake()
                    except (ssl.SSLError, OSError):
                        with fake._lock:
                            fake.handshake_failures += 1
                        return
                with contextlib.suppress(ConnectionError, ssl.SSLError):
                    super().handle()

            # --- routing
            def do_GET(self) -> None:
                self._route()

            def do_POST(self) -> None:
                self._route()

            def _route(self) -> None:
                path = self.path.split("?", 1)[0]
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with fake._lock:
                    fake.requests.append(
                        Recorded(self.command, path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                fake.request_arrived.set()
                if fake.redirect_to is not None:
                    self._send(307, b"", "text/plain", {"Location": fake.redirect_to + self.path})
                    return
                known = MODELS_PATHS if self.command == "GET" else GENERATE_PATHS
                if path not in known:
                    self._send(404, json.dumps({"detail": "Not Found"}).encode(), "application/json")
                    return
                failure = fake._next_failure(path)
                if failure is not None:
                    self._send(failure.status, failure.body, failure.content_type, failure.headers)
                elif path in MODELS_PATHS:
                    if fake.stall_models:
                        self._pause(None)
                        return
                    data = json.dumps({"object": "list", "data": fake.models}).encode()
                    self._send(200, data, "application/json")
                else:
                    with fake._lock:
                        script = fake._stream
                    self._stream(script)

            def _send(self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            # --- streaming
            def _stream(self, script: Stream) -> None:
                if script.stall_before_headers:
                    self._pause(None)
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if not self._flush():
                    return
                for i, frame in enumerate(script.frames):
                    if script.cut_after is not None and i == script.cut_after:
                        self._cut()
                        return
                    if script.stall_after is not None and i == script.stall_after:
                        self._pause(None)
                        self.close_connection = True
                        return
                    wait = script.pauses.get(i, script.interval_s if i else 0.0)
                    if wait and not self._pause(wait):
                        return
                    data = frame.encode() if isinstance(frame, str) else frame
                    if data and not self._write_chunk(data):  # (an empty chunk would end the body)
                        return
                if script.cut_after is not None and script.cut_after >= len(script.frames):
                    self._cut()
                    return
                if script.stall_after is not None and script.stall_after >= len(script.frames):
                    self._pause(None)
                    self.close_connection = True
                    return
                self._write_chunk(b"")  # the terminating chunk: a clean end

            def _write_chunk(self, data: bytes) -> bool:
                try:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                    self._gone()
                    return False
                return self._flush()

            def _flush(self) -> bool:
                try:
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                    self._gone()
                    return False
                return True

            def _gone(self) -> None:
                self.close_connection = True
                fake.disconnected.set()

            def _cut(self) -> None:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)

            def _pause(self, seconds: float | None) -> bool:
                """Wait `seconds` (None: until teardown), watching for the client leaving.
                False when it left (or teardown came first)."""
                deadline = None if seconds is None else time.monotonic() + seconds
                while deadline is None or (left := deadline - time.monotonic()) > 0:
                    if fake.closing.wait(0.02 if deadline is None else min(0.02, left)):
                        return False
                    if self._client_left():
                        self._gone()
                        return False
                return True

            def _client_left(self) -> bool:
                """End of file (or a reset) on the connection: the request was read in full, so
                anything readable now means the client closed it."""
                sock = self.connection
                if isinstance(sock, ssl.SSLSocket):
                    return False  # no MSG_PEEK on TLS; a failed write tells instead
                try:
                    readable, _, _ = select.select([sock], [], [], 0)
                    return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
                except (ConnectionError, OSError, ValueError):
                    return True

        return Handler


@contextlib.contextmanager
def running(tls: ssl.SSLContext | None = None) -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(tls)
    server.start()
    try:
        yield server
    finally:
        server.stop()
