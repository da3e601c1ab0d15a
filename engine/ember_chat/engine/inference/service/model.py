"""The engine service's model (`ServiceModel`): the one backend the service holds (made by the backend
factory, replaced when a model of another kind is loaded), the model loaded on it and the name clients
know it by, the loads not finished yet (each with its own id and cancel event), the KV snapshot store
given to the backend, and reading the model's tokenizer from any thread.

Loads, unloads and closing run on the engine thread; a token count never overlaps a model being
replaced or closed (`ModelChangeGuard`). The load bookkeeping is guarded by the service's lock."""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.core.refs import ModelRef, RemoteModelRef
from ember_chat.engine.errors import EmberError, InvalidParameter
from ember_chat.engine.inference.backend import InferenceBackend, ModelDescription
from ember_chat.engine.inference.events import AttachmentsPlanned
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext
from ember_chat.engine.inference.prompt.attachments import (
    ModelChangeGuard,
    TokenCount,
    estimate_tokens,
    expand_attachments,
    token_counter,
)
from ember_chat.engine.models.gguf_inspect import ModelInfo
from ember_chat.engine.models.names import display_name

if TYPE_CHECKING:
    from ember_chat.engine.attachments.store import AttachmentStore
    from ember_chat.engine.core.messages import ChatMessage
    from ember_chat.engine.core.params import SamplingParams
    from ember_chat.engine.core.tools import ToolRequest
    from ember_chat.engine.inference.kv.snapshots import SnapshotStore

log = logging.getLogger(__name__)


def default_backend_factory(ref: ModelRef) -> InferenceBackend:
    """A local runtime for a GGUF file, a remote backend for a connection's model."""
    if isinstance(ref, RemoteModelRef):
        from ember_chat.engine.inference.remote.backend import RemoteBackend

        return RemoteBackend()
    from ember_chat.engine.inference.local.runtime import LocalRuntime  # imports llama.cpp: only on the engine thread

    return LocalRuntime()


def _backend_kind(ref: ModelRef) -> str:
    return type(ref).__name__


class ServiceModel:
    """The backend and its model. `notify(method, *args)` tells the service's listeners; `lock` is the
    service's, held for the loads' ids and cancel events."""

    def __init__(
        self,
        backend_factory: Callable[[ModelRef], InferenceBackend],
        lock: threading.Condition,
        notify: Callable[..., None],
    ) -> None:
        self._factory = backend_factory
        self._lock = lock
        self._notify = notify
        self.backend: InferenceBackend | None = None
        self._backend_kind: str | None = None
        self.model: ModelDescription | None = None
        self.alias: str | None = None
        self._load_ids = itertools.count(1)
        self._load_cancels: dict[int, threading.Event] = {}  # loads not finished yet → their cancel
        self.snapshots: SnapshotStore | None = None
        self._model_change = ModelChangeGuard()  # token counts never overlap a model being replaced or closed
        self._loads: Counter[str] = Counter()  # models loaded, by the name clients know them by (under the lock)

    def give_snapshots(self) -> None:
        """Give the snapshot store to the current backend (engine thread)."""
        backend = self.backend
        if backend is not None and hasattr(backend, "snapshots"):  # (a backend that keeps them: the local runtime)
            backend.snapshots = self.snapshots

    # ----- the tokenizer, from any thread
    def measure_tokens(self, text: str) -> TokenCount:
        with self._model_change.reading() as ok:
            backend = self.backend
            if not ok or backend is None or self.model is None or not backend.loaded:
                return TokenCount(estimate_tokens(text), True)
            count, estimated = token_counter(backend)
            return TokenCount(count(text), estimated)

    def plan_attachments(
        self, messages: list[ChatMessage], params: SamplingParams, store: AttachmentStore
    ) -> AttachmentsPlanned | None:
        """How a request with these messages would have its text attachments read (expand_attachments:
        the very computation a generation makes, with the loaded model's tokenizer and context), or None
        without a model or without text attachments. Any thread, as `measure_tokens`."""
        with self._model_change.reading() as ok:
            backend = self.backend
            if not ok or backend is None or self.model is None or not backend.loaded:
                return None
            description = backend.description
            expanded = expand_attachments(messages, params, backend, description.n_ctx if description else None, store)
            if expanded is None:
                return None
            _messages, plan, budget, estimated = expanded
            return AttachmentsPlanned(plan, budget, estimated)

    def tokenize(self, text: str, *, add_special: bool = False) -> list[int] | None:
        with self._model_change.reading() as ok:
            backend = self.backend
            if not ok or backend is None or self.model is None or not backend.loaded:
                return None
            tokenize = getattr(backend, "tokenize", None)
            if not callable(tokenize) or not hasattr(backend, "token_piece"):
                return None
            return list(tokenize(text, special=True, add_bos=add_special))

    def prompt_tokens(
        self, messages: list[ChatMessage], params: SamplingParams, tools: ToolRequest | None
    ) -> int | None:
        """The tokens of the prompt a chat request with these messages would evaluate (the local runtime's
        chat_prompt: its template, tools and thinking switch; the whole conversation, even one over the
        context), or None without a local model. Any thread, as `tokenize`."""
        with self._model_change.reading() as ok:
            backend = self.backend
            if not ok or backend is None or self.model is None or not backend.loaded:
                return None
            chat_prompt = getattr(backend, "chat_prompt", None)
            if not callable(chat_prompt):  # (a remote model: its server renders its own prompt)
                return None
            prompt = chat_prompt(messages, params, tools=tools, fit=False)
            if prompt.vision is not None:  # its images' positions, which nothing will evaluate
                prompt.vision.close()
            return len(prompt.tokens)

    def token_pieces(self, tokens: list[int]) -> list[bytes] | None:
        with self._model_change.reading() as ok:
            backend = self.backend
            if not ok or backend is None or self.model is None or not backend.loaded:
                return None
            piece = getattr(backend, "token_piece", None)
            vocab_size = getattr(backend, "vocab_size", None)
            if not callable(piece) or not callable(vocab_size):
                return None
            size = int(vocab_size())
            bad = next((t for t in tokens if not 0 <= t < size), None)
            if bad is not None:
                raise InvalidParameter(f"token {bad} is not in the model's vocabulary (0 to {size - 1}).")
            return [piece(t) for t in tokens]

    # ----- loads: their ids and cancels (any thread)
    def new_load(self) -> tuple[int, threading.Event]:
        """A new load's id and its own cancel event."""
        cancel = threading.Event()
        with self._lock:
            load_id = next(self._load_ids)
            self._load_cancels[load_id] = cancel
        return load_id, cancel

    def cancel_load(self, load_id: int | None = None) -> None:
        with self._lock:
            if load_id is None:
                cancels = list(self._load_cancels.values())
            else:
                cancels = [self._load_cancels[load_id]] if load_id in self._load_cancels else []
        for cancel in cancels:
            cancel.set()

    # ----- load, unload, close (engine thread)
    def load(self, load_id: int, ref: ModelRef, alias: str | None, cancel: threading.Event, server_id: str) -> None:
        try:
            self._load(load_id, ref, alias, cancel, server_id)
        finally:
            with self._lock:
                self._load_cancels.pop(load_id, None)

    def _load(self, load_id: int, ref: ModelRef, alias: str | None, cancel: threading.Event, server_id: str) -> None:
        kind = _backend_kind(ref)
        try:
            if isinstance(ref, RemoteModelRef):  # checked before the model here is closed for it
                from ember_chat.engine.inference.remote.wire import check_remote_model  # the HTTP stack

                check_remote_model(ref, server_id)
            with self._model_change.changing():
                if self.backend is not None and self._backend_kind != kind:
                    self.close()
                if self.backend is None:
                    self.backend = self._factory(ref)
                    self._backend_kind = kind
                    self.give_snapshots()
                self.model = None
                model = self.backend.load(
                    ref,
                    progress=lambda fraction: self._notify("load_progress_with_id", load_id, fraction),
                    cancel=cancel,
                )
        except EmberError as exc:
            # a file refused by its checks leaves the backend's model loaded: it still serves
            backend = self.backend
            self.model = backend.description if backend is not None and backend.loaded else None
            self._notify("load_failed_with_id", load_id, str(exc))
            return
        except Exception as exc:  # never let a load kill the engine thread
            log.exception("unexpected error while loading")
            self.model = None
            self._notify("load_failed_with_id", load_id, f"Unexpected error while loading: {exc!r}")
            return
        info = getattr(self.backend, "model_info", None)
        # the API's model id without an alias: the GGUF's own name, as always (the label is not an id)
        self.alias = alias or (info.name if isinstance(info, ModelInfo) else model.name)
        if alias and isinstance(ref, LoadConfig) and hasattr(self.backend, "label"):
            # named as the library names it (models/names.py); its runs' metrics and messages too
            self.backend.label = display_name(alias)
            model = replace(model, name=self.backend.label)
        self.model = model
        with self._lock:
            self._loads[self.alias] += 1
        self._notify("loaded_with_id", load_id, model)

    def load_counts(self) -> dict[str, int]:
        """How many times each model was loaded on this service (any thread)."""
        with self._lock:
            return dict(self._loads)

    def unload(self) -> None:
        with self._model_change.changing():
            if self.backend is not None:
                self.backend.close()
            self.model = None
        self._notify("unloaded")

    def close(self) -> None:
        """Close the backend and forget it."""
        with self._model_change.changing():
            backend, self.backend, self._backend_kind = self.backend, None, None
            self.model = None
            if backend is not None:
                backend.close()

    # ----- metrics
    def live_recorder(self, t_start_ns: int, t_prefill_ns: int, n_ctx: int = 0) -> MetricsRecorder:
        """A run's live metrics recorder, described by the model loaded now."""
        model = self.model
        context = RunContext(
            model=model.name if model else "",
            quantization=model.quantization if model else None,
            backend=model.backend if model else "",
            threads=model.threads if model else None,
            gpu_layers=model.gpu_layers if model else None,
            n_ctx=n_ctx or (model.n_ctx or 0 if model else 0),
            connection=model.source if model and model.is_remote else None,
        )
        return MetricsRecorder(context, t_start_ns=t_start_ns, t_prefill_start_ns=t_prefill_ns)
