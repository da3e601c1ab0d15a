"""The OpenAI-compatible wire, client side: one HTTP client per connection (httpx2, the stack the
`openai` package uses), error mapping with the server's own words, server-sent events with size
limits, the model list ("Test connection") and the server's tokenizer where it exposes one."""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpcore2
import httpx2

from ember_chat.engine.core.embeddings import Embeddings
from ember_chat.engine.core.instance import SERVER_ID_HEADER
from ember_chat.engine.core.network_words import network_failure
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.errors import (
    ImagesNotSupported,
    RemoteAuthError,
    RemoteError,
    RemoteNotFound,
    RemoteSelfConnection,
    RemoteServerError,
    RemoteStreamError,
    RemoteUnreachable,
)
from ember_chat.engine.openai.api_error import error_detail
from ember_chat.engine.openai.models_list import RemoteModelInfo, model_infos

MAX_EVENT_BYTES = 16 * 1024 * 1024  # one SSE event larger than this is a broken server, not an answer
MAX_ERROR_BODY = 64 * 1024
RETRY_STATUSES = (429, 500, 502, 503, 504)
RETRY_DELAYS_S = (1.0, 2.0, 4.0)
MAX_RETRY_AFTER_S = 30.0


@dataclass(frozen=True)
class ConnectionCheck:
    models: list[RemoteModelInfo]
    round_trip_s: float


def self_connection(endpoint: Endpoint) -> RemoteSelfConnection:
    return RemoteSelfConnection(
        f"{endpoint.name}: {endpoint.base_url} is this Ember's own API server. Its model is the one "
        "loaded here, so a message sent through it would wait for itself: load a model on this "
        "computer instead, or connect to another server."
    )


def connect_error(endpoint: Endpoint, exc: Exception) -> RemoteError:
    what = f"{exc} {exc.__cause__ or ''} {exc.__context__ or ''}"
    low = what.lower()
    where = endpoint.base_url
    if isinstance(exc, httpx2.ConnectTimeout | httpx2.PoolTimeout):
        return RemoteUnreachable(
            f"{endpoint.name}: {where} did not answer within {endpoint.connect_timeout_s:g} s. "
            "Check the address and that the server is running."
        )
    if "certificate" in low or "ssl" in low or isinstance(exc.__cause__, ssl.SSLError):
        return RemoteUnreachable(
            f"{endpoint.name}: the TLS certificate of {where} could not be verified ({what.strip()[:160]}). "
            "Use the server's real address, or for a lab server with a self-signed certificate turn off "
            "certificate checks for this connection in Models ▸ Connections."
        )
    if any(s in low for s in ("name or service not known", "nodename nor servname", "getaddrinfo", "no address")) or (
        isinstance(exc.__cause__, socket.gaierror)
    ):
        return RemoteUnreachable(
            f"{endpoint.name}: the host name in {where} could not be found (DNS). Check the address."
        )
    if "refused" in low:
        return RemoteUnreachable(
            f"{endpoint.name}: connection to {where} refused. Is the server running, and on that port?"
        )
    return RemoteUnreachable(f"{endpoint.name}: cannot reach {where}: {network_failure(exc)}.")


_IMAGE_WORDS = re.compile(r"image|multimodal|multi-modal|vision|mmproj|modalit", re.I)


def images_refused(endpoint: Endpoint, status: int, body: bytes) -> ImagesNotSupported | None:
    """A request with images that the server rejected because of them (llama.cpp's server without a
    projector: 500 "image input is not supported"; vLLM: 400 "... is not a multimodal model"): its
    reason, as an error that is not retried. Another error is left to `status_error`."""
    detail = error_detail(body)
    if status in (400, 415, 422, 500, 501) and _IMAGE_WORDS.search(detail):
        return ImagesNotSupported(f"{endpoint.name} refused the images ({status}: {detail}).")
    return None


def status_error(endpoint: Endpoint, status: int, body: bytes, headers: httpx2.Headers, what: str) -> RemoteError:
    detail = error_detail(body)
    if status in (401, 403):
        return RemoteAuthError(
            f"{endpoint.name} refused the API key ({status}: {detail}). Check the key in Models ▸ Connections."
        )
    if status == 404:
        return RemoteNotFound(f"{endpoint.name}: {what} not found (404: {detail}).")
    retry_after = None
    with contextlib.suppress(TypeError, ValueError):
        retry_after = min(MAX_RETRY_AFTER_S, max(0.0, float(headers.get("retry-after", ""))))
    if status == 429:
        return RemoteServerError(f"{endpoint.name} is busy (429: {detail}).", status, retry_after)
    if status >= 500:
        return RemoteServerError(f"{endpoint.name} failed ({status}: {detail}).", status, retry_after)
    return RemoteServerError(f"{endpoint.name} rejected the request ({status}: {detail}).", status)


class Connections(httpcore2.NetworkBackend):
    """The network backend of one client, keeping its open connections so Stop can shut them down
    from another thread — even while the request still waits for the response headers (a server
    that queues requests sends none until it starts)."""

    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner
        self._streams: weakref.WeakSet[httpcore2.NetworkStream] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False  # shut_down_all(for_good=True): later connections are shut down at once

    def _keep(self, stream: httpcore2.NetworkStream) -> httpcore2.NetworkStream:
        with self._lock:
            self._streams.add(stream)
            closed = self._closed
        if closed:
            self._shut_down(stream)
        return stream

    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        return self._keep(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        return self._keep(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)

    def shut_down_all(self, for_good: bool = False) -> None:
        """A blocked read returns at once and the server sees the disconnect; the pool reconnects
        for the next request, unless `for_good`: then a connection still being made is shut down as
        soon as it is made."""
        with self._lock:
            streams = list(self._streams)
            self._closed = self._closed or for_good
        for stream in streams:
            self._shut_down(stream)

    @staticmethod
    def _shut_down(stream: httpcore2.NetworkStream) -> None:
        sock = stream.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def make_client(endpoint: Endpoint) -> tuple[httpx2.Client, Connections]:
    headers = {"Accept": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    base = endpoint.base_url.rstrip("/") + "/"
    # trust_env off: a proxy from the environment must not see the key or the chats.
    transport = httpx2.HTTPTransport(verify=endpoint.verify_tls, trust_env=False)
    # httpx has no public hook for its connections; the pool's backend is swapped once, here
    # (httpx2 is pinned below 3; tests/engine/test_remote.py fails if this stops working).
    connections = Connections(transport._pool._network_backend)
    transport._pool._network_backend = connections
    client = httpx2.Client(
        base_url=base,
        headers=headers,
        transport=transport,
        follow_redirects=True,  # httpx drops Authorization when a redirect leaves the origin
        timeout=httpx2.Timeout(endpoint.read_timeout_s, connect=endpoint.connect_timeout_s),
        trust_env=False,
    )
    return client, connections


def get_json(client: httpx2.Client, endpoint: Endpoint, path: str, own_server_id: str | None = None) -> Any:
    """GET `path` as JSON. `own_server_id`: the engine asking (a server answering with that id is its
    own API server: RemoteSelfConnection)."""
    try:
        response = client.get(path)
    except httpx2.TransportError as exc:
        raise _transport_error(endpoint, exc) from exc
    if own_server_id is not None and response.headers.get(SERVER_ID_HEADER) == own_server_id:
        raise self_connection(endpoint)
    return _json_answer(endpoint, path, response)


def post_json(client: httpx2.Client, endpoint: Endpoint, path: str, body: dict[str, Any]) -> Any:
    """POST `body` to `path` and read the JSON answer (errors as `get_json`'s)."""
    try:
        response = client.post(path, json=body)
    except httpx2.TransportError as exc:
        raise _transport_error(endpoint, exc) from exc
    return _json_answer(endpoint, path, response)


def _transport_error(endpoint: Endpoint, exc: httpx2.TransportError) -> RemoteError:
    if isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout | httpx2.PoolTimeout):
        return connect_error(endpoint, exc)
    return RemoteUnreachable(f"{endpoint.name}: {endpoint.base_url} stopped answering ({exc}).")


def _json_answer(endpoint: Endpoint, path: str, response: httpx2.Response) -> Any:
    if response.status_code != 200:
        raise status_error(endpoint, response.status_code, response.content[:MAX_ERROR_BODY], response.headers, path)
    try:
        return response.json()
    except ValueError as exc:
        raise RemoteStreamError(
            f"{endpoint.name}: {endpoint.base_url} answered {path} with something that is not JSON. "
            "Is this the server's OpenAI-compatible base URL (usually ending in /v1)?"
        ) from exc


def read_embeddings(endpoint: Endpoint, answer: Any, n_inputs: int) -> Embeddings:
    """An OpenAI-shaped /embeddings answer's vectors (in input order, as the server sent them) and
    prompt tokens; RemoteStreamError for anything else."""
    data = answer.get("data") if isinstance(answer, dict) else None
    rows = sorted(data, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0) if isinstance(data, list) else []
    vectors = [row.get("embedding") for row in rows if isinstance(row, dict)]
    if len(vectors) != n_inputs or not all(
        isinstance(v, list) and v and all(isinstance(x, int | float) for x in v) for v in vectors
    ):
        raise RemoteStreamError(f"{endpoint.name} answered /embeddings without one vector of numbers per input.")
    usage = answer.get("usage") or {}
    tokens = usage.get("prompt_tokens", 0) if isinstance(usage, dict) else 0
    return Embeddings([[float(x) for x in v] for v in vectors], tokens if isinstance(tokens, int) else 0, "remote")


def require_model(endpoint: Endpoint, models: list[RemoteModelInfo], model_id: str) -> RemoteModelInfo | None:
    """The server's entry for `model_id`; RemoteNotFound when it lists models and not this one (a
    server that lists none may still serve it)."""
    match = next((m for m in models if m.id == model_id), None)
    if match is None and models:
        names = ", ".join(m.id for m in models[:8])
        raise RemoteNotFound(f"{endpoint.name} does not serve a model called {model_id!r}. It serves: {names}.")
    return match


def check_remote_model(ref: RemoteModelRef, own_server_id: str | None = None) -> None:
    """Before anything is unloaded for it: the server answers, is not the API server of the engine
    `own_server_id`, and serves the model. Raises RemoteError."""
    require_model(ref.endpoint, check_connection(ref.endpoint, own_server_id).models, ref.model_id)


def check_connection(endpoint: Endpoint, own_server_id: str | None = None) -> ConnectionCheck:
    """`GET /models`: the server's models and the round-trip time ("Test connection")."""
    return ConnectionTest(own_server_id).run(endpoint)


class ConnectionTest:
    """One "Test connection" that another thread can stop at once: `cancel()` shuts its connection
    down, so a test waiting on a server that never answers ends now, not after the read timeout
    (a cancelled test raises RemoteUnreachable)."""

    def __init__(self, own_server_id: str | None = None) -> None:
        self._own_server_id = own_server_id
        self._lock = threading.Lock()
        self._connections: Connections | None = None
        self._cancelled = False

    def run(self, endpoint: Endpoint) -> ConnectionCheck:
        client, connections = make_client(endpoint)
        with self._lock:
            self._connections = connections
            cancelled = self._cancelled
        if cancelled:
            connections.shut_down_all(for_good=True)
        with client:
            t0 = time.perf_counter()
            data = get_json(client, endpoint, "models", self._own_server_id)
            rtt = time.perf_counter() - t0
        return ConnectionCheck(model_infos(data), rtt)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            connections = self._connections
        if connections is not None:
            connections.shut_down_all(for_good=True)


def sse_data(chunks: Iterator[bytes]) -> Iterator[str]:
    """The `data` of each server-sent event; `:` comment lines (keep-alive pings) are skipped."""
    buf = b""
    data: list[str] = []
    for chunk in chunks:
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                if len(buf) > MAX_EVENT_BYTES:
                    raise RemoteStreamError(f"the server sent an event larger than {MAX_EVENT_BYTES >> 20} MB")
                break
            line, buf = buf[:nl].rstrip(b"\r"), buf[nl + 1 :]
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
                continue
            if line.startswith(b":"):
                continue
            field, _, value = line.partition(b":")
            if field == b"data":
                data.append(value.removeprefix(b" ").decode("utf-8", errors="replace"))
                if sum(len(d) for d in data) > MAX_EVENT_BYTES:
                    raise RemoteStreamError(f"the server sent an event larger than {MAX_EVENT_BYTES >> 20} MB")
    if data:
        yield "\n".join(data)


# The servers' own tokenizers (for token counts when a stream reports none), relative to the server
# root: llama.cpp's server, vLLM and SGLang `/tokenize`; llama-cpp-python `/extras/tokenize`.
TOKENIZE_PATHS = ("tokenize", "extras/tokenize")


def _server_root(endpoint: Endpoint) -> str:
    base = endpoint.base_url.rstrip("/")
    return (base.removesuffix("/v1") or base) + "/"


def _token_count(client: httpx2.Client, url: str, model: str, text: str) -> int | None:
    body = {"model": model, "content": text, "prompt": text, "input": text, "add_special": False,
            "add_special_tokens": False}  # fmt: skip
    try:
        response = client.post(url, json=body, timeout=5.0)
        data = response.json() if response.status_code == 200 else None
    except (httpx2.HTTPError, ValueError):
        return None
    if isinstance(data, dict):
        if isinstance(data.get("count"), int):
            return int(data["count"])
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
    return None


class ServerTokenizer:
    """Counts tokens with the server's tokenizer; finds which endpoint the server has once."""

    def __init__(self, client: httpx2.Client, endpoint: Endpoint, model: str) -> None:
        self.client = client
        self.model = model
        self.root = _server_root(endpoint)
        self._url: str | None = None
        self._offset = 0  # tokens a server adds to any text (a BOS llama-cpp-python always adds)
        self._searched = False

    def count(self, text: str) -> int | None:
        if not self._searched:
            self._searched = True
            for path in TOKENIZE_PATHS:
                url = self.root + path
                empty = _token_count(self.client, url, self.model, "")
                if empty is not None:
                    self._url, self._offset = url, empty
                    break
        if self._url is None:
            return None
        n = _token_count(self.client, self._url, self.model, text)
        return None if n is None else max(0, n - self._offset)
