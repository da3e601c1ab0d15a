"""A generation request and where its results go (`GenerationRequest`, `GenerationSink`), work that has
the engine to itself (`ExclusiveJob`), and what the engine service tells its listeners about its queue
and its loads (`RequestRecord`, `QueueState`, `ServiceListener`): the values every client of
service/engine.py speaks, apart from the service's thread and queue."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ember_chat.engine.core.infill import Infill
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest
from ember_chat.engine.errors import JobCancelled
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import AttachmentsPlanned, KnowledgeUsed, Retrying
from ember_chat.engine.inference.metrics import GenerationMetrics

if TYPE_CHECKING:
    from ember_chat.engine.attachments.store import AttachmentStore
    from ember_chat.engine.core.logprobs import TokenLogprob
    from ember_chat.engine.inference.prompt.knowledge import TurnKnowledge

TOKEN_BATCH_S = 1 / 30
METRICS_SNAPSHOT_S = 1 / 10


class GenerationSink:
    """Where one request's results go. Called on the engine thread; override what you need."""

    def started(self, snapshot: dict[str, Any]) -> None:
        """The prompt is ready and its evaluation starts."""

    def tokens(self, text: str, output_tokens: int) -> None:
        """A batch of answer text (possibly empty while a stop string is held back)."""

    def metrics(self, snapshot: dict[str, Any]) -> None:
        """A live metrics snapshot (same keys as GenerationMetrics, plus elapsed_s)."""

    def trimmed(self, dropped_messages: int) -> None:
        """The oldest messages were left out so the prompt fits the context."""

    def token_logprob(self, entry: TokenLogprob) -> None:
        """A sampled token's log-probability (only when the request's params ask for them)."""

    def notice(self, message: str) -> None:
        """Something the user should know about this answer (e.g. the chat template was replaced)."""

    def prefill(self, done: int, total: int) -> None:
        """A long prompt's evaluation: `done` of `total` tokens so far."""

    def retrying(self, event: Retrying) -> None:
        """A remote server refused before the first token; the request is tried again."""

    def attachments_planned(self, event: AttachmentsPlanned) -> None:
        """How the attachments went into the prompt (whole or retrieval, passages used, sources)."""

    def knowledge_used(self, event: KnowledgeUsed) -> None:
        """The knowledge passages given with the question (a project's), numbered as the answer cites them."""

    def tool_writing(self, index: int, name: str, arguments: str) -> None:
        """A tool call being written, so far (ToolCallWriting: each replaces the one before)."""

    def tool_call(self, index: int, call: ToolCall | InvalidCall) -> None:
        """A tool call read whole from the answer (ToolCallParsed), before `finished` (reason tool_calls)."""

    def failed(self, message: str, kind: str = "") -> None:
        """A clear message for the user (`kind`: the error's class name); `finished` follows."""

    def finished(self, reason: str, text: str, metrics: GenerationMetrics | None, itl_ms: list[float]) -> None:
        """Always last. reason "error" when the request failed before any answer."""


@dataclass
class GenerationRequest:
    params: SamplingParams
    sink: GenerationSink
    messages: list[ChatMessage] | None = None  # chat mode
    prompt: str | None = None  # completion mode
    infill: Infill | None = None  # fill-in-the-middle mode (the model's FIM tokens around its prefix and suffix)
    template: str | None = None
    client: str = "window"
    label: str = ""
    attachment_store: AttachmentStore | None = None  # where messages' attachments are read (else the service's)
    tools: ToolRequest | None = None  # the tools this answer may call (chat mode)
    knowledge: TurnKnowledge | None = None  # passages retrieved for the last user message (a project's; chat mode)
    # a conversation longer than the context loses its oldest turns (the window); False: it fails with
    # HistoryTooLong as soon as that is known (an API client that did not opt into trimming)
    trim_history: bool = True
    batch_s: float = TOKEN_BATCH_S
    snapshot_s: float = METRICS_SNAPSHOT_S
    id: int = 0
    cancelled: threading.Event = field(default_factory=threading.Event)


class ExclusiveJob:
    """Work that has the engine to itself (see `EngineService.run_exclusive`). `cancel`: set when the
    job should stop (by `cancel_exclusive` or at shutdown); the work itself must honour it."""

    def __init__(self, fn: Callable[[], Any], label: str, client: str, cancel: threading.Event) -> None:
        self.fn = fn
        self.label = label
        self.client = client
        self.cancel = cancel
        self.id = 0
        self.t_submitted = time.time()
        self.done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the job: what `fn` returned, or the exception it raised (JobCancelled when it was
        dropped before it started)."""
        if not self.done.wait(timeout):
            raise TimeoutError(f"{self.label} is still running.")
        if self._error is not None:
            raise self._error
        return self._value

    def _drop(self) -> None:
        self._error = JobCancelled(f"{self.label} was cancelled before it started.")
        self.done.set()


@dataclass(frozen=True)
class RequestRecord:
    """One request as the window's log shows it."""

    id: int
    client: str
    label: str
    state: str  # queued, running, done
    reason: str | None = None
    metrics: GenerationMetrics | None = None
    error: str | None = None
    t_submitted: float = 0.0  # time.time()


@dataclass(frozen=True)
class QueueState:
    running: RequestRecord | None  # the first of `running_all` (several run at once when batched)
    queued: tuple[RequestRecord, ...]
    running_all: tuple[RequestRecord, ...] = ()  # every running request

    def count(self, client: str) -> tuple[int, int]:
        """(running, queued) of one client kind."""
        running_all = self.running_all or ((self.running,) if self.running is not None else ())
        return sum(1 for r in running_all if r.client == client), sum(1 for r in self.queued if r.client == client)


class ServiceListener:
    """Model and queue events, called on the engine thread (or the caller's, for queue changes).

    A load's events come with the id `load()` returned (`…_with_id`); by default they are passed on
    without it, for a listener that starts one load at a time."""

    def load_progress(self, fraction: float) -> None: ...

    def loaded(self, model: ModelDescription) -> None: ...

    def load_failed(self, message: str) -> None: ...

    def load_progress_with_id(self, load_id: int, fraction: float) -> None:
        self.load_progress(fraction)

    def loaded_with_id(self, load_id: int, model: ModelDescription) -> None:
        self.loaded(model)

    def load_failed_with_id(self, load_id: int, message: str) -> None:
        self.load_failed(message)

    def unloaded(self) -> None: ...

    def queue_changed(self, state: QueueState) -> None: ...

    def request_done(self, record: RequestRecord) -> None: ...
