"""The remote backend: a model served by an OpenAI-compatible server (vLLM, SGLang, llama.cpp's
`llama-server`, Ollama's /v1, LM Studio, llama-cpp-python's server, Ember's own), behind the same
`InferenceBackend` protocol and event stream as the local runtime, with metrics measured here.

What servers differ in, and how it is handled (see shared/notes/openai-wire.md):
- a role-only first chunk, chunks with no content, several tokens in one chunk: TTFT is the first
  chunk with answer text (content or reasoning), and tokens are counted from the server's usage, then
  llama.cpp's `timings`, then per-chunk usage; otherwise one token per chunk, marked "estimated";
- usage only in a final chunk with no choices, or never; `reasoning_content` / `reasoning`;
- errors as JSON (`{"error": {...}}`, `{"detail": ...}`) or plain text, before or after the 200.
Faults: 429/5xx are retried with backoff only before the first token (never a duplicated answer); a
stream cut or stalled after tokens arrived keeps them (reason "interrupted"); `request_stop` closes
the HTTP stream at once, so the server sees the disconnect.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpcore2
import httpx2

from engine.errors import EmberError, InvalidParameter
from engine.inference.backend import Endpoint, ModelDescription, ModelRef, RemoteModelRef
from engine.inference.events import Event, Finished, PromptReady, Retrying, Token
from engine.inference.messages import ChatMessage
from engine.inference.metrics import MetricsRecorder, RunContext
from engine.inference.params import SamplingParams

MAX_EVENT_BYTES = 16 * 1024 * 1024  # one SSE event larger than this is a broken server, not an answer
MAX_ERROR_BODY = 64 * 1024
RETRY_STATUSES = (429, 500, 502, 503, 504)
RETRY_DELAYS_S = (1.0, 2.0, 4.0)
MAX_RETRY_AFTER_S = 30.0


class RemoteError(EmberError):
    """A remote server could not be used: the message says what happened and what to do."""


class RemoteUnreachable(RemoteError):
    pass


class RemoteAuthError(RemoteError):
    pass


class RemoteNotFound(RemoteError):
    pass


class RemoteServerError(RemoteError):
    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class RemoteStreamError(RemoteError):
    """The stream broke or carried something that is not an OpenAI-compatible event."""


@dataclass(frozen=True)
class RemoteModelInfo:
    id: str
    n_ctx: int | None
    owned_by: str | None


@dataclass(frozen=True)
class ConnectionCheck:
    models: list[RemoteModelInfo]
    round_trip_s: float


def _error_text(body: bytes) -> str:
    """The server's own words from an error body: OpenAI JSON, FastAPI `detail`, or plain text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300] or "no details"
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err.get("msg") or json.dumps(err)
        if isinstance(err, list) and err and isinstance(err[0], dict):
            err = err[0].get("msg", json.dumps(err[0]))
        if err:
            return str(err)[:300]
    return text[:300]


def _connect_error(endpoint: Endpoint, exc: Exception) -> RemoteError:
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
    return RemoteUnreachable(f"{endpoint.name}: cannot reach {where} ({what.strip()[:160]}).")


def _status_error(endpoint: Endpoint, status: int, body: bytes, headers: httpx2.Headers, what: str) -> RemoteError:
    detail = _error_text(body)
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


class _Connections(httpcore2.NetworkBackend):
    """The network backend of one client, keeping its open connections so Stop can shut them down
    from another thread — even while the request still waits for the response headers (a server
    that queues requests sends none until it starts)."""

    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner
        self._streams: weakref.WeakSet[httpcore2.NetworkStream] = weakref.WeakSet()
        self._lock = threading.Lock()

    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        stream = self._inner.connect_tcp(*args, **kwargs)
        with self._lock:
            self._streams.add(stream)
        return stream

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        stream = self._inner.connect_unix_socket(*args, **kwargs)
        with self._lock:
            self._streams.add(stream)
        return stream

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)

    def shut_down_all(self) -> None:
        """A blocked read returns at once and the server sees the disconnect; the pool reconnects
        for the next request."""
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            sock = stream.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def make_client(endpoint: Endpoint) -> tuple[httpx2.Client, _Connections]:
    headers = {"Accept": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    base = endpoint.base_url.rstrip("/") + "/"
    # trust_env off: a proxy from the environment must not see the key or the chats.
    transport = httpx2.HTTPTransport(verify=endpoint.verify_tls, trust_env=False)
    # httpx has no public hook for its connections; the pool's backend is swapped once, here
    # (httpx2 is pinned below 3; tests/test_remote.py fails if this stops working).
    connections = _Connections(transport._pool._network_backend)
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


def _get_json(client: httpx2.Client, endpoint: Endpoint, path: str) -> Any:
    try:
        response = client.get(path)
    except httpx2.TransportError as exc:
        if isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout | httpx2.PoolTimeout):
            raise _connect_error(endpoint, exc) from exc
        raise RemoteUnreachable(f"{endpoint.name}: {endpoint.base_url} stopped answering ({exc}).") from exc
    if response.status_code != 200:
        raise _status_error(endpoint, response.status_code, response.content[:MAX_ERROR_BODY], response.headers, path)
    try:
        return response.json()
    except ValueError as exc:
        raise RemoteStreamError(
            f"{endpoint.name}: {endpoint.base_url} answered {path} with something that is not JSON. "
            "Is this the server's OpenAI-compatible base URL (usually ending in /v1)?"
        ) from exc


def _model_infos(data: Any) -> list[RemoteModelInfo]:
    items = data.get("data") if isinstance(data, dict) else data
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        meta = item.get("meta") if isinstance(item.get("meta"), dict) else {}
        n_ctx = item.get("max_model_len") or item.get("context_length") or meta.get("n_ctx") or meta.get("n_ctx_train")
        out.append(RemoteModelInfo(item["id"], n_ctx if isinstance(n_ctx, int) else None, item.get("owned_by")))
    return out


def check_connection(endpoint: Endpoint) -> ConnectionCheck:
    """`GET /models`: the server's models and the round-trip time ("Test connection")."""
    client, _ = make_client(endpoint)
    with client:
        t0 = time.perf_counter()
        data = _get_json(client, endpoint, "models")
        rtt = time.perf_counter() - t0
    return ConnectionCheck(_model_infos(data), rtt)


def _sse_data(chunks: Iterator[bytes]) -> Iterator[str]:
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


@dataclass
class _Chunk:
    t_ns: int
    text: str
    count: int | None  # tokens, when the server said (per-chunk usage)


class RemoteBackend:
    """One connection's model. Used by one thread; `request_stop()` may be called from any thread."""

    def __init__(self, sleep: Callable[[float], None] | None = None) -> None:
        self._ref: RemoteModelRef | None = None
        self._client: httpx2.Client | None = None
        self._connections: _Connections | None = None
        self._description: ModelDescription | None = None
        self._stop = threading.Event()
        self._sleep = sleep

    @property
    def loaded(self) -> bool:
        return self._client is not None

    @property
    def description(self) -> ModelDescription | None:
        return self._description

    def load(
        self,
        ref: ModelRef,
        progress: Callable[[float], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelDescription:
        """Check the server answers and serves this model (`GET /models`)."""
        if not isinstance(ref, RemoteModelRef):
            raise InvalidParameter("The remote backend needs a connection and a model id.")
        self.close()
        endpoint = ref.endpoint
        client, connections = make_client(endpoint)
        try:
            models = _model_infos(_get_json(client, endpoint, "models"))
        except BaseException:
            client.close()
            raise
        if cancel is not None and cancel.is_set():
            client.close()
            from engine.errors import LoadCancelled

            raise LoadCancelled(f"Connecting to {endpoint.name} was cancelled.")
        match = next((m for m in models if m.id == ref.model_id), None)
        if match is None and models:
            client.close()
            names = ", ".join(m.id for m in models[:8])
            raise RemoteNotFound(f"{endpoint.name} does not serve a model called {ref.model_id!r}. It serves: {names}.")
        if progress is not None:
            progress(1.0)
        self._client = client
        self._connections = connections
        self._ref = ref
        self._description = ModelDescription(
            name=ref.model_id, backend="remote", n_ctx=match.n_ctx if match else None, source=endpoint.name
        )
        return self._description

    def close(self) -> None:
        self.request_stop()
        client, self._client = self._client, None
        self._connections = None
        self._ref = None
        self._description = None
        if client is not None:
            client.close()

    def request_stop(self) -> None:
        """Stop now: close the HTTP stream (a blocked read returns at once; the server sees the
        disconnect)."""
        self._stop.set()
        connections = self._connections
        if connections is not None:
            connections.shut_down_all()

    # ----- generation
    def chat(
        self, messages: list[ChatMessage], params: SamplingParams, template_override: str | None = None
    ) -> Iterator[Event]:
        continuing = bool(messages) and messages[-1].role == "assistant"
        if not messages or messages[-1].role != ("assistant" if continuing else "user"):
            raise InvalidParameter("a chat request must end with a user message.")
        body: dict[str, Any] = {"messages": [{"role": m.role, "content": m.content} for m in messages]}
        if continuing:
            # Continue the partial answer (vLLM/SGLang's flags; llama.cpp's server prefills a final
            # assistant message by itself).
            body.update({"continue_final_message": True, "add_generation_prompt": False})
        return self._generate("chat/completions", body, params, chat=True)

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]:
        return self._generate("completions", {"prompt": prompt}, params, chat=False)

    def _require(self) -> tuple[httpx2.Client, RemoteModelRef, ModelDescription]:
        if self._client is None or self._ref is None or self._description is None:
            from engine.errors import NoModelLoaded

            raise NoModelLoaded("No model is loaded. Pick a model first.")
        return self._client, self._ref, self._description

    @staticmethod
    def _body(model: str, base: dict[str, Any], params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            **base,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            # Not in OpenAI's API, understood by vLLM, SGLang, llama.cpp, LM Studio, Ollama:
            "top_k": params.top_k,
            "min_p": params.min_p,
            # Always sent: a server's own default (llama-cpp-python: 1.1) would change the answer.
            "repeat_penalty": params.repeat_penalty,  # llama.cpp, LM Studio, Ollama
            "repetition_penalty": params.repeat_penalty,  # vLLM, SGLang
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        return body

    def _generate(self, path: str, base: dict[str, Any], params: SamplingParams, *, chat: bool) -> Iterator[Event]:
        client, ref, desc = self._require()
        endpoint = ref.endpoint
        self._stop.clear()
        rec = MetricsRecorder(RunContext(desc.name, None, "remote", None, None, desc.n_ctx or 0, endpoint.name))
        body = self._body(ref.model_id, base, params)
        attempts = len(RETRY_DELAYS_S) + 1
        for attempt in range(1, attempts + 1):
            try:
                yield from self._stream(client, endpoint, path, body, rec, chat)
                return
            except RemoteError as exc:
                if self._stop.is_set():  # stopped before the answer began: no error, no retry
                    yield Finished("cancelled", "", rec.finish("cancelled"))
                    return
                if not isinstance(exc, RemoteServerError) or exc.status not in RETRY_STATUSES or attempt == attempts:
                    raise
                delay = exc.retry_after if exc.retry_after is not None else RETRY_DELAYS_S[attempt - 1]
                yield Retrying(attempt, attempts - 1, delay, str(exc))
                if self._wait(delay):
                    yield Finished("cancelled", "", rec.finish("cancelled"))
                    return

    def _wait(self, delay: float) -> bool:
        """Sleep before a retry; True when the user stopped meanwhile."""
        if self._sleep is not None:
            self._sleep(delay)
            return self._stop.is_set()
        return self._stop.wait(delay)

    def _open(self, client: httpx2.Client, endpoint: Endpoint, path: str, body: dict[str, Any]) -> httpx2.Response:
        try:
            request = client.build_request("POST", path, json=body, headers={"Accept": "text/event-stream"})
            response = client.send(request, stream=True)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
            raise _connect_error(endpoint, exc) from exc
        except httpx2.ReadTimeout as exc:
            raise RemoteServerError(
                f"{endpoint.name} accepted the request but sent nothing for {endpoint.read_timeout_s:g} s.", 504
            ) from exc
        except httpx2.TransportError as exc:
            raise RemoteUnreachable(f"{endpoint.name}: the connection failed ({exc}).") from exc
        if response.status_code != 200:
            try:
                raw = b""
                for part in response.iter_bytes():
                    raw += part
                    if len(raw) >= MAX_ERROR_BODY:
                        break
            except httpx2.HTTPError:
                raw = b""
            finally:
                response.close()
            what = f"the model {body['model']!r} or the endpoint /{path}"
            raise _status_error(endpoint, response.status_code, raw[:MAX_ERROR_BODY], response.headers, what)
        return response

    def _stream(
        self,
        client: httpx2.Client,
        endpoint: Endpoint,
        path: str,
        body: dict[str, Any],
        rec: MetricsRecorder,
        chat: bool,
    ) -> Iterator[Event]:
        rec.t_start_ns = time.perf_counter_ns()
        response = self._open(client, endpoint, path, body)
        if self._stop.is_set():  # stopped while the request was being sent
            self.request_stop()
        chunks: list[_Chunk] = []
        texts: list[str] = []
        usage: dict[str, Any] = {}
        timings: dict[str, Any] = {}
        reason: str | None = None
        error: str | None = None
        thinking = False
        prompt_sent = False

        def prompt_ready() -> PromptReady:
            rec.prefill_started(0, 0, rec.t_start_ns)
            return PromptReady(0, 0, rec.context.n_ctx, rec.t_start_ns, rec.t_start_ns)

        try:
            for data in _sse_data(response.iter_raw()):
                t_ns = time.perf_counter_ns()
                if data.strip() == "[DONE]":
                    break
                try:
                    obj = json.loads(data)
                except ValueError:
                    raise RemoteStreamError(f"the server sent a malformed event: {data[:80]!r}") from None
                if not isinstance(obj, dict):
                    raise RemoteStreamError(f"the server sent an unexpected event: {data[:80]!r}")
                if obj.get("error"):
                    err = obj["error"]
                    msg = err.get("message", json.dumps(err)) if isinstance(err, dict) else str(err)
                    if not chunks:
                        code = err.get("code") if isinstance(err, dict) else None
                        status = code if isinstance(code, int) and code >= 400 else 500
                        raise RemoteServerError(f"{endpoint.name} failed: {msg[:300]}", status)
                    raise RemoteStreamError(f"the server reported an error mid-answer: {msg[:300]}")
                if isinstance(obj.get("usage"), dict):
                    usage = obj["usage"]
                if isinstance(obj.get("timings"), dict):
                    timings = obj["timings"]
                choices = obj.get("choices") or []
                choice = choices[0] if choices and isinstance(choices[0], dict) else {}
                piece = ""
                if chat:
                    delta = choice.get("delta") or {}
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
                    content = delta.get("content") or ""
                    if reasoning:
                        piece += ("" if thinking else "<think>\n") + reasoning
                        thinking = True
                    if content:
                        if thinking:
                            piece += "\n</think>\n\n"
                            thinking = False
                        piece += content
                else:
                    piece = choice.get("text") or ""
                if choice.get("finish_reason"):
                    reason = str(choice["finish_reason"])
                if piece:
                    if not prompt_sent:
                        prompt_sent = True
                        yield prompt_ready()
                    per_chunk = None
                    if choices and isinstance(obj.get("usage"), dict):  # vLLM continuous usage stats
                        done = int(obj["usage"].get("completion_tokens") or 0)
                        per_chunk = max(1, done - sum(c.count or 1 for c in chunks))
                    chunks.append(_Chunk(t_ns, piece, per_chunk))
                    texts.append(piece)
                    rec.token(t_ns, per_chunk or 1)
                    yield Token(piece, len(rec.token_times_ns) - 1, t_ns, per_chunk or 1)
                    if self._stop.is_set():
                        break
        except RemoteServerError:
            raise
        except RemoteStreamError as exc:
            error = f"{endpoint.name}: {exc}"
        except httpx2.ReadTimeout:
            error = f"{endpoint.name} stopped sending for {endpoint.read_timeout_s:g} s (stalled)."
        except (httpx2.TransportError, httpx2.StreamError, OSError) as exc:
            if not self._stop.is_set():
                error = f"{endpoint.name}: the connection broke mid-answer ({type(exc).__name__})."
        finally:
            with contextlib.suppress(Exception):
                response.close()
        if thinking:
            texts.append("\n</think>\n")
        if self._stop.is_set():
            final_reason = "cancelled"
        elif error is not None:
            if not chunks:
                raise RemoteStreamError(error)
            final_reason = "interrupted"
        elif reason is None:
            final_reason = "interrupted" if chunks else "stop"
            if chunks:
                error = f"{endpoint.name}: the stream ended before the answer was complete."
        else:
            final_reason = {"eos": "stop", "abort": "cancelled"}.get(reason, reason)
        if not prompt_sent:
            yield prompt_ready()
        yield Finished(
            final_reason, "".join(texts), self._final_metrics(rec, chunks, usage, timings, final_reason), error
        )

    @staticmethod
    def _final_metrics(
        rec: MetricsRecorder, chunks: list[_Chunk], usage: dict[str, Any], timings: dict[str, Any], reason: str
    ) -> Any:
        """Count tokens from the server's own figures where it gave them, spread over the chunks in
        proportion to their text; otherwise one per chunk, marked estimated."""
        total = usage.get("completion_tokens") or timings.get("predicted_n")
        token_count = "exact" if isinstance(total, int) and total > 0 else "estimated"
        final = MetricsRecorder(rec.context, t_start_ns=rec.t_start_ns, t_prefill_start_ns=rec.t_start_ns)
        if token_count == "exact" and chunks:
            assert isinstance(total, int)
            total = max(total, len(chunks))
            sizes = [max(1, len(c.text)) for c in chunks]
            whole = sum(sizes)
            given = 0
            for i, (c, _size) in enumerate(zip(chunks, sizes, strict=True)):
                # each chunk at least one token; the last takes the remainder
                share = total - given - (len(chunks) - i - 1) if i == len(chunks) - 1 else None
                if share is None:
                    share = max(1, round(total * sum(sizes[: i + 1]) / whole) - given)
                    share = min(share, total - given - (len(chunks) - i - 1))
                final.token(c.t_ns, share)
                given += share
        else:
            for c in chunks:
                final.token(c.t_ns, c.count or 1)
        details = usage.get("prompt_tokens_details") or {}
        prompt = usage.get("prompt_tokens")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if prompt is None and timings:
            prompt = (timings.get("prompt_n") or 0) + (timings.get("cache_n") or 0)
            cached = timings.get("cache_n")
        final.prefill_started(int(prompt or 0), int(cached or 0), rec.t_start_ns)
        perf = None
        if timings:
            perf = (
                timings.get("prompt_ms"),
                timings.get("prompt_n"),
                timings.get("predicted_ms"),
                timings.get("predicted_n"),
            )
        server = {"usage": usage, "timings": timings} if usage or timings else None
        return final.finish(reason, perf, token_count=token_count, server_timings=server)
