"""The Qt side of the engine: a thin adapter that turns the engine service's callbacks (called on
the engine thread) into Qt signals (delivered queued, on the GUI thread).

The engine service (`engine.inference.service`) owns the backend, its thread, request ids, token
batching, live metrics and the fair request queue shared with the API server; this file only
translates. Stop is `cancel(request_id)`: it reaches the engine directly, without waiting for a
queued call.

Loads: the window has one current load, the one it asked for last. `load_progress`, `loaded` and
`load_failed` are about that load only: what an earlier, superseded load says (it was cancelled, or
it finished after the user picked another model) is dropped on the GUI thread, where the current
load id is known without a race.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import Retrying
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service import (
    EngineService,
    GenerationRequest,
    GenerationSink,
    QueueState,
    RequestRecord,
    ServiceListener,
)


class _Sink(GenerationSink):
    """One window request: each callback becomes a signal tagged with the request id."""

    def __init__(self, bridge: EngineBridge) -> None:
        self.bridge = bridge
        self.request: GenerationRequest | None = None

    @property
    def id(self) -> int:
        # The service numbers the request before the engine thread can see it.
        return self.request.id if self.request is not None else 0

    def started(self, snapshot: dict[str, Any]) -> None:
        self.bridge.started.emit(self.id, snapshot)

    def tokens(self, text: str, output_tokens: int) -> None:
        self.bridge.tokens.emit(self.id, text, output_tokens)

    def metrics(self, snapshot: dict[str, Any]) -> None:
        self.bridge.metrics.emit(self.id, snapshot)

    def trimmed(self, dropped_messages: int) -> None:
        self.bridge.trimmed.emit(self.id, dropped_messages)

    def notice(self, message: str) -> None:
        self.bridge.notice.emit(self.id, message)

    def prefill(self, done: int, total: int) -> None:
        self.bridge.prefill.emit(self.id, done, total)

    def retrying(self, event: Retrying) -> None:
        self.bridge.retrying.emit(self.id, event)

    def failed(self, message: str, kind: str = "") -> None:
        self.bridge.failed.emit(self.id, message)

    def finished(self, reason: str, text: str, metrics: GenerationMetrics | None, itl_ms: list[float]) -> None:
        self.bridge.finished.emit(self.id, reason, text, metrics, itl_ms)


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
    failed = Signal(int, str)
    finished = Signal(int, str, str, object, object)  # id, reason, text, GenerationMetrics|None, ITLs
    queue_changed = Signal(object)  # QueueState
    request_done = Signal(object)  # RequestRecord
    # from the engine thread, with the load id: delivered queued, filtered by the slots below
    _load_progress = Signal(int, float)
    _loaded = Signal(int, object)
    _load_failed = Signal(int, str)

    def __init__(self, service: EngineService, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.service = service
        self.load_id: int | None = None  # the current load (the last one asked for)
        self._load_progress.connect(self._on_load_progress)
        self._loaded.connect(self._on_loaded)
        self._load_failed.connect(self._on_load_failed)
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

    def generate(self, messages: list[ChatMessage], params: SamplingParams, template: str | None = None) -> int:
        sink = _Sink(self)
        request = GenerationRequest(params=params, sink=sink, messages=messages, template=template, label="Chat")
        sink.request = request
        return self.service.submit(request)

    def stop(self, request_id: int) -> None:
        self.service.cancel(request_id)

    def close(self) -> None:
        """Cancel, stop the engine thread, wait for it, close the model (in that order)."""
        if self._closed:
            return
        self._closed = True
        self.service.remove_listener(self._listener)
        self.service.close()
