"""Compare models side by side: one conversation, up to its prompt, answered by 2–4 models with the
same sampling params and the same seed.

Local models run one after another, each in a backend of its own, inside one exclusive job of the
engine service (as the benchmark lab measures: on the engine thread, after the running answer, while
chat and API requests wait), with load progress per model. Remote models stream at the same time, each
on a thread of its own. Every stream keeps its own metrics. `cancel` stops everything: a load, a
stream, a job still waiting for its turn.

`restore`: the window's own local model, unloaded before the local runs (so only one local model holds
memory at a time) and loaded back when they end — however they end."""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.stopping import stopping_on
from ember_chat.engine.errors import EmberError, JobCancelled
from ember_chat.engine.inference.backend import InferenceBackend
from ember_chat.engine.inference.events import Finished, Token
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.prompt.attachments import conversation_refs, expand_attachments
from ember_chat.engine.inference.service.engine import EngineService

if TYPE_CHECKING:
    from ember_chat.engine.attachments.store import AttachmentStore

MIN_MODELS = 2
MAX_MODELS = 4


@dataclass(frozen=True)
class CompareTarget:
    """One column: what it is called (the library name, or remote:<connection>/<model>) and how to load it."""

    label: str
    ref: ModelRef

    @property
    def local(self) -> bool:
        return isinstance(self.ref, LoadConfig)


@dataclass(frozen=True)
class CompareAnswer:
    """How one model's answer ended: its text, why it ended, its metrics, or the error that stopped it."""

    text: str
    reason: str  # stop, length, cancelled, error, interrupted, ...
    metrics: GenerationMetrics | None
    error: str | None = None

    def metrics_dict(self) -> dict[str, Any] | None:
        return self.metrics.to_dict() if self.metrics is not None else None


class CompareListener:
    """What a comparison tells its window, from its worker threads. Override what you need."""

    def loading(self, index: int, fraction: float) -> None:
        """A local model's load progress (0..1)."""

    def started(self, index: int) -> None:
        """The model is loaded (or the server answered) and its answer starts."""

    def tokens(self, index: int, text: str, output_tokens: int) -> None:
        """More of the answer."""

    def finished(self, index: int, answer: CompareAnswer) -> None:
        """Always last for each column."""


def fixed_seed(params: SamplingParams) -> SamplingParams:
    """The params with a seed every model shares (a random one drawn now when none was set)."""
    return params if params.seed is not None else replace(params, seed=random.randrange(2**31 - 1))


def _new_backend(ref: ModelRef) -> InferenceBackend:
    if isinstance(ref, LoadConfig):
        from ember_chat.engine.inference.local.runtime import LocalRuntime  # llama.cpp: only where it runs

        return LocalRuntime()
    from ember_chat.engine.inference.remote.backend import RemoteBackend

    return RemoteBackend()


def answer_one(
    index: int,
    target: CompareTarget,
    messages: list[ChatMessage],
    params: SamplingParams,
    listener: CompareListener,
    cancel: threading.Event,
    template: str | None = None,
    attachment_store: AttachmentStore | None = None,
) -> CompareAnswer:
    """Load the target in a backend of its own, stream its answer, close it. Never raises. The
    messages' text attachments are put in the prompt as the chat does (whole, or the passages that
    fit this model's context), read from `attachment_store`; images go to the model as they are."""
    backend = _new_backend(target.ref)
    try:
        with stopping_on(cancel, backend.request_stop):
            if cancel.is_set():
                return CompareAnswer("", "cancelled", None)
            backend.load(target.ref, progress=lambda f: listener.loading(index, f), cancel=cancel)
            if cancel.is_set():
                return CompareAnswer("", "cancelled", None)
            if conversation_refs(messages):
                n_ctx = backend.description.n_ctx if backend.description is not None else None
                expanded = expand_attachments(messages, params, backend, n_ctx, attachment_store)
                messages = expanded[0] if expanded is not None else messages
            listener.started(index)
            parts: list[str] = []
            count = 0
            for ev in backend.chat(messages, params, template):
                if isinstance(ev, Token):
                    count += ev.count
                    if ev.text:
                        parts.append(ev.text)
                        listener.tokens(index, ev.text, count)
                elif isinstance(ev, Finished):
                    reason = "cancelled" if cancel.is_set() and ev.reason != "stop" else ev.reason
                    return CompareAnswer(ev.text, reason, ev.metrics, ev.error)
            return CompareAnswer("".join(parts), "error", None, "The answer ended without its end marker.")
    except EmberError as exc:
        if cancel.is_set():
            return CompareAnswer("", "cancelled", None)
        return CompareAnswer("", "error", None, str(exc))
    except Exception as exc:  # one model's failure must not end the others
        return CompareAnswer("", "error", None, f"Unexpected error while answering: {exc!r}")
    finally:
        backend.close()


def run_comparison(
    service: EngineService,
    targets: Sequence[CompareTarget],
    messages: list[ChatMessage],
    params: SamplingParams,
    listener: CompareListener | None = None,
    cancel: threading.Event | None = None,
    template: str | None = None,
    restore: tuple[ModelRef, str | None] | None = None,
    attachment_store: AttachmentStore | None = None,
) -> list[CompareAnswer]:
    """Answer `messages` with every target (same params, one seed: `fixed_seed` is applied) and
    return the answers in the targets' order. Blocks the calling thread until all have ended;
    `listener.finished` is called once per target, whatever happens. Attachments are read from
    `attachment_store` (the service's when None)."""
    if not targets or len(targets) > MAX_MODELS:  # (one runs when the others could not be found)
        raise EmberError(f"A comparison runs two to four models; {len(targets)} were chosen.")
    listener = listener or CompareListener()
    cancel = cancel or threading.Event()
    params = fixed_seed(params)
    store = attachment_store or service.attachment_store
    answers: list[CompareAnswer | None] = [None] * len(targets)

    def settle(index: int, answer: CompareAnswer) -> None:
        answers[index] = answer
        listener.finished(index, answer)

    def remote(index: int) -> None:
        settle(index, answer_one(index, targets[index], messages, params, listener, cancel, template, store))

    threads = [
        threading.Thread(target=remote, args=(i,), name=f"compare-remote-{i}", daemon=True)
        for i, t in enumerate(targets)
        if not t.local
    ]
    for thread in threads:
        thread.start()
    local = [i for i, t in enumerate(targets) if t.local]
    try:
        if local:
            _run_local(service, targets, local, messages, params, listener, cancel, template, settle, restore, store)
    finally:
        for thread in threads:
            thread.join()
    return [a if a is not None else CompareAnswer("", "cancelled", None) for a in answers]


def _run_local(
    service: EngineService,
    targets: Sequence[CompareTarget],
    local: list[int],
    messages: list[ChatMessage],
    params: SamplingParams,
    listener: CompareListener,
    cancel: threading.Event,
    template: str | None,
    settle: Callable[[int, CompareAnswer], None],
    restore: tuple[ModelRef, str | None] | None,
    store: AttachmentStore | None,
) -> None:
    done: set[int] = set()

    def work() -> None:
        for i in local:
            settle(i, answer_one(i, targets[i], messages, params, listener, cancel, template, store))
            done.add(i)

    if restore is not None:
        service.unload()  # before the job (the service's control queue keeps the order)
    try:
        job = service.run_exclusive(work, "Comparison", cancel, client="compare")
        with stopping_on(cancel, lambda: service.cancel_exclusive(job)), contextlib.suppress(JobCancelled):
            job.result()
    finally:
        for i in local:
            if i not in done:  # dropped before its turn, or the job failed
                settle(i, CompareAnswer("", "cancelled" if cancel.is_set() else "error", None))
        if restore is not None:
            service.load(*restore)
