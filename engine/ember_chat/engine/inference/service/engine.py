"""The engine service: owns the backend on its own thread and serves every client (the window, the
API server, the CLI) through one bounded, fair queue of generation requests.

- One model. Requests carry ids; `cancel(id)` cancels that request only (a queued one is dropped, a
  running one is stopped within one token), never another.
- Continuous batching: when the backend decodes several sequences together (`batch_slots > 1`) and
  the next request can be batched (`can_batch`), the engine thread runs a batch session: every
  active run is advanced until it wants the decoder's next step, then one `step()` decodes for all;
  between steps waiting batchable requests join (in the same round-robin order, up to the slots),
  and a cancelled run ends within a token while the others go on. A waiting request that cannot be
  batched (tools, grammar, images, logprobs), a load or unload, or an exclusive job stops the
  admissions: it runs once the active runs have ended. The window's request is one more run, and the
  last slot is the window's alone: however many API requests run, the window's chat never waits.
- Fairness: each client kind ("window", "api", …) has its own line, served round-robin, so a burst
  of API calls cannot starve the window's chat and vice versa. The bound is per client kind: an API
  (or CLI) request is refused with `QueueFull` once `queue_limit` requests wait; the window is never
  refused (the user pressed Send, and the window has one answer at a time), so waiting API requests
  cannot make the window's Send fail.
- Loads and unloads go ahead of waiting generations. Each load has an id (`load` returns it) and a
  cancel event of its own, so cancelling one load never touches another (a Cancel followed by a new
  pick cannot revive the cancelled load), and listeners can tell a superseded load's events apart.
- Exclusive jobs (the benchmark lab): `run_exclusive(fn)` runs `fn` on the engine thread after the
  running generation, ahead of waiting ones, and every request waits until it ends, so what it
  measures is the machine without Ember's own traffic. A job still waiting can be dropped at once.
- Results reach the client through its `GenerationSink`, called on the engine thread: token text in
  batches (`batch_s`, 0 for every token) and live metrics snapshots from the same `MetricsRecorder`
  computation as the final record. Errors are data: `failed(message)` then `finished(...)`.

No Qt here: the Qt bridge turns these callbacks into signals.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ember_chat.engine.core.instance import new_server_id
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.errors import InvalidParameter, NoModelLoaded, QueueFull
from ember_chat.engine.inference.backend import InferenceBackend, ModelDescription
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.prompt.attachments import TokenCount
from ember_chat.engine.inference.service.model import ServiceModel, default_backend_factory
from ember_chat.engine.inference.service.queue import UNBOUNDED_CLIENTS, RequestQueue
from ember_chat.engine.inference.service.runs import Run, batch_slots, batchable, step

if TYPE_CHECKING:
    from ember_chat.engine.attachments.store import AttachmentStore
    from ember_chat.engine.core.embeddings import EmbeddingInput, Embeddings, Ranking
    from ember_chat.engine.core.messages import ChatMessage
    from ember_chat.engine.core.params import SamplingParams
    from ember_chat.engine.core.tools import ToolRequest
    from ember_chat.engine.inference.events import AttachmentsPlanned
    from ember_chat.engine.inference.kv.snapshots import SnapshotStore

from ember_chat.engine.inference.service.requests import (  # (the values clients speak, re-exported here)
    METRICS_SNAPSHOT_S,
    TOKEN_BATCH_S,
    ExclusiveJob,
    GenerationRequest,
    GenerationSink,
    QueueState,
    RequestRecord,
    ServiceListener,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = [
    "METRICS_SNAPSHOT_S",
    "TOKEN_BATCH_S",
    "EngineService",
    "ExclusiveJob",
    "GenerationRequest",
    "GenerationSink",
    "QueueState",
    "RequestRecord",
    "ServiceListener",
]

RECENT_REQUESTS = 50


class EngineService:
    def __init__(
        self,
        backend_factory: Callable[[ModelRef], InferenceBackend] = default_backend_factory,
        queue_limit: int = 8,
    ) -> None:
        self.queue_limit = queue_limit
        self.backend_factory = backend_factory  # (a model pool makes its other models' services with it)
        self._lock = threading.Condition()
        self._control: deque[Callable[[], None]] = deque()
        self._queue = RequestQueue()  # waiting and running requests, their records (under the lock)
        self._jobs: list[ExclusiveJob] = []  # exclusive jobs waiting to run
        self._exclusive: ExclusiveJob | None = None  # the one running
        self._closing = False
        self._ids = itertools.count(1)
        self._model_host = ServiceModel(backend_factory, self._lock, self._notify)
        self.server_id = new_server_id()  # its API server sends it: a connection back to it is refused
        self._listeners: list[ServiceListener] = []
        self.recent: deque[RequestRecord] = deque(maxlen=RECENT_REQUESTS)
        self.attachment_store: AttachmentStore | None = None  # for requests that carry no store of their own
        self._forgets: list[threading.Event] = []  # forget_conversations() calls the engine thread has not done
        self._ended = False  # the engine thread has closed the model and ends
        # (KV cells used, context size) of the loaded model as the engine thread last published them
        # (after each job, load and batch step), so /metrics reads them without waiting for that thread
        self._kv_cells: tuple[int, int] | None = None
        self._thread = threading.Thread(target=self._run, name="ember-engine", daemon=True)
        self._thread.start()

    # ----- listeners and state
    def add_listener(self, listener: ServiceListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: ServiceListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _notify(self, method: str, *args: object) -> None:
        for listener in list(self._listeners):
            try:
                getattr(listener, method)(*args)
            except Exception:  # a broken listener must not kill the engine thread
                log.exception("engine listener %s failed", method)

    @property
    def model(self) -> ModelDescription | None:
        return self._model_host.model

    @property
    def model_alias(self) -> str | None:
        """The name clients know the model by (the library name, e.g. "starter")."""
        return self._model_host.alias

    @property
    def _backend(self) -> InferenceBackend | None:  # (the engine thread's; bench.kv_restore reads it)
        return self._model_host.backend

    @property
    def snapshot_store(self) -> SnapshotStore | None:
        """Where the backend keeps conversations' KV snapshots (None: none kept); given to every
        backend the service creates, and to the current one on the engine thread (after the running
        generations, like a load: a runtime is used by one thread)."""
        return self._model_host.snapshots

    @snapshot_store.setter
    def snapshot_store(self, store: SnapshotStore | None) -> None:
        self._model_host.snapshots = store
        self._submit_control(self._model_host.give_snapshots)

    def forget_conversations(self) -> threading.Event:
        """Chats were deleted for good: nothing the model keeps of conversations may stay. At once, on the
        caller's thread (it deletes files: never the GUI thread), the saved conversation caches in memory
        and on disk; then on the engine thread, after the running generations (as a load), the live
        sequences and the texts kept for prefix reuse, dropped without being saved, and the store
        cleared again (a sequence saved meanwhile). Caches are found by tokens, not by chat, so all go:
        a chat that comes back is read again. Returns an event set once all is done (also when the
        service closes first: closing does it before the model is unloaded, which would save them)."""
        done = threading.Event()
        with self._lock:
            self._forgets.append(done)
            ended = self._ended
            if not self._closing:
                self._control.append(self._forget_now)
                self._lock.notify_all()
        store = self.snapshot_store
        if store is not None:
            store.clear()
        if ended:  # (the engine thread has ended: no model is left to hold anything)
            self._forget_now()
        return done

    def _forget_now(self) -> None:
        with self._lock:
            asked, self._forgets = self._forgets, []
        if not asked:
            return
        forget = getattr(self._backend, "forget_conversations", None)  # (a remote backend keeps none here)
        try:
            if callable(forget):
                forget()
        except Exception:  # (the engine thread goes on; the store is still cleared)
            log.exception("dropping the model's conversations failed")
        store = self.snapshot_store
        if store is not None:
            store.clear()
        for done in asked:
            done.set()

    @property
    def running(self) -> bool:
        """The engine thread is alive (False once `close()` has returned)."""
        return self._thread.is_alive()

    def kv_cells(self) -> tuple[int, int] | None:
        """(KV cells the loaded model's sequences hold, its context size), as of the engine thread's last
        job or batch step; None without a local model (a remote one keeps its cells elsewhere). Any thread."""
        return self._kv_cells

    def _publish_kv_cells(self) -> None:
        """On the engine thread: the KV cells the backend's bookkeeping says are held now."""
        backend, model = self._backend, self.model
        used = getattr(backend, "kv_cells_used", None)  # (the local runtime's; a remote backend has none)
        if backend is None or used is None or not backend.loaded or model is None or not model.n_ctx:
            self._kv_cells = None
        else:
            self._kv_cells = (used(), model.n_ctx)

    def queue_state(self) -> QueueState:
        with self._lock:
            return self._queue.state(self._exclusive)

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` by the loaded model's tokenizer (an estimate when there is none); see
        `measure_tokens`."""
        return self.measure_tokens(text).tokens

    def measure_tokens(self, text: str) -> TokenCount:
        """Tokens in `text` and whether that is an estimate. Callable from any thread: the tokenizer is
        only read, never while the model is being replaced or closed (then the count is estimated). A
        remote server's tokenizer is an HTTP request: call it off the GUI thread."""
        return self._model_host.measure_tokens(text)

    def plan_attachments(
        self, messages: list[ChatMessage], params: SamplingParams, store: AttachmentStore | None = None
    ) -> AttachmentsPlanned | None:
        """How a request with these messages would read its text attachments — whole or by retrieval,
        each file's tokens and passages — by the same computation a generation makes (the window's
        chips say it before sending); None without a model or without text attachments. `store`: the
        service's own by default. Any thread, off the GUI thread (a long file takes a while)."""
        store = store or self.attachment_store
        if store is None:
            return None
        return self._model_host.plan_attachments(messages, params, store)

    def tokenize(self, text: str, *, add_special: bool = False) -> list[int] | None:
        """The loaded model's tokens for `text`, as llama-server's /tokenize gives them (special tokens'
        text read as those tokens; `add_special`: BOS first when the model adds one), or None without a
        local model (none loaded, a remote one, or one being replaced). Callable from any thread."""
        return self._model_host.tokenize(text, add_special=add_special)

    def prompt_tokens(
        self, messages: list[ChatMessage], params: SamplingParams, tools: ToolRequest | None = None
    ) -> int | None:
        """The tokens of the prompt a chat request with these messages, params and tools would evaluate,
        by the same rendering as its generation, even one over the context (None without a local model).
        Callable from any thread (the API's count_tokens)."""
        return self._model_host.prompt_tokens(messages, params, tools)

    def token_pieces(self, tokens: list[int]) -> list[bytes] | None:
        """Each token's bytes by the loaded model's vocabulary (None as for `tokenize`); InvalidParameter
        for an id outside it. Callable from any thread."""
        return self._model_host.token_pieces(tokens)

    def embed(self, inputs: list[EmbeddingInput], client: str = "api", label: str = "Embeddings") -> Embeddings:
        """The loaded model's vectors of these inputs (the local runtime's `embed`), computed on the engine
        thread as an exclusive job: after the running generations, never at the same time as one on the
        same weights and threads; QueueFull when `queue_limit` requests already wait (as `submit`),
        NoModelLoaded without a model, InvalidParameter for a backend that has no embeddings or an input
        it refuses (BadEmbeddingInput names which); a remote model's server is asked (RemoteError).
        Blocks until done: call it off the GUI thread."""
        embed = lambda stopped: self._local_call("embed", "computes no embeddings")(inputs, stopped)  # noqa: E731
        return self._api_job(embed, label, client)

    def rerank(self, query: str, documents: list[str], client: str = "api", label: str = "Rerank") -> Ranking:
        """A reranker's score of each document against `query` (the local runtime's `rerank`), run as
        `embed` runs (an exclusive job, QueueFull, NoModelLoaded); InvalidParameter for a model that is not
        a reranker or a backend that scores nothing (a remote one), BadEmbeddingInput naming a document."""
        rerank = lambda stopped: self._local_call("rerank", "scores no documents")(query, documents, stopped)  # noqa: E731
        return self._api_job(rerank, label, client)

    def _api_job(self, work: Callable[[Callable[[], bool]], T], label: str, client: str) -> T:
        """`work(stopped)` on the engine thread as an exclusive job, bounded by `queue_limit` like `submit`;
        `stopped` says the job was cancelled (its engine closing). Blocks until done."""
        with self._lock:  # (re-entrant: run_exclusive takes it too)
            waiting = self._queue.count() + len(self._jobs)
            if client not in UNBOUNDED_CLIENTS and waiting >= self.queue_limit:
                raise QueueFull(f"{waiting} requests are already waiting for the model; try again shortly.")
            jobs: list[ExclusiveJob] = []  # (the job is set before it can run: the engine thread needs the lock)
            job = self.run_exclusive(lambda: work(jobs[0].cancel.is_set), label, client=client)
            jobs.append(job)
        return job.result()  # type: ignore[no-any-return]

    def _local_call(self, name: str, missing: str) -> Callable[..., T]:
        """The loaded backend's method `name` (engine thread): NoModelLoaded without a model,
        InvalidParameter ("This model's backend <missing>.") for a backend without it."""
        backend = self._backend
        if backend is None or not backend.loaded:
            raise NoModelLoaded("No model is loaded. Load one first.")
        method = getattr(backend, name, None)  # (the local runtime's; the remote backend has embed only)
        if not callable(method):
            raise InvalidParameter(f"This model's backend {missing}.")
        return method  # type: ignore[no-any-return]

    # ----- model
    def load(self, ref: ModelRef, alias: str | None = None) -> int:
        """Load a model (after the running generation, ahead of waiting ones); returns the load's id.
        `alias`: the name clients know it by (the library name, e.g. "starter"); the API server serves
        it as the id."""
        load_id, cancel = self._model_host.new_load()
        self._submit_control(lambda: self._model_host.load(load_id, ref, alias, cancel, self.server_id))
        return load_id

    def load_counts(self) -> dict[str, int]:
        """How many times each model was loaded on this service, by the name clients know it by (its
        alias): the API server's /metrics counts loads with it. Any thread."""
        return self._model_host.load_counts()

    def cancel_load(self, load_id: int | None = None) -> None:
        """Cancel one load (waiting or running), or with no id every load not finished yet; a load
        started afterwards is not affected."""
        self._model_host.cancel_load(load_id)

    def unload(self) -> None:
        self._submit_control(self._model_host.unload)

    def _submit_control(self, action: Callable[[], None]) -> None:
        with self._lock:
            if self._closing:
                return
            self._control.append(action)
            self._lock.notify_all()

    # ----- exclusive jobs
    def run_exclusive(
        self,
        fn: Callable[[], Any],
        label: str = "Benchmark",
        cancel: threading.Event | None = None,
        client: str = "bench",
    ) -> ExclusiveJob:
        """Run `fn()` on the engine thread with the engine to itself: after the running generation,
        ahead of waiting ones (loads and jobs asked for earlier go first); every request submitted
        meanwhile waits until it ends. `cancel` (the job's own event when None) is set by
        `cancel_exclusive` and `close`, and `fn` must stop soon after. Wait with `job.result()`."""
        job = ExclusiveJob(fn, label, client, cancel or threading.Event())
        with self._lock:
            if self._closing:
                raise QueueFull("Ember is shutting down.")
            job.id = next(self._ids)
            self._jobs.append(job)
            self._control.append(lambda: self._run_job(job))
            self._lock.notify_all()
        return job

    def cancel_exclusive(self, job: ExclusiveJob) -> None:
        """Drop a waiting job at once (its result raises JobCancelled), or ask a running one to stop."""
        with self._lock:
            waiting = job in self._jobs
            if waiting:
                self._jobs.remove(job)  # its entry in the control queue finds it gone and does nothing
        job.cancel.set()
        if waiting:
            job._drop()

    def _run_job(self, job: ExclusiveJob) -> None:
        with self._lock:
            if job not in self._jobs:  # dropped while waiting
                return
            self._jobs.remove(job)
            self._exclusive = job
            state = self._queue.state(self._exclusive)
        self._notify("queue_changed", state)
        try:
            job._value = job.fn()
        except Exception as exc:  # the job's caller gets it from result(); the engine thread goes on
            job._error = exc
        finally:
            with self._lock:
                self._exclusive = None
                state = self._queue.state(self._exclusive)
            job.done.set()
            self._notify("queue_changed", state)

    # ----- requests
    def submit(self, request: GenerationRequest) -> int:
        """Queue a generation; returns its id. Raises QueueFull when a bounded client kind finds the
        queue at its limit (the window's requests are never refused), or while shutting down."""
        with self._lock:
            if self._closing:
                raise QueueFull("Ember is shutting down.")
            if request.client not in UNBOUNDED_CLIENTS and self._queue.count() >= self.queue_limit:
                raise QueueFull(f"{self._queue.count()} requests are already waiting for the model; try again shortly.")
            request.id = next(self._ids)
            self._queue.add(request)
            state = self._queue.state(self._exclusive)
            self._lock.notify_all()
        self._notify("queue_changed", state)
        return request.id

    def cancel(self, request_id: int) -> None:
        """Cancel one request: drop it if it waits, stop it within one token if it runs (a batched run
        alone: the others in its batch go on)."""
        with self._lock:
            run = self._queue.active.get(request_id)
            if run is not None:
                run.req.cancelled.set()
                if not run.batched and self._backend is not None:
                    self._backend.request_stop()  # (stops whatever the backend runs: only for a run alone)
                return
            dropped = self._queue.drop(request_id)
            if dropped is None:
                return
            dropped.cancelled.set()
            state = self._queue.state(self._exclusive)
        dropped.sink.finished(StopReason.CANCELLED, "", None, [])
        self._done(dropped, StopReason.CANCELLED, None, None)
        self._notify("queue_changed", state)

    def cancel_all(self) -> None:
        with self._lock:
            ids = self._queue.ids()
        for rid in ids:
            self.cancel(rid)

    def _start_locked(self, req: GenerationRequest, batched: bool) -> Run:
        run = Run(req, batched, self._model_host.live_recorder, self._done)
        self._queue.start(run)
        return run

    # ----- the engine thread
    def _run(self) -> None:
        while True:
            run: Run | None = None
            with self._lock:
                while not (self._closing or self._control or self._queue.count()):
                    self._lock.wait()
                if self._control:
                    action: Callable[[], None] | None = self._control.popleft()
                elif self._closing:
                    break
                else:
                    action = None
                    req = self._queue.next()
                    if req is not None:
                        backend = self._backend
                        batched = batch_slots(backend) > 1 and batchable(backend, req)
                        run = self._start_locked(req, batched)
                    state = self._queue.state(self._exclusive)
            if action is not None:
                action()
                self._publish_kv_cells()
                continue
            if run is None:
                continue
            self._notify("queue_changed", state)
            self._session(run)
            self._publish_kv_cells()
        self._forget_now()  # (asked, not done yet: before the model's close saves its sequences)
        self._model_host.close()
        self._kv_cells = None
        with self._lock:
            self._ended = True
        self._forget_now()  # (asked while the model closed: what its close saved goes)

    def _session(self, first: Run) -> None:
        """Run `first` and, when it is batched, every batchable request admitted while it runs: all
        active runs are advanced to the decoder's next step, one `step()` decodes for them all, and
        newcomers join between steps, until no run is left (see the module's docstring)."""
        backend = self._backend
        fresh, stepped, waiting = [first], [], []  # (stepped: the runs the last step decoded for)
        try:
            while True:
                begun = [run for run in fresh if run.begin(backend, self.attachment_store)]
                waiting += [run for run in stepped + begun if run.advance()]
                self._retire()
                fresh = self._admit(backend, len(waiting)) if first.batched else []
                if not fresh:
                    if not waiting:  # (a run alone never waits for a step)
                        return
                    stepped, waiting = step(backend, waiting), []
                    self._publish_kv_cells()
                else:
                    stepped = []  # (newcomers go to their first step before it is taken)
        finally:
            with self._lock:
                left = list(self._queue.active.values())
            for run in left:  # (only when the engine thread itself is going down)
                run.abandon()
            self._retire()

    def _admit(self, backend: InferenceBackend | None, active: int) -> list[Run]:
        """Waiting batchable requests that join the batch now (round-robin, up to the free slots, the
        last of which only the window's request takes); none while a load, an unload, an exclusive job
        or a request that cannot be batched waits."""
        slots = batch_slots(backend)
        admitted: list[Run] = []
        with self._lock:
            while active + len(admitted) < slots and not (self._control or self._closing):
                heads = self._queue.heads()
                if not heads or not all(batchable(backend, req) for req in heads):
                    break
                others = self._queue.running_bounded()
                req = self._queue.next(window_only=others >= slots - 1)
                if req is None:
                    break
                admitted.append(self._start_locked(req, batched=True))
            state = self._queue.state(self._exclusive)
        if admitted:
            self._notify("queue_changed", state)
        return admitted

    def _retire(self) -> None:
        """Runs that have ended leave the running set."""
        with self._lock:
            if not self._queue.retire():
                return
            state = self._queue.state(self._exclusive)
        self._notify("queue_changed", state)

    def _done(self, req: GenerationRequest, reason: str, metrics: GenerationMetrics | None, error: str | None) -> None:
        with self._lock:
            old = self._queue.records.pop(req.id, None)
        record = RequestRecord(
            req.id, req.client, req.label, "done", reason, metrics, error, old.t_submitted if old else time.time()
        )
        self.recent.append(record)
        self._notify("request_done", record)

    # ----- shutdown
    def close(self) -> None:
        """Cancel everything, stop the thread, wait for it, close the model (in that order)."""
        self.cancel_load()
        self.cancel_all()
        with self._lock:
            self._closing = True
            self._control.clear()
            dropped, self._jobs = self._jobs, []
            if self._exclusive is not None:
                self._exclusive.cancel.set()
            self._lock.notify_all()
        for job in dropped:
            job.cancel.set()
            job._drop()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
