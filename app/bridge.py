"""The engine thread: `EngineWorker` (a QObject moved to its own QThread) owns the backend.

Requests go in by queued signals, results come out by queued signals; errors are data
(`failed(...)`, then `finished(...)`). Tokens are coalesced in the worker into batches at about 30 Hz
and metrics snapshots at about 10 Hz, so the GUI thread handles a few dozen events a second however
fast the model is. Stop sets the backend's stop event directly: the worker is busy generating and
cannot take a queued call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine.errors import EmberError
from engine.inference.backend import InferenceBackend
from engine.inference.events import ContextTrimmed, Finished, PromptReady, Token
from engine.inference.metrics import LiveMetrics
from engine.inference.params import LoadConfig, SamplingParams
from engine.inference.prompting import ChatMessage

TOKEN_BATCH_S = 1 / 30
METRICS_SNAPSHOT_S = 1 / 10


@dataclass(frozen=True)
class GenerationRequest:
    request_id: int
    messages: list[ChatMessage]
    params: SamplingParams
    template: str | None = None


class EngineWorker(QObject):
    load_progress = Signal(float)
    loaded = Signal(object, str)  # ModelInfo, backend (CPU, CUDA, Metal, ...)
    load_failed = Signal(str)
    unloaded = Signal()
    started = Signal(int, object)  # request id, LiveMetrics snapshot dict at prompt evaluation
    tokens = Signal(int, str, int)  # request id, text batch, output tokens so far
    metrics = Signal(int, object)  # request id, LiveMetrics snapshot dict
    trimmed = Signal(int, int)  # request id, dropped messages
    failed = Signal(int, str)
    finished = Signal(int, str, str, object, object)  # id, reason, text, GenerationMetrics|None, ITLs

    def __init__(self, backend_factory: Callable[[], InferenceBackend]) -> None:
        super().__init__()
        self._factory = backend_factory
        self._backend: InferenceBackend | None = None
        self.load_cancel = threading.Event()

    def _get_backend(self) -> InferenceBackend:
        # Created on first use, in the worker thread: importing llama.cpp stays off the GUI's start.
        if self._backend is None:
            self._backend = self._factory()
        return self._backend

    def request_stop(self) -> None:
        """Thread-safe: called from the GUI thread while this worker is busy."""
        if self._backend is not None:
            self._backend.request_stop()

    @Slot(object)
    def load(self, config: LoadConfig) -> None:
        self.load_cancel.clear()
        try:
            info = self._get_backend().load(config, progress=self.load_progress.emit, cancel=self.load_cancel)
        except EmberError as exc:
            self.load_failed.emit(str(exc))
            return
        except Exception as exc:  # never let a load kill the engine thread
            self.load_failed.emit(f"Unexpected error while loading: {exc!r}")
            return
        self.loaded.emit(info, self._get_backend().backend)

    @Slot()
    def unload(self) -> None:
        if self._backend is not None:
            self._backend.close()
        self.unloaded.emit()

    @Slot(object)
    def generate(self, req: GenerationRequest) -> None:
        rid = req.request_id
        live = LiveMetrics()
        pending: list[str] = []
        last_batch = last_snapshot = time.perf_counter()
        try:
            events = self._get_backend().chat(req.messages, req.params, req.template)
            for ev in events:
                if isinstance(ev, Token):
                    pending.append(ev.text)
                    live.on_token(ev.index, ev.t_ns)
                    now = time.perf_counter()
                    if now - last_batch >= TOKEN_BATCH_S:
                        self.tokens.emit(rid, "".join(pending), len(live.token_times_ns))
                        pending.clear()
                        last_batch = now
                    if now - last_snapshot >= METRICS_SNAPSHOT_S:
                        self.metrics.emit(rid, live.snapshot())
                        last_snapshot = now
                elif isinstance(ev, PromptReady):
                    live.on_prompt(ev.prompt_tokens, ev.prompt_tokens_reused, ev.n_ctx, ev.t_start_ns, ev.t_ns)
                    self.started.emit(rid, live.snapshot())
                elif isinstance(ev, ContextTrimmed):
                    self.trimmed.emit(rid, ev.dropped_messages)
                elif isinstance(ev, Finished):
                    if pending:
                        self.tokens.emit(rid, "".join(pending), len(live.token_times_ns))
                    self.finished.emit(rid, ev.reason, ev.text, ev.metrics, live.itl_ms())
                    return
        except EmberError as exc:
            self.failed.emit(rid, str(exc))
        except Exception as exc:  # a bug must not kill the engine thread; show it and carry on
            self.failed.emit(rid, f"Unexpected error while generating: {exc!r}")
        self.finished.emit(rid, "error", "".join(pending), None, [])

    def shutdown(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


class EngineBridge(QObject):
    """GUI-side handle: owns the thread, forwards requests as queued signals."""

    _load = Signal(object)
    _unload = Signal()
    _generate = Signal(object)

    def __init__(self, backend_factory: Callable[[], InferenceBackend], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.thread = QThread()
        self.thread.setObjectName("ember-engine")
        self.worker = EngineWorker(backend_factory)
        self.worker.moveToThread(self.thread)
        self._load.connect(self.worker.load)
        self._unload.connect(self.worker.unload)
        self._generate.connect(self.worker.generate)
        self._next_id = 0
        self.thread.start()

    def load(self, config: LoadConfig) -> None:
        self._load.emit(config)

    def cancel_load(self) -> None:
        self.worker.load_cancel.set()

    def unload(self) -> None:
        self._unload.emit()

    def generate(self, messages: list[ChatMessage], params: SamplingParams, template: str | None = None) -> int:
        self._next_id += 1
        self._generate.emit(GenerationRequest(self._next_id, messages, params, template))
        return self._next_id

    def stop(self) -> None:
        self.worker.request_stop()

    def close(self) -> None:
        """Stop, then quit the thread, wait for it, and close the model (in that order). Once the
        thread has ended nothing else uses the model, so closing it from here is safe."""
        if self.thread.isRunning():
            self.worker.load_cancel.set()
            self.worker.request_stop()
            self.thread.quit()
            self.thread.wait()
        self.worker.shutdown()
