"""The Qt side of the engine: an adapter that turns the engine service's callbacks (called on the
engine thread) into Qt signals (emitted on the GUI thread).

The engine service (`engine.inference.service`) owns the backend, its thread, request ids, live
metrics and the fair request queue shared with the API server. Stop is `cancel(request_id)`: it
reaches the engine directly, without waiting for a queued call.

A generation's results go through a coalescer (a `GuiMailbox`, the task runner's too): the engine
thread posts each callback and wakes the GUI thread with one queued call only when none is waiting
already, so whatever the engine makes while the GUI thread is busy is delivered in one go, in order
(consecutive token texts joined, consecutive metrics snapshots and previews of a tool call being
written each reduced to the last). The first token
of an answer wakes it at once; later tokens at most every `GuiMailbox.interval`; a token held back
because the next one did not come is delivered by a GUI-thread timer two intervals after the last
delivery.

The interval is ≈30 Hz (`TOKEN_BATCH_S`), longer when the machine makes a delivery expensive: each
delivery costs the GUI thread about the same whatever it carries (a queued call, a text insertion,
a repaint, and the side panel's share: 1-1.5 ms on a small 2-core machine, more next to a model busy
on every core), so at 50 tokens/s the deliveries are nearly all of the GUI's cost per token, and that
CPU is taken from the model (the GUI thread holds the GIL while it works). The bridge measures the
GUI thread's CPU from one token delivery to the next and spaces them so that streaming takes at most
`GUI_CPU_BUDGET` of a core, never less often than every `MAX_BATCH_S`.

Loads: the window has one current load, the one it asked for last. `load_progress`, `loaded` and
`load_failed` are about that load only: what an earlier, superseded load says (it was cancelled, or
it finished after the user picked another model) is dropped on the GUI thread, where the current
load id is known without a race.
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from ember_chat.app.engine_link.gui_mailbox import GuiMailbox
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import AttachmentsPlanned, KnowledgeUsed, Retrying
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.prompt.attachments import TokenCount
from ember_chat.engine.inference.prompt.knowledge import TurnKnowledge
from ember_chat.engine.inference.service.engine import (
    EngineService,
    GenerationRequest,
    GenerationSink,
    QueueState,
    RequestRecord,
    ServiceListener,
)

TOKEN_BATCH_S = 1 / 30  # tokens wake the GUI thread at most this often (the first of an answer at once)
MAX_BATCH_S = 1 / 10  # and at least this often, however expensive a delivery is
GUI_CPU_BUDGET = 0.015  # of a core, for the GUI thread while an answer streams (deliveries spaced to fit)
TOKENS_PER_DELIVERY = 32  # at most, on average: a fast stream keeps ≈30 Hz (its deliveries cost by size)
COST_WEIGHT = 0.3  # of the latest delivery in the running estimate of a delivery's cost

_TOKENS, _METRICS, _WRITING = "tokens", "metrics", "writing"
_BATCHED = (_TOKENS, _METRICS, _WRITING)  # delivered at most every interval, each kind reduced to one


_Item = tuple[int, str, tuple[Any, ...]]  # in the mailbox: request id, callback, its arguments


class _Sink(GenerationSink):
    """One window request: each callback goes through the bridge's mailbox, tagged with the request id."""

    def __init__(self, mailbox: GuiMailbox[_Item]) -> None:
        self.mailbox = mailbox
        self.request: GenerationRequest | None = None
        self._tokens_sent = False  # (engine thread only)

    @property
    def id(self) -> int:
        # The service numbers the request before the engine thread can see it.
        return self.request.id if self.request is not None else 0

    def _post(self, kind: str, *args: Any) -> None:
        self.mailbox.post((self.id, kind, args))

    def started(self, snapshot: dict[str, Any]) -> None:
        self._post("started", snapshot)

    def tokens(self, text: str, output_tokens: int) -> None:
        first = not self._tokens_sent
        self._tokens_sent = True
        self.mailbox.post((self.id, _TOKENS, (text, output_tokens)), urgent=first)

    def metrics(self, snapshot: dict[str, Any]) -> None:
        self.mailbox.post((self.id, _METRICS, (snapshot,)), urgent=False)

    def trimmed(self, dropped_messages: int) -> None:
        self._post("trimmed", dropped_messages)

    def notice(self, message: str) -> None:
        self._post("notice", message)

    def prefill(self, done: int, total: int) -> None:
        self._post("prefill", done, total)

    def retrying(self, event: Retrying) -> None:
        self._post("retrying", event)

    def attachments_planned(self, event: AttachmentsPlanned) -> None:
        self._post("planned", event)

    def knowledge_used(self, event: KnowledgeUsed) -> None:
        self._post("knowledge", event)

    def tool_writing(self, index: int, name: str, arguments: str) -> None:
        self.mailbox.post((self.id, _WRITING, (index, name, arguments)), urgent=False)

    def tool_call(self, index: int, call: ToolCall | InvalidCall) -> None:
        self._post("tool_call", index, call)

    def failed(self, message: str, kind: str = "") -> None:
        self._post("failed", message)

    def finished(self, reason: str, text: str, metrics: GenerationMetrics | None, itl_ms: list[float]) -> None:
        self._post("finished", reason, text, metrics, itl_ms)


class _Listener(ServiceListener):
    def __init__(self, bridge: EngineBridge) -> None:
        self.bridge = bridge

    def load_progress_with_id(self, load_id: int, fraction: float) -> None:
        self.bridge._load_progress.emit(load_id, fraction)

    def loaded_with_id(self, load_id: int, model: ModelDescription) -> None:
        self.bridge._loaded.emit(load_id, model)

    def load_failed_with_id(self, load_id: int, message: str) -> None:
        self.bridge._load_failed.emit(load_id, message)

    def unloaded(self) -> None:
        self.bridge.unloaded.emit()

    def queue_changed(self, state: QueueState) -> None:
        self.bridge.queue_changed.emit(state)

    def request_done(self, record: RequestRecord) -> None:
        self.bridge.request_done.emit(record)


class EngineBridge(QObject):
    load_progress = Signal(float)  # of the current load
    loaded = Signal(object)  # ModelDescription: the current load ended with this model
    load_failed = Signal(str)  # the current load failed or was cancelled
    unloaded = Signal()
    started = Signal(int, object)  # request id, live metrics snapshot at prompt evaluation
    tokens = Signal(int, str, int)  # request id, text batch, output tokens so far
    metrics = Signal(int, object)  # request id, live metrics snapshot
    trimmed = Signal(int, int)  # request id, dropped messages
    notice = Signal(int, str)  # request id, something the user should know about this answer
    prefill = Signal(int, int, int)  # request id, prompt tokens evaluated, of how many
    retrying = Signal(int, object)  # request id, Retrying
    planned = Signal(int, object)  # request id, AttachmentsPlanned: how its attachments are read (before the answer)
    knowledge = Signal(int, object)  # request id, KnowledgeUsed: the project's passages given (before the answer)
    tool_writing = Signal(int, int, str, str)  # request id, index, the call's name and arguments so far
    tool_call = Signal(int, int, object)  # request id, index, ToolCall | InvalidCall (each before `finished`)
    failed = Signal(int, str)
    finished = Signal(int, str, str, object, object)  # id, reason, text, GenerationMetrics|None, ITLs
    queue_changed = Signal(object)  # QueueState
    request_done = Signal(object)  # RequestRecord
    # from the engine thread, with the load id: delivered queued, filtered by the slots below
    _load_progress = Signal(int, float)
    _loaded = Signal(int, object)
    _load_failed = Signal(int, str)
    _wake = Signal()  # from the engine thread: the mailbox has something (one wake-up waits at most)

    def __init__(self, service: EngineService, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.service = service
        self.load_id: int | None = None  # the current load (the last one asked for)
        self._load_progress.connect(self._on_load_progress)
        self._loaded.connect(self._on_loaded)
        self._load_failed.connect(self._on_load_failed)
        self._mailbox: GuiMailbox[_Item] = GuiMailbox(self._wake.emit, TOKEN_BATCH_S)
        self._wake.connect(self._deliver)
        self._hold = QTimer(self)  # delivers a token held back when no other came to wake the GUI
        self._hold.setSingleShot(True)
        self._hold.setInterval(round(2 * TOKEN_BATCH_S * 1000))
        self._hold.timeout.connect(self._deliver)
        self._cost: float | None = None  # GUI-thread CPU from one token delivery to the next (s)
        self._last_cpu: float | None = None  # the GUI thread's CPU clock at the last token delivery
        self._cpu_clock = time.thread_time  # (the GUI thread's; a test can drive it)
        self._wall_clock = time.perf_counter  # (a test can drive it)
        self._last_wall: float | None = None
        self._last_count = 0
        self._rate: float | None = None  # tokens a second, between token deliveries
        self._listener = _Listener(self)
        service.add_listener(self._listener)
        self._closed = False

    def load(self, ref: ModelRef, alias: str | None = None) -> int:
        """Load a model; it becomes the current load (an earlier one is no longer reported: cancel it
        first if it should not go on). Returns the load's id."""
        self.load_id = self.service.load(ref, alias)
        return self.load_id

    def cancel_load(self, load_id: int | None = None) -> None:
        """Cancel a load: by default the current one. Its own cancel, never a later load's."""
        load_id = self.load_id if load_id is None else load_id
        if load_id is not None:
            self.service.cancel_load(load_id)

    @Slot(int, float)
    def _on_load_progress(self, load_id: int, fraction: float) -> None:
        if load_id == self.load_id:
            self.load_progress.emit(fraction)

    @Slot(int, object)
    def _on_loaded(self, load_id: int, model: ModelDescription) -> None:
        if load_id == self.load_id:
            self.loaded.emit(model)

    @Slot(int, str)
    def _on_load_failed(self, load_id: int, message: str) -> None:
        if load_id == self.load_id:
            self.load_failed.emit(message)

    def unload(self) -> None:
        self.service.unload()

    def generate(
        self,
        messages: list[ChatMessage],
        params: SamplingParams,
        template: str | None = None,
        tools: ToolRequest | None = None,
        knowledge: TurnKnowledge | None = None,
    ) -> int:
        """`tools`: what the answer may call (its calls come back by `tool_call`, before `finished`);
        `knowledge`: a project's, retrieved for the last user message on the engine thread (what was
        given comes back by `knowledge`, before the answer)."""
        sink = _Sink(self._mailbox)
        # batch_s=0: every token goes to the mailbox as it comes; the mailbox batches (the first at once)
        request = GenerationRequest(
            params=params, sink=sink, messages=messages, template=template, label="Chat", tools=tools, batch_s=0,
            knowledge=knowledge,
        )  # fmt: skip
        sink.request = request
        return self.service.submit(request)

    @Slot()
    def _deliver(self) -> None:
        """Emit what the engine posted, in order: a run of one request's tokens and metrics snapshots
        as one `tokens` (the texts joined) and one `metrics` (the last snapshot). Re-entrant (a slot
        that runs an event loop) without reordering: every call empties the mailbox's same inbox in order."""
        out = self._mailbox.collect()
        delivered_count: int | None = None  # the answer's token count at the last token batch here
        while out:
            rid, kind, args = out.popleft()
            if kind not in _BATCHED:
                self._emit(rid, kind, args)
                if kind == "finished":
                    delivered_count = None  # (nothing more to hold)
                    self._last_cpu = self._last_wall = self._rate = None  # (the next answer starts anew)
                    self._last_count = 0
                continue
            texts: list[str] = []
            count = -1
            snapshot: dict[str, Any] | None = None
            writing: tuple[Any, ...] | None = None
            while True:
                if kind == _TOKENS:
                    texts.append(args[0])
                    count = args[1]
                    writing = None if args[0] else writing  # (text after a call's start: it was no call)
                elif kind == _WRITING:
                    writing = args  # (emitted after the text: a call follows the text before it)
                else:
                    snapshot = args[0]
                if not out or out[0][0] != rid or out[0][1] not in _BATCHED:
                    break
                rid, kind, args = out.popleft()
            if count >= 0:
                delivered_count = count
                self.tokens.emit(rid, "".join(texts), count)
            if writing is not None:
                self.tool_writing.emit(rid, *writing)
            if snapshot is not None:
                self.metrics.emit(rid, snapshot)
        if delivered_count is not None:
            self._pace(delivered_count)
            self._hold.start()  # (restarted: it fires only when tokens stop coming)

    def _pace(self, count: int) -> None:
        """Space the next deliveries so that the GUI thread's CPU while streaming stays within the
        budget: interval = (CPU from one delivery to the next, everything included) / budget. That
        helps where a delivery's cost is its fixed part (a model at tens of tokens a second); a fast
        stream's deliveries cost by their size, and longer ones would only make each a longer stall,
        so a delivery is never spaced to carry more than TOKENS_PER_DELIVERY tokens on average.
        `count`: the answer's tokens so far."""
        cpu, wall = self._cpu_clock(), self._wall_clock()
        if self._last_cpu is not None and self._last_wall is not None:
            # (a stall of the GUI thread for something else counts, but only so much)
            cost = min(cpu - self._last_cpu, 2 * MAX_BATCH_S * GUI_CPU_BUDGET)
            self._cost = cost if self._cost is None else self._cost + COST_WEIGHT * (cost - self._cost)
            rate = max(count - self._last_count, 0) / max(wall - self._last_wall, 1e-6)
            self._rate = rate if self._rate is None else self._rate + COST_WEIGHT * (rate - self._rate)
            widest = max(TOKENS_PER_DELIVERY / self._rate, TOKEN_BATCH_S) if self._rate > 0 else MAX_BATCH_S
            interval = min(max(self._cost / GUI_CPU_BUDGET, TOKEN_BATCH_S), MAX_BATCH_S, widest)
            if interval != self._mailbox.interval:
                self._mailbox.interval = interval
                self._hold.setInterval(round(2 * interval * 1000))
        self._last_cpu, self._last_wall, self._last_count = cpu, wall, count

    def _emit(self, rid: int, kind: str, args: tuple[Any, ...]) -> None:
        if kind == "finished":
            self._hold.stop()
        signal = {
            "started": self.started,
            "trimmed": self.trimmed,
            "notice": self.notice,
            "prefill": self.prefill,
            "retrying": self.retrying,
            "planned": self.planned,
            "knowledge": self.knowledge,
            "tool_call": self.tool_call,
            "failed": self.failed,
            "finished": self.finished,
        }[kind]
        signal.emit(rid, *args)

    def measure_tokens(self, text: str) -> TokenCount:
        """The loaded model's token count of `text`, or an estimate (no model, no tokenizer). A worker
        thread's call, never the GUI thread's: a long text takes a while, a remote one is a request."""
        return self.service.measure_tokens(text)

    def stop(self, request_id: int) -> None:
        self.service.cancel(request_id)

    def close(self) -> None:
        """Cancel, stop the engine thread, wait for it, close the model (in that order); then deliver
        what the engine said until it stopped (an answer cut by quitting ends like a stopped one: every
        token it made, its metrics)."""
        if self._closed:
            return
        self._closed = True
        self.service.remove_listener(self._listener)
        self.service.close()
        self._mailbox.close()  # (the engine thread has ended: nothing more to post)
        self._deliver()
        self._hold.stop()
