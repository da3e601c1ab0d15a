"""One request's generation as the engine service drives it (`Run`): the backend's events turned into
sink calls (answer text in batches, live metrics from the same `MetricsRecorder` computation as the
final record, notices, tool calls) and the request's record. The same class serves a request that has
the model to itself and one decoded in a batch with others (`batched`: its events pause at
`StepWanted` until the service has called the backend's `step()`).

Runs on the engine thread only; `GenerationRequest.cancelled` is the one thing other threads touch."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.errors import EmberError, InvalidParameter, NoModelLoaded
from ember_chat.engine.inference.backend import InferenceBackend
from ember_chat.engine.inference.events import (
    AttachmentsPlanned,
    ContextTrimmed,
    Event,
    Finished,
    PrefillProgress,
    PromptReady,
    Retrying,
    StepWanted,
    TemplateFallback,
    Token,
    ToolCallParsed,
    ToolCallWriting,
)
from ember_chat.engine.inference.metrics import GenerationMetrics, MetricsRecorder, live_snapshot
from ember_chat.engine.inference.prompt.attachments import expand_attachments
from ember_chat.engine.inference.prompt.knowledge import add_knowledge, last_question
from ember_chat.engine.inference.service.requests import GenerationRequest

if TYPE_CHECKING:
    from ember_chat.engine.attachments.store import AttachmentStore

log = logging.getLogger(__name__)

RecorderFactory = Callable[[int, int, int], MetricsRecorder]  # (t_start_ns, t_prefill_ns, n_ctx) → a live recorder
DoneCallback = Callable[[GenerationRequest, str, GenerationMetrics | None, str | None], None]


def failure_text(exc: BaseException) -> tuple[str, str]:
    """What the user reads about a failed generation, and its kind (the error's class name, or
    "internal" for a bug)."""
    if isinstance(exc, EmberError):
        return str(exc), type(exc).__name__
    return f"Unexpected error while generating: {exc!r}", "internal"


def messages_with_attachments(
    req: GenerationRequest, backend: InferenceBackend, store: AttachmentStore | None
) -> list[ChatMessage]:
    """The request's messages with their text attachments expanded (whole or retrieved passages), then its
    knowledge's passages (a project's) in the context left."""
    assert req.messages is not None
    description = backend.description
    expanded = expand_attachments(
        req.messages, req.params, backend, description.n_ctx if description else None, req.attachment_store or store
    )
    messages = req.messages
    if expanded is not None:
        messages, plan, budget, estimated = expanded
        req.sink.attachments_planned(AttachmentsPlanned(plan, budget, estimated))
    if req.knowledge is not None:
        n_ctx = description.n_ctx if description else None
        question = last_question(req.messages)
        messages, used = add_knowledge(messages, question, req.params, backend, n_ctx, req.knowledge)
        req.sink.knowledge_used(used)
    return messages


def batch_slots(backend: InferenceBackend | None) -> int:
    """How many runs the backend decodes together (0 or 1: one at a time)."""
    if backend is None or not backend.loaded:
        return 0
    return int(getattr(backend, "batch_slots", 0) or 0)


def batchable(backend: InferenceBackend | None, req: GenerationRequest) -> bool:
    """The backend can decode this request in a batch with others."""
    try:
        return backend is not None and bool(backend.can_batch(req.params, req.tools, req.messages))  # type: ignore[attr-defined]
    except Exception:  # (a request the backend cannot judge has the model to itself)
        log.exception("can_batch failed")
        return False


def step(backend: InferenceBackend | None, waiting: list[Run]) -> list[Run]:
    """One decoder step for the runs waiting for it, which it returns; a failed step fails them (and
    only them: the engine goes on with the next requests)."""
    try:
        backend.step()  # type: ignore[union-attr]
    except Exception as exc:
        log.exception("a batch step failed")
        for run in waiting:
            run.fail(exc)
        return []
    return waiting


class Run:
    """One request from its start to its `finished` call. `advance()` handles events until the run
    wants the decoder's next step (True) or has ended (False); it never raises: a failure is the
    sink's `failed` then `finished(error)`, and the request's record."""

    def __init__(self, req: GenerationRequest, batched: bool, recorder: RecorderFactory, done: DoneCallback) -> None:
        self.req = req
        self.batched = batched
        self.ended = False
        self._recorder = recorder
        self._done = done
        self._events: Iterator[Event] | None = None
        self._backend: InferenceBackend | None = None
        self._pending: list[str] = []
        self._live: MetricsRecorder | None = None
        self._last_batch = self._last_snapshot = time.perf_counter()

    def begin(self, backend: InferenceBackend | None, attachment_store: AttachmentStore | None) -> bool:
        """Start the backend's generation; False when the run has already ended (cancelled before it
        started, no model, attachments that could not be read)."""
        req = self.req
        try:
            if backend is None or not backend.loaded:
                raise NoModelLoaded("No model is loaded. Pick a model first.")
            self._backend = backend
            if req.cancelled.is_set():
                self._end(StopReason.CANCELLED, "", None, [], None)
                return False
            self._events = self._open(backend, attachment_store)
        except Exception as exc:
            self.fail(exc)
            return False
        return True

    def _open(self, backend: InferenceBackend, attachment_store: AttachmentStore | None) -> Iterator[Event]:
        req = self.req
        extra: dict[str, object] = {"batched": True, "cancel": req.cancelled} if self.batched else {}
        if getattr(backend, "takes_client", False):  # (its speculation drafts from this client's answers alone)
            extra["client"] = req.client
        if req.infill is not None:
            infill = getattr(backend, "infill", None)
            if infill is None:  # (a remote engine: its own FIM tokens are not Ember's to write)
                raise InvalidParameter(
                    "Fill-in-the-middle needs a local model: a remote model cannot fill in the middle here."
                )
            return infill(req.infill, req.params, **extra)  # type: ignore[no-any-return]
        if req.messages is None:
            return backend.complete(req.prompt or "", req.params, **extra)  # type: ignore[call-arg]
        if not req.trim_history and getattr(backend, "trims_history", False):
            extra["trim"] = False  # (a backend that never trims, a remote one, has no such argument)
        messages = messages_with_attachments(req, backend, attachment_store)
        if req.tools is not None:
            return backend.chat(messages, req.params, req.template, tools=req.tools, **extra)  # type: ignore[call-arg]
        return backend.chat(messages, req.params, req.template, **extra)  # type: ignore[call-arg]

    def advance(self) -> bool:
        """Handle events until the run wants the decoder's next step (True) or has ended (False)."""
        if self.ended or self._events is None:
            return False
        try:
            for ev in self._events:
                if isinstance(ev, StepWanted):
                    return True
                if self._handle(ev):
                    return False
            raise RuntimeError("the backend's event stream ended without Finished")
        except Exception as exc:  # a bug must not kill the engine thread (nor the other runs): this run fails
            if not isinstance(exc, EmberError):
                log.exception("unexpected error while generating")
            self.fail(exc)
            return False

    def fail(self, exc: BaseException) -> None:
        """End the run with this failure (also when the batch step it waited for failed)."""
        if self.ended:
            return
        self._close_events()
        message, kind = failure_text(exc)
        self.req.sink.failed(message, kind)
        self._end(StopReason.ERROR, "".join(self._pending), None, [], message)

    def abandon(self) -> None:
        """The engine stops without finishing this run (never while it can go on): ended as cancelled."""
        if not self.ended:
            self._close_events()
            self._end(StopReason.CANCELLED, "".join(self._pending), None, [], None)

    def _close_events(self) -> None:
        events, self._events = self._events, None
        close = getattr(events, "close", None)
        if callable(close):
            try:
                close()  # (the backend's own cleanup: its sequence ends, its slot is free again)
            except Exception:
                log.exception("closing a generation failed")

    def _end(
        self, reason: str, text: str, metrics: GenerationMetrics | None, itl: list[float], error: str | None
    ) -> None:
        self.ended = True
        self._events = None
        self.req.sink.finished(reason, text, metrics, itl)
        self._done(self.req, reason, metrics, error)

    def _handle(self, ev: Event) -> bool:
        """One event to the sink; True once the run has ended (Finished)."""
        req, sink = self.req, self.req.sink
        if req.cancelled.is_set() and not self.batched and self._backend is not None:
            self._backend.request_stop()  # idempotent: also covers a cancel that raced the start
        if isinstance(ev, Token):
            self._token(ev)
        elif isinstance(ev, PromptReady):
            live = self._live = self._recorder(ev.t_start_ns, ev.t_ns, ev.n_ctx)
            live.prefill_started(ev.prompt_tokens, ev.prompt_tokens_reused, ev.t_ns, restored=ev.restored)
            sink.started(live_snapshot(live))
        elif isinstance(ev, ToolCallWriting):
            self._flush()  # the text before the call comes first
            sink.tool_writing(ev.index, ev.name, ev.arguments)
        elif isinstance(ev, ToolCallParsed):
            self._flush()  # the text before the call comes first
            sink.tool_call(ev.index, ev.call)
        elif isinstance(ev, ContextTrimmed):
            sink.trimmed(ev.dropped_messages)
        elif isinstance(ev, TemplateFallback):
            sink.notice(ev.message)
        elif isinstance(ev, PrefillProgress):
            sink.prefill(ev.done, ev.total)
        elif isinstance(ev, Retrying):
            sink.retrying(ev)
        elif isinstance(ev, Finished):
            if self._pending:
                sink.tokens("".join(self._pending), ev.metrics.output_tokens)
                self._pending.clear()
            if ev.error:
                sink.failed(ev.error, StopReason.INTERRUPTED)
            itl = self._live.itl_ms() if self._live is not None else []
            self._end(ev.reason, ev.text, ev.metrics, itl, ev.error)
            return True
        return False

    def _token(self, ev: Token) -> None:
        req, sink = self.req, self.req.sink
        if ev.logprob is not None:  # (before its text: the API's chunk carries both)
            sink.token_logprob(ev.logprob)
        if ev.text:
            self._pending.append(ev.text)
        live = self._live
        if live is None:
            live = self._live = self._recorder(ev.t_ns, ev.t_ns, 0)
        if ev.count:
            live.token(ev.t_ns, ev.count, thinking=ev.thinking)
        now = time.perf_counter()
        if now - self._last_batch >= req.batch_s:
            self._flush()
            self._last_batch = now
        if now - self._last_snapshot >= req.snapshot_s:
            sink.metrics(live_snapshot(live))
            self._last_snapshot = now

    def _flush(self) -> None:
        if self._pending:
            self.req.sink.tokens("".join(self._pending), len(self._live.token_times_ns) if self._live else 0)
            self._pending.clear()
