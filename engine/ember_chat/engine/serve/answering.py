"""How the API server answers a generation request: one sample, or `n` sampled one after another
with distinct seeds (choices[i], streamed with their index), each waiting in the engine's queue
like any request.

Before the 200 an error has its own status (the first sample's prompt is checked before anything is
sent); after it, in a stream, an error is a `data: {"error": ...}` event. The server's request
handler builds an `Answerer` for each generation request with what it needs of the connection."""

from __future__ import annotations

import contextlib
import queue
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ember_chat.engine.attachments.store import temporary_store
from ember_chat.engine.core.logprobs import TokenLogprob
from ember_chat.engine.errors import QueueFull
from ember_chat.engine.inference.prompt.knowledge import TurnKnowledge, last_question
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.responses import ResponseBuilder, Sample
from ember_chat.engine.openai.tool_wire import ChoiceCalls, call_deltas
from ember_chat.engine.serve.api_request import ApiRequest, unfinished_error
from ember_chat.engine.serve.event_stream import EventStream
from ember_chat.engine.serve.file_reading import attach
from ember_chat.engine.serve.sink import ClientGone, Observer, QueueSink, too_long

POLL_S = 0.05  # how often a waiting handler checks whether its client is still there


def sample_seeds(seed: int | None, n: int) -> list[int | None]:
    """The seed of each sample: the request's for one sample; for several, distinct ones (from the
    request's seed, so a seeded request is reproducible)."""
    if n == 1:
        return [seed]
    base = seed if seed is not None else random.randrange(2**31 - n)
    return [(base + i) % 2**31 for i in range(n)]


SendJson = Callable[[int, dict[str, Any]], None]  # a whole JSON response with this status


class Answerer:
    """Answers one generation request through the engine service's queue. `label`: the request as the
    engine's queue and metrics name it; `send_json`: the response when it is not streamed; `stream`:
    the event stream when it is; `client_gone`: whether the client has hung up (its generation is
    then cancelled); `observe`: told of each sample's metrics and inter-token gaps (ms) once the
    engine has run it, on the engine thread (the server's /metrics)."""

    def __init__(
        self,
        service: EngineService,
        label: str,
        send_json: SendJson,
        stream: EventStream,
        client_gone: Callable[[], bool],
        observe: Observer | None = None,
    ) -> None:
        self._service = service
        self._observe = observe
        self._label = label
        self._send_json = send_json
        self._stream = stream
        self._client_gone = client_gone

    def answer(self, req: ApiRequest, out: ResponseBuilder, knowledge: TurnKnowledge | None = None) -> None:
        """`knowledge`: a project's, for a request that named one (`ember.project`); each answer's sources
        say whether it used them (its `ember`: from its whole text, the question the last user message)."""
        service = self._service
        with contextlib.ExitStack() as stack:
            messages, store = req.messages, None
            if req.files and messages is not None:  # the request's `file` parts: kept for this request only
                store = stack.enter_context(temporary_store("ember-api-"))
                messages = attach(messages, req.files, store)
            samples: list[Sample] = []
            question = last_question(messages) if knowledge is not None and messages is not None else ""
            for index, seed in enumerate(sample_seeds(req.params.seed, req.n)):
                sink = QueueSink(out, trim_history=req.trim_history, observe=self._observe, question=question)
                request = GenerationRequest(
                    params=req.params if req.n == 1 else replace(req.params, seed=seed),
                    sink=sink,
                    messages=messages,
                    prompt=req.prompt,
                    infill=req.infill,
                    client="api",
                    label=self._label + (f" [{index + 1}/{req.n}]" if req.n > 1 else ""),
                    attachment_store=store,
                    tools=req.tools,
                    knowledge=knowledge,
                    trim_history=req.trim_history,
                    batch_s=0.0,
                    snapshot_s=float("inf"),
                )
                sink.cancel = request.cancelled
                try:
                    rid = service.submit(request)
                except QueueFull as exc:
                    error = ApiError(429, str(exc), "rate_limit_error", code="queue_full")
                    if not self._stream.opened:
                        raise error from exc
                    self._stream.end(error)
                    return
                try:
                    sample = self._sample(req, out, sink, index)
                except BaseException:
                    service.cancel(rid)  # the client went away (or writing failed): stop its generation now
                    raise
                if sample is None:  # an error event ended the stream
                    return
                samples.append(sample)
            if not req.stream:
                self._send_json(200, out.response(samples))
                return
            if req.include_usage:
                self._stream.event(out.usage_chunk([m for _, _, m, _, _ in samples]))
            self._stream.end(None)

    def _sample(self, req: ApiRequest, out: ResponseBuilder, sink: QueueSink, index: int) -> Sample | None:
        """One sample: its text, reason and metrics; None when an error event ended the stream. An
        error before the 200 is raised (it is the response)."""
        failure: tuple[str, str] | None = None
        text: list[str] = []
        calls = ChoiceCalls()
        wanted = req.params.logprobs is not None
        entries: list[TokenLogprob] = []  # this sample's, all
        unsent: list[TokenLogprob] = []  # a stream's, not yet in a chunk (their text held back)
        # Wait for the prompt to be accepted (templated, fits the context) before answering 200,
        # so errors that come before any token get their real status code.
        while True:
            kind, data = self._next(sink)
            if kind == "failed":
                failure = data
            elif kind == "trimmed":  # the client did not opt into trimming; its generation is being stopped
                model = self._service.model
                return self._fail(too_long(data, model.n_ctx if model else None))
            elif kind == "finished":
                reason, full, metrics = data
                error = unfinished_error(reason, failure)  # refused (context overflow…), or cancelled while it waited
                if error is not None:
                    return self._fail(error)
                if req.stream:
                    self._open_choice(out, index)
                    self._stream.event(out.final_chunk(reason, metrics, index, answer=full))
                return full, reason, metrics, [] if wanted else None, calls
            elif kind == "started":
                break
        if req.stream:
            self._open_choice(out, index)
        while True:
            kind, data = self._next(sink)
            if kind == "logprob":
                entries.append(data)
                unsent.append(data)
            elif kind == "tokens":
                text.append(data)
                if req.stream and data:
                    self._stream.event(out.chunk(data, index=index, logprobs=unsent if wanted else None))
                    unsent = []
                if self._client_gone():  # tokens keep `_next` from ever idling to notice
                    raise ClientGone
            elif kind == "tool_call":
                position, said = calls.add(data)
                if said:  # an invalid call stays the text the model wrote (see tool_wire)
                    text.append(said)
                    if req.stream:
                        self._stream.event(out.chunk(said, index=index))
                if position is not None and req.stream:
                    for deltas in call_deltas(position, data):
                        self._stream.event(out.tool_chunk(deltas, index))
            elif kind == "failed":
                failure = data
            elif kind == "finished":
                reason, _full, metrics = data
                error = unfinished_error(reason, failure)
                if error is not None:  # a partial answer is not a 200: the client would take it as whole
                    return self._fail(error)
                whole = "".join(text)
                if req.stream:
                    held = unsent if wanted and unsent else None
                    self._stream.event(out.final_chunk(reason, metrics, index, held, calls, whole))
                return whole, reason, metrics, entries if wanted else None, calls

    def _fail(self, error: ApiError) -> None:
        """Before the 200 the error is the response; after it, an event that ends the stream."""
        if not self._stream.opened:
            raise error
        self._stream.end(error)

    def _open_choice(self, out: ResponseBuilder, index: int) -> None:
        if not self._stream.opened:
            self._stream.open()
        self._stream.event(out.chunk("", first=True, index=index) if out.kind == "chat" else None)

    def _next(self, sink: QueueSink) -> tuple[str, Any]:
        while True:
            try:
                return sink.events.get(timeout=POLL_S)
            except queue.Empty:
                if self._client_gone():
                    raise ClientGone from None
