"""The remote backend: a model served by an OpenAI-compatible server (vLLM, SGLang, llama.cpp's
`llama-server`, Ollama's /v1, LM Studio, llama-cpp-python's server, Ember's own), behind the same
`InferenceBackend` protocol and event stream as the local runtime, with metrics measured here.

What servers differ in, and how it is handled (see shared/notes/openai-wire.md):
- a role-only first chunk, chunks with no content, several tokens in one chunk: TTFT is the first
  chunk with answer text (content, reasoning or a tool call), and tokens are counted from the server's
  usage, then llama.cpp's `timings`, then per-chunk usage; otherwise one per chunk, marked "estimated";
- usage only in a final chunk with no choices, or never; `reasoning_content` / `reasoning`;
- errors as JSON (`{"error": {...}}`, `{"detail": ...}`) or plain text, before or after the 200;
- tool calls streamed in pieces, each server its own way (remote/tools.py).
Faults: 429/5xx are retried with backoff only before the first token (never a duplicated answer); a
stream cut or stalled after tokens arrived keeps them (reason "interrupted"); `request_stop` closes
the HTTP stream at once, so the server sees the disconnect.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx2

from ember_chat.engine.core.embeddings import EmbeddingInput, Embeddings
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.network_words import network_failure
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import Endpoint, ModelRef, RemoteModelRef
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.errors import (
    InvalidParameter,
    LoadCancelled,
    NoModelLoaded,
    RemoteError,
    RemoteNotFound,
    RemoteServerError,
    RemoteStreamError,
    RemoteUnreachable,
)
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import Event, Finished, PromptReady, Retrying, Token, ToolCallParsed
from ember_chat.engine.inference.grammar.json_check import answer_check
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext
from ember_chat.engine.inference.remote.metrics import StreamChunk, count, final_metrics
from ember_chat.engine.inference.remote.tools import StreamedCalls, tools_refused
from ember_chat.engine.inference.remote.wire import (
    MAX_ERROR_BODY,
    RETRY_DELAYS_S,
    RETRY_STATUSES,
    ConnectionCheck,
    Connections,
    ServerTokenizer,
    check_connection,
    connect_error,
    get_json,
    images_refused,
    make_client,
    post_json,
    read_embeddings,
    require_model,
    sse_data,
    status_error,
)
from ember_chat.engine.openai.models_list import RemoteModelInfo, model_infos
from ember_chat.engine.openai.remote_request import request_body, wire_messages
from ember_chat.engine.openai.responses import read_chunk

__all__ = [  # the wire's names that users of the remote backend need (its errors are in engine/errors.py)
    "RETRY_DELAYS_S",
    "ConnectionCheck",
    "RemoteBackend",
    "RemoteModelInfo",
    "check_connection",
]


class RemoteBackend:
    """One connection's model. Used by one thread; `request_stop()` may be called from any thread."""

    def __init__(self, sleep: Callable[[float], None] | None = None) -> None:
        self._ref: RemoteModelRef | None = None
        self._client: httpx2.Client | None = None
        self._connections: Connections | None = None
        self._tokenizer: ServerTokenizer | None = None
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
        self._connections = connections  # a stop while the server is being asked shuts the connection
        try:
            models = model_infos(get_json(client, endpoint, "models"))
        except BaseException as exc:
            self._connections = None
            client.close()
            if cancel is not None and cancel.is_set():
                raise LoadCancelled(f"Connecting to {endpoint.name} was cancelled.") from exc
            raise
        if cancel is not None and cancel.is_set():
            self._connections = None
            client.close()
            raise LoadCancelled(f"Connecting to {endpoint.name} was cancelled.")
        try:
            match = require_model(endpoint, models, ref.model_id)
        except RemoteNotFound:
            self._connections = None
            client.close()
            raise
        if progress is not None:
            progress(1.0)
        self._client = client
        self._connections = connections
        self._tokenizer = ServerTokenizer(client, endpoint, ref.model_id)
        self._ref = ref
        self._description = ModelDescription(
            name=ref.model_id, backend="remote", n_ctx=match.n_ctx if match else None, source=endpoint.name
        )
        return self._description

    def close(self) -> None:
        self.request_stop()
        client, self._client = self._client, None
        self._connections = None
        self._tokenizer = None
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
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        template_override: str | None = None,
        tools: ToolRequest | None = None,
    ) -> Iterator[Event]:
        continuing = bool(messages) and messages[-1].role == "assistant"
        if not messages or messages[-1].role not in ("user", "tool", "assistant"):
            raise InvalidParameter("a chat request must end with a user message.")
        body: dict[str, Any] = {"messages": wire_messages(messages, continuing)}
        if params.thinking is not None:  # the server's template switch (vLLM, SGLang, llama.cpp)
            body["chat_template_kwargs"] = {"enable_thinking": params.thinking}
        if continuing:
            # Continue the partial answer (vLLM/SGLang's flags; llama.cpp's server prefills a final
            # assistant message by itself).
            body.update({"continue_final_message": True, "add_generation_prompt": False})
        return self._generate("chat/completions", body, params, chat=True, tools=tools)

    def complete(self, prompt: str, params: SamplingParams) -> Iterator[Event]:
        return self._generate("completions", {"prompt": prompt}, params, chat=False)

    def embed(self, inputs: list[EmbeddingInput], stopped: Callable[[], bool] = lambda: False) -> Embeddings:
        """The server's own embeddings of these inputs: OpenAI's /embeddings body for this model (floats),
        its vectors as it sends them (RemoteError as a request's)."""
        client, ref, _ = self._require()
        texts = [item if isinstance(item, str) else list(item) for item in inputs]
        body = {"model": ref.model_id, "input": texts, "encoding_format": "float"}
        return read_embeddings(ref.endpoint, post_json(client, ref.endpoint, "embeddings", body), len(inputs))

    def count_tokens(self, text: str) -> int | None:
        """Tokens in `text` by the server's own tokenizer, or None when the server has no endpoint for it."""
        return self._tokenizer.count(text) if self._tokenizer is not None else None

    def _require(self) -> tuple[httpx2.Client, RemoteModelRef, ModelDescription]:
        if self._client is None or self._ref is None or self._description is None:
            raise NoModelLoaded("No model is loaded. Pick a model first.")
        return self._client, self._ref, self._description

    def _generate(
        self, path: str, base: dict[str, Any], params: SamplingParams, *, chat: bool, tools: ToolRequest | None = None
    ) -> Iterator[Event]:
        client, ref, desc = self._require()
        endpoint = ref.endpoint
        self._stop.clear()
        rec = MetricsRecorder(RunContext(desc.name, None, "remote", None, None, desc.n_ctx or 0, endpoint.name))
        body = request_body(ref.model_id, base, params, tools)
        attempts = len(RETRY_DELAYS_S) + 1
        for attempt in range(1, attempts + 1):
            try:
                yield from self._stream(client, endpoint, path, body, rec, chat, tools)
                return
            except RemoteError as exc:
                if self._stop.is_set():  # stopped before the answer began: no error, no retry
                    yield Finished(StopReason.CANCELLED, "", rec.finish(StopReason.CANCELLED))
                    return
                if not isinstance(exc, RemoteServerError) or exc.status not in RETRY_STATUSES or attempt == attempts:
                    raise
                delay = exc.retry_after if exc.retry_after is not None else RETRY_DELAYS_S[attempt - 1]
                yield Retrying(attempt, attempts - 1, delay, str(exc))
                if self._wait(delay):
                    yield Finished(StopReason.CANCELLED, "", rec.finish(StopReason.CANCELLED))
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
            raise connect_error(endpoint, exc) from exc
        except httpx2.ReadTimeout as exc:
            raise RemoteServerError(
                f"{endpoint.name} accepted the request but sent nothing for {endpoint.read_timeout_s:g} s.", 504
            ) from exc
        except httpx2.TransportError as exc:
            raise RemoteUnreachable(f"{endpoint.name}: {network_failure(exc)}.") from exc
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
            refused = images_refused(endpoint, response.status_code, raw[:MAX_ERROR_BODY]) if _images(body) else None
            if refused is None and "tools" in body:
                refused = tools_refused(endpoint, response.status_code, raw[:MAX_ERROR_BODY])
            if refused is not None:
                raise refused
            what = f"the model {body['model']!r} or the endpoint /{path}"
            raise status_error(endpoint, response.status_code, raw[:MAX_ERROR_BODY], response.headers, what)
        return response

    def _stream(
        self,
        client: httpx2.Client,
        endpoint: Endpoint,
        path: str,
        body: dict[str, Any],
        rec: MetricsRecorder,
        chat: bool,
        tools: ToolRequest | None = None,
    ) -> Iterator[Event]:
        rec.t_start_ns = time.perf_counter_ns()
        response = self._open(client, endpoint, path, body)
        if self._stop.is_set():  # stopped while the request was being sent
            self.request_stop()
        chunks: list[StreamChunk] = []
        texts: list[str] = []  # what is shown (reasoning between <think> markers)
        answer: list[str] = []  # what the model generated, as the server's tokenizer would count it
        calls = StreamedCalls(tools) if tools is not None and tools.tools else None
        called: list[str] = []  # the calls' text (names, arguments), counted as generated too
        usage: dict[str, Any] = {}
        timings: dict[str, Any] = {}
        reason: str | None = None
        error: str | None = None
        thinking = False
        prompt_sent = False
        counted = 0  # tokens in `chunks` so far

        def prompt_ready() -> PromptReady:
            rec.prefill_started(0, 0, rec.t_start_ns)
            return PromptReady(0, 0, rec.context.n_ctx, rec.t_start_ns, rec.t_start_ns)

        try:
            for data in sse_data(response.iter_raw()):
                t_ns = time.perf_counter_ns()
                if data.strip() == "[DONE]":
                    break
                try:
                    obj = json.loads(data)
                except ValueError:
                    raise RemoteStreamError(f"the server sent a malformed event: {data[:80]!r}") from None
                if not isinstance(obj, dict):
                    raise RemoteStreamError(f"the server sent an unexpected event: {data[:80]!r}")
                chunk = read_chunk(obj, chat)
                if chunk.error is not None:
                    msg, code = chunk.error
                    if not chunks:
                        status = code if isinstance(code, int) and code >= 400 else 500
                        raise RemoteServerError(f"{endpoint.name} failed: {msg[:300]}", status)
                    raise RemoteStreamError(f"the server reported an error mid-answer: {msg[:300]}")
                if chunk.usage is not None:
                    usage = chunk.usage
                if chunk.timings is not None:
                    timings = chunk.timings
                piece = fragment = ""
                chunk_thinking = False
                if chat:
                    reasoning, content = chunk.reasoning, chunk.text
                    answer += (reasoning, content)
                    chunk_thinking = bool(reasoning) and not content
                    if reasoning:
                        piece += ("" if thinking else "<think>\n") + reasoning
                        thinking = True
                    if content:
                        if thinking:
                            piece += "\n</think>\n\n"
                            thinking = False
                        piece += content
                    if calls is not None and chunk.tool_calls:
                        fragment = calls.feed(chunk.tool_calls)
                        called.append(fragment)
                else:
                    piece = chunk.text
                    answer.append(piece)
                if chunk.finish_reason:
                    reason = chunk.finish_reason
                if piece or fragment:  # (a call's fragment is a token too, though not answer text)
                    if not prompt_sent:
                        prompt_sent = True
                        yield prompt_ready()
                    per_chunk = None
                    if chunk.choices and chunk.usage is not None:  # vLLM continuous usage stats
                        done = count(chunk.usage.get("completion_tokens"))
                        per_chunk = None if done is None else max(1, done - counted)
                    chunks.append(StreamChunk(t_ns, piece or fragment, per_chunk, chunk_thinking))
                    counted += per_chunk or 1
                    texts.append(piece)
                    rec.token(t_ns, per_chunk or 1, thinking=chunk_thinking)
                    yield Token(piece, len(rec.token_times_ns) - 1, t_ns, per_chunk or 1, thinking=chunk_thinking)
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
                error = f"{endpoint.name}: the connection broke mid-answer: {network_failure(exc)}."
        finally:
            t_end_ns = time.perf_counter_ns()
            with contextlib.suppress(Exception):
                response.close()
        if thinking:
            texts.append("\n</think>\n")
        if self._stop.is_set():
            final_reason = StopReason.CANCELLED
        elif error is not None:
            if not chunks:
                raise RemoteStreamError(error)
            final_reason = StopReason.INTERRUPTED
        elif reason is None:
            final_reason = StopReason.INTERRUPTED if chunks else StopReason.STOP
            if chunks:
                error = f"{endpoint.name}: the stream ended before the answer was complete."
        else:
            final_reason = {"eos": StopReason.STOP, "abort": StopReason.CANCELLED}.get(reason, reason)
        parsed = calls.parsed() if calls and final_reason not in (StopReason.CANCELLED, StopReason.INTERRUPTED) else []
        if parsed:  # (whatever the server said: Ollama ends its calls with "stop")
            final_reason = StopReason.TOOL_CALLS
        elif final_reason == StopReason.TOOL_CALLS:  # no call came with it (or none was asked for)
            final_reason = StopReason.STOP
        if not prompt_sent:
            yield prompt_ready()
        counter = self._tokenizer.count if self._tokenizer is not None else None
        generated = "".join(answer + called)
        metrics = final_metrics(rec, chunks, usage, timings, final_reason, generated, t_end_ns, counter)
        metrics = replace(metrics, json_check=answer_check(body.get("response_format"), "".join(answer)))
        for index, call in enumerate(parsed):
            yield ToolCallParsed(index, call)
        yield Finished(final_reason, "".join(texts), metrics, error, tool_calls=tuple(parsed))


def _images(body: dict[str, Any]) -> bool:
    return any(isinstance(m.get("content"), list) for m in body.get("messages", ()))
