"""The models Ember serves by name, loaded when a request names them: one `EngineService` per loaded
model (each with its own engine thread, parallel slots, queue and KV snapshots, so one model's queue
never holds another's), within a memory budget, each unloaded after an idle time to live, the least
recently used idle one first when a new one needs the room.

- `lease(name)` gives the service serving `name` (its library name, alias or file stem), loading it
  first when it is not loaded; two requests for a model not loaded yet load it once (the second waits
  for the first's load). A lease held is a model in use: it is never evicted or unloaded by the TTL
  while a lease is out, and its idle time counts from the last lease's end.
- The window's model (or `serve --model`'s: `pin`) is in the table too, as it was loaded: API requests
  use it, and it is never evicted by API traffic (the window unloads it, or loads another).
- What does not fit even after evicting every idle model waits up to `busy_wait_s` for the models in use
  to be done with when that would make room (a client's next request may arrive before its last
  answer's lease has ended; two clients taking turns on two models that do not fit together), else is
  refused with the memory needed and free (`ModelDoesNotFit`); nothing busy is evicted; an unknown name
  (`ModelNotFound`) names the models that exist; a load that fails (a damaged file) fails that request
  only (`ModelLoadFailed`).
- A remote model (`remote:<connection>/<model id>`, from a catalog such as `remote_catalog`'s) is served
  the same way, by an engine on the remote backend: it takes no memory here, counts in neither the
  budget nor `models_max`, and is never evicted to make room; its idle TTL closes its engine.
- A TTL thread unloads idle models when their time to live ends (`ttl_s` per lease, as LM Studio's
  `ttl` and Ollama's `keep_alive` give it, else the pool's default); `close()` unloads every model the
  pool loaded and joins the thread.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ember_chat.engine.core.refs import ModelRef, RemoteModelRef
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.pool.catalog import prepare_starter
from ember_chat.engine.inference.pool.memory import NOTHING, Footprint, MemoryBudget, footprint, mb
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.inference.service.requests import ServiceListener

log = logging.getLogger(__name__)

MAX_REMOTE = 16  # engines on remote models open at once (each a thread; nothing else bounds them)
DEFAULT_TTL_S = 3600.0  # an hour, as LM Studio's JIT-loaded models (its default TTL)
BUSY_WAIT_S = 10.0  # how long a model that needs the room of models in use waits for them to be done with


class ModelNotFound(EmberError):
    def __init__(self, name: str, names: list[str]) -> None:
        shown = ", ".join(repr(n) for n in names) if names else "none (no model is installed)"
        super().__init__(f"The model {name!r} does not exist; the models that do: {shown}.")
        self.names = names


class ModelDoesNotFit(EmberError):
    """Even with every idle model unloaded, the model needs more memory than the budget leaves."""


class ModelLoadFailed(EmberError):
    pass


@dataclass
class PoolModel:
    """One model in the table (under the pool's lock)."""

    name: str
    service: EngineService
    memory: Footprint
    loaded_by: str  # "window" or "api"
    ready: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    leases: int = 0
    last_used: float = 0.0
    ttl_s: float | None = None
    why: str = ""  # why it is unloaded, for the log (set when it is)
    connection: str | None = None  # a remote model's connection: no memory here, never evicted for room

    @property
    def state(self) -> str:
        return "loaded" if self.ready.is_set() and self.error is None else "loading"


@dataclass(frozen=True)
class ModelState:
    """A row of `states()`: what a program (GET /v1/models, /api/models, `ember-chat models ps`) is told."""

    name: str
    state: str  # "loaded", "loading", "not loaded", or "remote" (a remote model no engine holds open)
    loaded_by: str | None = None  # "window" or "api"
    memory_bytes: int = 0
    n_ctx: int | None = None
    busy: bool = False
    idle_s: float | None = None
    ttl_s: float | None = None
    model: ModelDescription | None = None
    connection: str | None = None  # a remote model's connection


class _LoadWaiter(ServiceListener):
    def __init__(self) -> None:
        self.load_id: int | None = None
        self.done = threading.Event()
        self.model: ModelDescription | None = None
        self.error: str | None = None
        self._early: list[tuple[int, ModelDescription | None, str | None]] = []
        self._lock = threading.Lock()

    def expect(self, load_id: int) -> None:
        with self._lock:
            self.load_id = load_id
            early, self._early = self._early, []
        for got_id, model, error in early:
            self._end(got_id, model, error)

    def _end(self, load_id: int, model: ModelDescription | None, error: str | None) -> None:
        with self._lock:
            if self.load_id is None:  # (the engine thread answered before `load` returned its id)
                self._early.append((load_id, model, error))
                return
            if load_id != self.load_id:
                return
        self.model, self.error = model, error
        self.done.set()

    def loaded_with_id(self, load_id: int, model: ModelDescription) -> None:
        self._end(load_id, model, None)

    def load_failed_with_id(self, load_id: int, message: str) -> None:
        self._end(load_id, None, message)


class ModelPool:
    def __init__(
        self,
        catalog: Callable[[], dict[str, ModelRef]],
        budget: MemoryBudget | None = None,
        default_ttl_s: float | None = DEFAULT_TTL_S,
        service_factory: Callable[[], EngineService] = EngineService,
        memory_of: Callable[[ModelRef], Footprint] = footprint,
        on_change: Callable[[str], None] | None = None,
        lookup: Callable[[str], ModelRef | None] | None = None,
        prepare: Callable[[ModelRef], None] = prepare_starter,
        busy_wait_s: float = BUSY_WAIT_S,
    ) -> None:
        """`catalog()`: every model that can be loaded, by every name a request may use for it (its
        library name, alias, file stem), each to what loading it means; a ref's first name is the one
        the table shows. `on_change`: told (on any thread) what changed, in a sentence for a log, after a model
        is loaded or unloaded. `lookup`: a ref for a name the catalog does not list (a remote model
        named `remote:<connection>/<id>` while its connection's list is stale), else None. `prepare(ref)`:
        before a model not loaded is measured and loaded (a starter assembled on its first use).
        `busy_wait_s`: how long a model waits for the room of models in use before it is refused."""
        self._catalog = catalog
        self.busy_wait_s = busy_wait_s
        self._prepare = prepare
        self._lookup = lookup
        self.budget = (budget or MemoryBudget()).resolved()
        self.default_ttl_s = default_ttl_s
        self._factory = service_factory
        self._memory_of = memory_of
        self._on_change = on_change
        self._lock = threading.Condition()
        self._models: dict[str, PoolModel] = {}  # by the name the table shows
        self._window: tuple[str, EngineService, Footprint, str] | None = None  # (the pinned model)
        self._closing = False
        self._unloading: list[PoolModel] = []  # out of the table, still being closed: their memory is not free yet
        self.loads = 0  # models this pool loaded (for /metrics)
        self.evictions = 0  # idle models unloaded to make room or at the end of their TTL
        self.loads_by_model: Counter[str] = Counter()
        self.evictions_by_model: Counter[str] = Counter()
        self._reaper = threading.Thread(target=self._reap, name="ember-pool-ttl", daemon=True)
        self._reaper.start()

    # ----- names
    def _names(self) -> dict[str, tuple[str, ModelRef]]:
        """Every name a request may use → (the table's name, the ref)."""
        names: dict[str, tuple[str, ModelRef]] = {}
        shown: dict[ModelRef, str] = {}
        for name, ref in self._catalog().items():
            names.setdefault(name, (shown.setdefault(ref, name), ref))
        return names

    def resolve(self, name: str) -> tuple[str, ModelRef]:
        """(the table's name, what loading it means) for any name of an installed model; ModelNotFound."""
        names = self._names()
        if name in names:
            return names[name]
        ref = self._lookup(name) if self._lookup is not None else None
        if ref is not None:
            return name, ref
        raise ModelNotFound(name, sorted({shown for shown, _ref in names.values()}))

    # ----- the window's model
    def pin(
        self, name: str | None, service: EngineService, loaded_by: str = "window", memory: Footprint | None = None
    ) -> None:
        """`service` (the window's, or `serve --model`'s) has loaded `name` (None: it has none): requests
        for that name use it, and the pool never unloads it. `memory`: what it takes (else estimated from
        the catalog's settings for it)."""
        if name is not None:
            try:  # under the table's name (`starter` and its file are one model, not two)
                name, ref = self.resolve(name)
                memory = memory if memory is not None else self._memory_of(ref)
            except EmberError:  # (a model outside the library: a file path, a remote model)
                pass
        with self._lock:
            self._window = (name, service, memory or NOTHING, loaded_by) if name else None
            self._lock.notify_all()  # (a request waiting for room: the window's model changed)
        log.info("%s", f"{name} is the {loaded_by}'s model" if name else f"the {loaded_by} has no model")

    # ----- leases
    @contextlib.contextmanager
    def lease(self, name: str, ttl_s: float | None = None) -> Iterator[EngineService]:
        """The service serving `name`, loaded first when it is not (ModelNotFound, ModelDoesNotFit,
        ModelLoadFailed). `ttl_s`: how long it stays loaded once idle (0: unloaded when idle; inf: kept;
        None: as it was, else the pool's default)."""
        entry = self._acquire(name, ttl_s)
        if isinstance(entry, EngineService):  # the window's own model
            yield entry
            return
        try:
            yield entry.service
        finally:
            with self._lock:
                entry.leases -= 1
                entry.last_used = time.monotonic()
                self._lock.notify_all()  # (the TTL thread looks again)

    def _acquire(self, name: str, ttl_s: float | None) -> PoolModel | EngineService:
        shown, ref = self.resolve(name)
        new = False
        with self._lock:
            known = shown in self._models or (self._window is not None and self._window[0] == shown)
        # (outside the lock: it reads the file's header, and with GPU layers asks nvidia-smi)
        if not known:
            try:
                self._prepare(ref)
            except EmberError as exc:
                raise ModelLoadFailed(str(exc)) from exc
        wanted = None if known else self._memory_of(ref)
        with self._lock:
            if self._closing:
                raise EmberError("Ember is closing.")
            if self._window is not None and self._window[0] == shown:
                return self._window[1]
            entry = self._models.get(shown)
            if entry is None:
                if wanted is None:  # (unloaded since: rare)
                    wanted = self._memory_of(ref)
                remote = ref.endpoint.name if isinstance(ref, RemoteModelRef) else None
                if not remote:  # (a remote model takes no room)
                    self._make_room(shown, wanted)  # (may let go of the lock while idle models close)
                else:
                    self._make_remote_room(shown)
                if self._window is not None and self._window[0] == shown:  # (pinned meanwhile)
                    return self._window[1]
                entry = self._models.get(shown)  # (another request may have made it meanwhile)
            if entry is None:
                entry = PoolModel(shown, self._factory(), wanted, "api", connection=remote)
                self._models[shown] = entry
                new = True
            entry.leases += 1
            if ttl_s is not None:
                entry.ttl_s = ttl_s
        if new:
            self._load(entry, ref)
        entry.ready.wait()
        if entry.error is not None:
            with self._lock:
                entry.leases -= 1
                self._lock.notify_all()
            raise ModelLoadFailed(entry.error)
        return entry

    def _held(self, in_use: bool = True) -> tuple[Footprint, int]:
        """The memory and the number of models held: the pinned one, those closing and (`in_use`) the table's."""
        held, count = NOTHING, 0
        if self._window is not None:
            held, count = self._window[2], 1
        for entry in [*(self._models.values() if in_use else ()), *self._unloading]:
            if entry.connection is None:  # (remote models count in neither the memory nor --models-max)
                held, count = held + entry.memory, count + 1
        return held, count

    def _make_room(self, name: str, wanted: Footprint) -> None:
        """Unload idle models, least recently used first, until `wanted` fits (called with the lock held;
        it is let go while each closes, and while models others are unloading finish). ModelDoesNotFit
        when even all idle models would not do, and the models in use, once done with, would not either
        or are not done with within `busy_wait_s`."""
        deadline, said = time.monotonic() + self.busy_wait_s, False
        while True:
            if self._closing:
                raise EmberError("Ember is closing.")
            if name in self._models or (self._window is not None and self._window[0] == name):
                return  # (another request loaded it, or the window did, while this one waited)
            held, count = self._held()  # (models still closing count: their memory is not free yet)
            if self.budget.room_for(held, wanted, count):
                return
            idle = [e for e in self._models.values() if e.leases == 0 and e.ready.is_set() and e.connection is None]
            left = deadline - time.monotonic()
            done_with, done_count = self._held(in_use=False)  # (as it is once the models in use are idle)
            if idle:
                entry = min(idle, key=lambda e: e.last_used)
                entry.why = f"idle, to make room for {name}"
                self._close_unlocked(entry)
            elif self._unloading:
                self._lock.wait()  # (notified when one has closed)
            elif left > 0 and self.budget.room_for(done_with, wanted, done_count):
                if not said:  # (told with the lock let go, as an unload is: the listener may ask the pool)
                    said = True
                    busy = ", ".join(sorted(e.name for e in self._models.values() if e.connection is None))
                    self._lock.release()
                    try:
                        self._changed(f"{name} waits up to {self.busy_wait_s:g} s for {busy} (in use) to make room")
                    finally:
                        self._lock.acquire()
                    continue  # (the table may have changed meanwhile)
                self._lock.wait(left)  # (notified when a lease ends: the model is idle, evicted next time round)
            else:
                raise ModelDoesNotFit(self._no_room(name, wanted, held, count, self.busy_wait_s if said else None))

    def _make_remote_room(self, name: str) -> None:
        """At most MAX_REMOTE engines on remote models at once (each is a thread; a client may name any
        id of a connection): the least recently used idle one is closed for a new one; all busy → 503."""
        while True:
            if self._closing:
                raise EmberError("Ember is closing.")
            remote = [e for e in self._models.values() if e.connection is not None]
            if len(remote) < MAX_REMOTE:
                return
            idle = [e for e in remote if e.leases == 0 and e.ready.is_set()]
            if not idle:
                raise ModelDoesNotFit(f"The model {name!r} cannot be opened: {len(remote)} remote models are in use, "
                                      f"and the server holds at most {MAX_REMOTE} at once.")  # fmt: skip
            entry = min(idle, key=lambda e: e.last_used)
            entry.why = f"idle, to make room for {name}"
            self._close_unlocked(entry)

    def _close_unlocked(self, entry: PoolModel, evicted: bool = True) -> None:
        """Take `entry` out of the table and close it, letting go of the lock (held by the caller) while it
        closes; its memory counts until it has. `evicted`: by the pool (room, TTL), not by a request."""
        del self._models[entry.name]
        self._unloading.append(entry)
        if evicted:
            self.evictions += 1
            self.evictions_by_model[entry.name] += 1
        self._lock.release()
        try:
            self._unload(entry)
        finally:
            self._lock.acquire()
            self._unloading.remove(entry)
            self._lock.notify_all()

    def _no_room(self, name: str, wanted: Footprint, held: Footprint, count: int, waited_s: float | None) -> str:
        """Why `name` is refused; `waited_s`: how long it waited for the models in use (None: it did not)."""
        b = self.budget
        waited = f" (this request waited {waited_s:g} s for them)" if waited_s is not None else ""
        if b.models_max is not None and count + 1 > b.models_max:
            return (f"The model {name!r} cannot be loaded: {count} models are loaded and in use, and the "
                    f"server holds at most {b.models_max} at once (--models-max){waited}.")  # fmt: skip
        if b.ram_bytes is not None and held.ram_bytes + wanted.ram_bytes > b.ram_bytes:
            free = max(0, b.ram_bytes - held.ram_bytes)
            return (f"The model {name!r} needs about {mb(wanted.ram_bytes)} of memory and the memory budget "
                    f"leaves {mb(free)} of {mb(b.ram_bytes)} while the models in use stay loaded{waited}.")  # fmt: skip
        free = max(0, (b.vram_bytes or 0) - held.vram_bytes)
        return (f"The model {name!r} needs about {mb(wanted.vram_bytes)} of GPU memory and the budget leaves "
                f"{mb(free)} while the models in use stay loaded{waited}.")  # fmt: skip

    def _load(self, entry: PoolModel, ref: ModelRef) -> None:
        waiter = _LoadWaiter()
        entry.service.add_listener(waiter)
        try:
            waiter.expect(entry.service.load(ref, entry.name))
            # (a load still queued when close() ends its engine is never answered: look at the pool too)
            while not waiter.done.wait(0.1) and not self._closing:
                pass
        finally:
            entry.service.remove_listener(waiter)
        if waiter.model is None or self._closing:
            reason = waiter.error or ("Ember is closing" if self._closing else "it failed to load")
            entry.error = f"The model {entry.name!r} could not be loaded: {reason}"
            with self._lock:
                if self._models.get(entry.name) is entry:
                    del self._models[entry.name]
                    self._lock.notify_all()  # (its room is free: a request may be waiting for it)
            entry.ready.set()  # (those waiting for it are told before the service is closed)
            entry.service.close()
            return
        with self._lock:
            self.loads += 1
            self.loads_by_model[entry.name] += 1
            entry.last_used = time.monotonic()
        entry.ready.set()
        model = entry.service.model
        self._changed(f"loaded {entry.name} ({mb(entry.memory.total)}{', ' + model.badge() if model else ''}) "
                      "for a request")  # fmt: skip

    def _unload(self, entry: PoolModel) -> None:
        entry.service.close()
        self._changed(f"unloaded {entry.name} ({entry.why})")

    def _changed(self, what: str) -> None:
        log.info("%s", what)
        if self._on_change is not None:
            try:
                self._on_change(what)
            except Exception:
                log.exception("pool listener failed")

    # ----- loading and unloading by request (/api/models)
    def load(self, name: str, ttl_s: float | None = None) -> ModelState:
        """Load `name` now (as a request naming it would) and keep it for its TTL."""
        with self.lease(name, ttl_s):
            pass
        shown = self.resolve(name)[0]
        return next(s for s in self.states() if s.name == shown)

    def unload(self, name: str, why: str = "asked for by POST /api/models/unload") -> None:
        """Unload a model the pool loaded (EmberError: the window's, or one answering requests); `why`: for
        the log ("unloaded NAME (why)")."""
        shown = self.resolve(name)[0]
        with self._lock:
            if self._window is not None and self._window[0] == shown:
                if self._window[3] == "window":
                    raise EmberError(f"The model {shown!r} was loaded by the window; unload it in Ember's window.")
                raise EmberError(f"The model {shown!r} is the one the server was started with (--model).")
            entry = self._models.get(shown)
            if entry is None:
                raise EmberError(f"The model {shown!r} is not loaded.")
            if not entry.ready.is_set():
                raise EmberError(f"The model {shown!r} is still loading.")
            if entry.leases:
                n = entry.leases
                raise EmberError(f"The model {shown!r} is answering {n} request{'s' if n != 1 else ''}: unload it "
                                 f"when {'they are' if n != 1 else 'it is'} done.")  # fmt: skip
            entry.why = why
            self._close_unlocked(entry, evicted=False)

    def states(self) -> list[ModelState]:
        """Every installed model (and the catalog's remote ones) with its state, loaded ones first (by name)."""
        now = time.monotonic()
        rows: dict[str, ModelState] = {}
        with self._lock:
            if self._window is not None:
                name, service, memory, loaded_by = self._window
                model = service.model
                rows[name] = ModelState(name, "loaded", loaded_by, memory.total, model.n_ctx if model else None,
                                        model=model)  # fmt: skip
            for e in self._models.values():
                model = e.service.model if e.state == "loaded" else None
                ttl = e.ttl_s if e.ttl_s is not None else self.default_ttl_s
                rows[e.name] = ModelState(
                    e.name,
                    e.state,
                    e.loaded_by,
                    e.memory.total,
                    model.n_ctx if model else None,
                    e.leases > 0,
                    None if e.leases or e.state != "loaded" else max(0.0, now - e.last_used),
                    ttl,
                    model,
                    e.connection,
                )
        for _name, (shown, ref) in sorted(self._names().items()):
            if isinstance(ref, RemoteModelRef):
                rows.setdefault(shown, ModelState(shown, "remote", connection=ref.endpoint.name))
            else:
                rows.setdefault(shown, ModelState(shown, "not loaded"))
        return sorted(rows.values(), key=lambda s: (s.state != "loaded", s.name))

    def engines(self) -> list[tuple[str, EngineService]]:
        """The engines of the models the pool loaded (by name), loaded now; the pinned model's engine (the
        window's, `serve --model`'s) is its owner's, not listed here."""
        with self._lock:
            return [(e.name, e.service) for e in self._models.values() if e.state == "loaded"]

    # ----- time to live
    def _reap(self) -> None:
        with self._lock:
            while not self._closing:
                now = time.monotonic()
                wake: float | None = None
                expired: PoolModel | None = None
                for e in self._models.values():
                    ttl = e.ttl_s if e.ttl_s is not None else self.default_ttl_s
                    if ttl is None or math.isinf(ttl) or e.leases or e.state != "loaded":
                        continue
                    left = e.last_used + ttl - now
                    if left <= 0:
                        expired = e
                        e.why = f"idle for {ttl:g} s, its time to live"
                        break
                    wake = left if wake is None else min(wake, left)
                if expired is None:
                    self._lock.wait(None if wake is None else min(wake, 3600.0))  # (a lock's wait has a limit)
                    continue
                try:
                    self._close_unlocked(expired)
                except Exception:  # (the thread goes on for the others)
                    log.exception("unloading %s failed", expired.name)

    def close(self) -> None:
        """Unload every model the pool loaded (a load under way is cancelled) and join the TTL thread."""
        with self._lock:
            self._closing = True
            entries, self._models = list(self._models.values()), {}
            self._lock.notify_all()
        self._reaper.join()
        for entry in entries:
            entry.service.close()
