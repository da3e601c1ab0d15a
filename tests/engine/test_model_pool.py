"""The model pool with real engine services over tiny generated models: loaded when a name is asked for
(once for two requests at once), every installed model in its table, the least recently used idle model
evicted for a new one under a budget that forces it, a busy one never, the window's never, idle models
unloaded at the end of their time to live, a damaged file failing its request only, unknown names
answered with the names that exist, and everything unloaded and joined at close."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig, LoadOptions
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.errors import EmberError, ModelFileError
from ember_chat.engine.inference.pool.catalog import library_catalog
from ember_chat.engine.inference.pool.memory import Footprint, MemoryBudget, footprint
from ember_chat.engine.inference.pool.pool import ModelDoesNotFit, ModelLoadFailed, ModelNotFound, ModelPool
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.serve.model_routing import take_ttl
from tests.helpers.gguf_factory import TinySpec, write_tiny_model


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LoadConfig]:
    folder = tmp_path_factory.mktemp("pool")
    refs = {}
    for i, name in enumerate(("alpha", "beta", "gamma")):
        path = write_tiny_model(folder / f"{name}-q8.gguf", TinySpec(seed=i, name=name))
        refs[name] = LoadConfig(path, n_ctx=256, parallel=1)
    return refs


def catalog_of(models: dict[str, LoadConfig]) -> dict[str, ModelRef]:
    """Each model by its library name, then by its file stem (the names a request may use)."""
    names: dict[str, ModelRef] = dict(models)
    names.update({ref.path.stem: ref for ref in models.values()})
    return names


class Changes:
    """Counts the pool's changes; a test waits for the next one instead of sleeping."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.cond = threading.Condition()

    def __call__(self, what: str) -> None:
        with self.cond:
            self.said.append(what)
            self.cond.notify_all()

    def wait_for(self, predicate: object, timeout: float = 10.0) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, timeout), "the pool did not change in time"  # type: ignore[arg-type]


@pytest.fixture
def make_pool(models: dict[str, LoadConfig]) -> Iterator[object]:
    pools: list[ModelPool] = []

    def make(**kwargs: object) -> ModelPool:
        kwargs.setdefault("budget", MemoryBudget(ram_bytes=10**12, vram_bytes=0))
        pool = ModelPool(lambda: catalog_of(models), **kwargs)  # type: ignore[arg-type]
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.close()


def use(pool: ModelPool, name: str) -> None:
    with pool.lease(name):
        pass


def state(pool: ModelPool, name: str) -> str:
    return next(s.state for s in pool.states() if s.name == name)


def test_a_named_model_is_loaded_on_demand_and_listed_with_the_others(
    make_pool: object, models: dict[str, LoadConfig]
) -> None:
    pool: ModelPool = make_pool()  # type: ignore[operator]
    assert [(s.name, s.state) for s in pool.states()] == [
        ("alpha", "not loaded"), ("beta", "not loaded"), ("gamma", "not loaded")
    ]  # fmt: skip
    with pool.lease("beta-q8") as service:  # (its file stem)
        assert service.model is not None and service.model.path == models["beta"].path
        row = next(s for s in pool.states() if s.name == "beta")
        assert row.state == "loaded" and row.loaded_by == "api" and row.busy and row.n_ctx == 256
        assert row.memory_bytes > 0
    row = next(s for s in pool.states() if s.name == "beta")
    assert not row.busy and row.idle_s is not None and row.idle_s >= 0
    assert pool.states()[0].name == "beta"  # (loaded ones first)
    with pool.lease("beta") as again:
        assert again is service  # still loaded: not loaded twice
    assert pool.loads == 1


def test_two_requests_for_a_model_not_loaded_load_it_once(make_pool: object) -> None:
    made: list[EngineService] = []

    def factory() -> EngineService:
        made.append(EngineService())
        return made[-1]

    pool: ModelPool = make_pool(service_factory=factory)  # type: ignore[operator]
    both = threading.Barrier(2)

    def ask() -> EngineService:
        both.wait()
        with pool.lease("alpha") as service:
            return service

    with ThreadPoolExecutor(2) as workers:
        first, second = workers.map(lambda _i: ask(), range(2))
    assert first is second and len(made) == 1 and pool.loads == 1


def test_the_least_recently_used_idle_model_makes_room_and_a_busy_one_never(
    make_pool: object, models: dict[str, LoadConfig]
) -> None:
    one = footprint(models["alpha"])
    changes = Changes()
    # room for two of these models, not three (and no wait for a model in use: refused at once)
    pool: ModelPool = make_pool(budget=MemoryBudget(ram_bytes=int(one.ram_bytes * 2.5), vram_bytes=0),
                                on_change=changes, busy_wait_s=0)  # type: ignore[operator]  # fmt: skip
    with pool.lease("alpha"):
        pass
    with pool.lease("beta"):
        pass
    with pool.lease("alpha"):  # alpha is now the more recently used
        pass
    with pool.lease("gamma"):
        assert (state(pool, "alpha"), state(pool, "beta"), state(pool, "gamma")) == ("loaded", "not loaded", "loaded")
    assert pool.evictions == 1 and "unloaded beta (idle, to make room for gamma)" in changes.said
    # both loaded models busy: a third is refused, with the memory it needs, and nothing is evicted
    with pool.lease("alpha"), pool.lease("gamma"):
        with pytest.raises(ModelDoesNotFit, match=r"'beta' needs about \d+ MB of memory and the memory budget leaves"):
            use(pool, "beta")
        assert (state(pool, "alpha"), state(pool, "gamma")) == ("loaded", "loaded")
    assert pool.evictions == 1


def test_a_model_waits_for_the_room_of_a_model_in_use_and_is_refused_when_it_stays_busy(
    make_pool: object, models: dict[str, LoadConfig]
) -> None:
    """A client's next request may come before its last answer's lease has ended (or two clients take
    turns on two models that do not fit together): the new model waits for the busy one to be done with
    (woken when its lease ends: the wait here is far longer than the test may take), then evicts it; two
    requests waiting for the same model load it once; past the wait a request is refused, saying it
    waited, and the busy model is never touched."""
    one = footprint(models["alpha"])
    changes = Changes()
    pool: ModelPool = make_pool(budget=MemoryBudget(ram_bytes=int(one.ram_bytes * 1.5), vram_bytes=0),
                                on_change=changes, busy_wait_s=10**6)  # type: ignore[operator]  # fmt: skip
    failed: list[BaseException] = []

    def ask_beta() -> None:
        try:
            use(pool, "beta")
        except BaseException as exc:  # (told to the test's thread)
            failed.append(exc)

    waiting = [threading.Thread(target=ask_beta) for _ in range(2)]
    with pool.lease("alpha"):
        for thread in waiting:
            thread.start()
        changes.wait_for(
            lambda: sum(s.startswith("beta waits up to 1e+06 s for alpha (in use)") for s in changes.said) == 2
        )
        assert state(pool, "alpha") == "loaded" and state(pool, "beta") == "not loaded"
    for thread in waiting:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the lease's end did not wake the request waiting for its room"
    assert failed == [] and (state(pool, "alpha"), state(pool, "beta")) == ("not loaded", "loaded")
    assert "unloaded alpha (idle, to make room for beta)" in changes.said
    assert pool.loads == 2 and not any(s.startswith("unloaded beta") for s in changes.said)  # (beta loaded once)

    pool.busy_wait_s = 0.2  # a model that stays busy past the wait: refused, saying so, and kept
    with pool.lease("beta"):
        with pytest.raises(ModelDoesNotFit, match=r"'alpha' needs about \d+ MB .* in use stay loaded \(this request "
                           r"waited 0.2 s for them\)\.$"):  # fmt: skip
            use(pool, "alpha")
        assert state(pool, "beta") == "loaded"
    assert any(s.startswith("alpha waits up to 0.2 s for beta (in use)") for s in changes.said)


def test_models_max_counts_the_windows_model_and_never_evicts_it(
    make_pool: object, models: dict[str, LoadConfig]
) -> None:
    pool: ModelPool = make_pool(budget=MemoryBudget(ram_bytes=10**12, vram_bytes=0, models_max=2), busy_wait_s=0)  # type: ignore[operator]
    window = EngineService()
    try:
        load_blocking(window, models["alpha"], "alpha")
        pool.pin("alpha", window)
        with pool.lease("alpha") as service:
            assert service is window  # a request for the window's model uses the window's service
        with pool.lease("beta"):
            pass
        with pool.lease("gamma"):  # beta (idle) makes room; the window's model stays
            assert state(pool, "beta") == "not loaded"
        rows = {s.name: s for s in pool.states()}
        assert rows["alpha"].loaded_by == "window" and rows["gamma"].loaded_by == "api"
        with pytest.raises(EmberError, match="loaded by the window; unload it in Ember's window"):
            pool.unload("alpha")
        with pool.lease("gamma"), pytest.raises(ModelDoesNotFit, match="at most 2 at once"):
            use(pool, "beta")
        assert window.model is not None  # never touched by the pool
    finally:
        window.close()


def test_an_idle_model_is_unloaded_when_its_time_to_live_ends(make_pool: object) -> None:
    changes = Changes()
    pool: ModelPool = make_pool(default_ttl_s=None, on_change=changes)  # type: ignore[operator]
    with pool.lease("alpha", ttl_s=0.2):
        pass
    with pool.lease("beta"):  # no TTL: stays
        pass
    changes.wait_for(lambda: state(pool, "alpha") == "not loaded")
    assert state(pool, "beta") == "loaded" and pool.evictions == 1
    assert changes.said[-1] == "unloaded alpha (idle for 0.2 s, its time to live)"
    assert changes.said[0].startswith("loaded alpha (") and changes.said[0].endswith(") for a request")


def test_unload_frees_an_idle_model_and_refuses_a_busy_one(make_pool: object) -> None:
    pool: ModelPool = make_pool()  # type: ignore[operator]
    with pool.lease("alpha"), pytest.raises(EmberError, match="'alpha' is answering 1 request"):
        pool.unload("alpha")
    pool.unload("alpha")
    assert state(pool, "alpha") == "not loaded"
    with pytest.raises(EmberError, match="'alpha' is not loaded"):
        pool.unload("alpha")


def test_unknown_names_and_damaged_files_fail_their_request_only(
    make_pool: object, models: dict[str, LoadConfig], tmp_path: Path
) -> None:
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"GGUF" + b"\x00" * 64)
    # a model whose files pass the header's checks but that llama.cpp cannot load (its "projector" is a
    # language model): the load itself fails
    not_a_projector = models["beta"].path
    catalog = {**catalog_of(models), "damaged": LoadConfig(damaged, n_ctx=256),
               "unloadable": LoadConfig(models["alpha"].path, n_ctx=256, mmproj=not_a_projector)}  # fmt: skip
    pool = ModelPool(lambda: catalog, MemoryBudget(ram_bytes=10**12, vram_bytes=0))
    try:
        with pytest.raises(ModelNotFound) as unknown:
            use(pool, "delta")
        assert "'delta' does not exist" in str(unknown.value) and "'alpha', 'beta', 'damaged'" in str(unknown.value)
        with pytest.raises(ModelFileError):
            use(pool, "damaged")
        with pytest.raises(ModelLoadFailed, match="'unloadable' could not be loaded"):
            use(pool, "unloadable")
        assert state(pool, "unloadable") == "not loaded"
        with pool.lease("alpha") as service:  # the others go on
            assert service.model is not None
    finally:
        pool.close()


def test_close_unloads_every_model_and_joins_its_threads(make_pool: object, models: dict[str, LoadConfig]) -> None:
    made: list[EngineService] = []

    def factory() -> EngineService:
        made.append(EngineService())
        return made[-1]

    pool = ModelPool(lambda: catalog_of(models), MemoryBudget(ram_bytes=10**12, vram_bytes=0), service_factory=factory)
    with pool.lease("alpha"), pool.lease("beta"):
        pass
    pool.close()
    assert len(made) == 2 and not any(s.running for s in made)
    with pytest.raises(EmberError, match="closing"):
        use(pool, "alpha")


def test_a_draft_models_memory_counts_with_its_model(models: dict[str, LoadConfig], tmp_path: Path) -> None:
    """A draft model (speculative decoding) is loaded with its model: the pool's budget counts both;
    one that cannot be read is refused at load (the model loads without it) and counts nothing."""
    alpha, beta = models["alpha"], models["beta"]
    with_draft = LoadConfig(alpha.path, n_ctx=alpha.n_ctx, draft_model=beta.path)
    assert footprint(with_draft) == footprint(LoadConfig(alpha.path, n_ctx=alpha.n_ctx)) + footprint(
        LoadConfig(beta.path, n_ctx=alpha.n_ctx)
    )
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"GGUF" + bytes(12))
    assert footprint(LoadConfig(alpha.path, n_ctx=alpha.n_ctx, draft_model=damaged)) == footprint(
        LoadConfig(alpha.path, n_ctx=alpha.n_ctx)
    )


def test_a_remote_model_takes_no_memory_here() -> None:
    from ember_chat.engine.core.refs import Endpoint, RemoteModelRef

    assert footprint(RemoteModelRef(Endpoint("team", "http://127.0.0.1:9/v1"), "m")) == Footprint()


def test_the_librarys_models_by_each_name_a_request_may_use(tmp_path: Path) -> None:
    models_dir = tmp_path / "models"
    (models_dir / "team" / "coder").mkdir(parents=True)
    write_tiny_model(models_dir / "team" / "coder" / "coder-q4.gguf", TinySpec(name="coder"))
    write_tiny_model(models_dir / "notes.gguf", TinySpec(seed=2, name="notes"))
    library = ModelLibrary(models_dir, hf_cache=tmp_path / "hf", starters=())
    catalog = library_catalog(library, lambda _entry: LoadOptions(n_ctx=512, parallel=1))
    names = catalog()
    coder = names["team/coder/coder-q4.gguf"]
    assert names["coder-q4"] is coder and names["coder-q4.gguf"] is coder
    assert isinstance(coder, LoadConfig) and coder.n_ctx == 512
    pool = ModelPool(catalog, MemoryBudget(ram_bytes=10**12, vram_bytes=0))
    try:
        assert [s.name for s in pool.states()] == ["notes.gguf", "team/coder/coder-q4.gguf"]
        with pool.lease("coder-q4") as service:
            assert service.model is not None and service.model.path == models_dir / "team/coder/coder-q4.gguf"
        (models_dir / "notes.gguf").unlink()  # deleted while the server runs: gone from the table at once
        with pytest.raises(ModelNotFound):
            use(pool, "notes")
    finally:
        pool.close()


def test_a_starter_not_assembled_yet_is_listed_and_assembled_for_its_first_request(tmp_path: Path) -> None:
    """A new user's Gemma starter is assembled on its first load (the window's); a request naming it before
    that was a 404 saying only the other models exist, though the window and `models list` offered it."""
    library = ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "hf")
    gemma = library.find("gemma-3-270m")
    assert gemma.path is None  # (nothing assembled in this new models folder)
    catalog = library_catalog(library, lambda _entry: LoadOptions(n_ctx=256, parallel=1))
    assert "gemma-3-270m" in catalog()
    pool = ModelPool(catalog, MemoryBudget(ram_bytes=10**12, vram_bytes=0))
    try:
        with ThreadPoolExecutor(2) as workers:  # (two requests at once: one assembles it, both are served)
            paths = list(workers.map(lambda _i: lease_path(pool, "gemma-3-270m"), range(2)))
        assembled = library.find("gemma-3-270m").path
        assert assembled is not None and assembled.is_file() and paths == [assembled, assembled]
        assert pool.loads == 1
    finally:
        pool.close()


def lease_path(pool: ModelPool, name: str) -> Path:
    with pool.lease(name) as service:
        assert service.model is not None
        return service.model.path


@pytest.mark.parametrize(
    ("body", "ttl"),
    [({"ttl": 30}, 30.0), ({"keep_alive": "5m"}, 300.0), ({"keep_alive": "1.5h"}, 5400.0),
     ({"keep_alive": -1}, math.inf), ({"keep_alive": 0}, 0.0), ({"keep_alive": "250ms"}, 0.25), ({}, None),
     ({"ttl": 1e309}, math.inf), ({"ttl": 10**400}, math.inf), ({"keep_alive": -(10**400)}, math.inf)],
)  # fmt: skip
def test_a_requests_ttl_or_keep_alive_is_taken_out_of_its_body(body: dict[str, object], ttl: float | None) -> None:
    body = {"model": "m", **body}
    assert take_ttl(body) == ttl and body == {"model": "m"}


@pytest.mark.parametrize("value", ["soon", True, None, float("nan"), [1]])
def test_a_ttl_that_is_not_a_duration_is_a_400_naming_it(value: object) -> None:
    with pytest.raises(ApiError) as refused:
        take_ttl({"keep_alive": value})
    assert refused.value.status == 400 and refused.value.param == "keep_alive"


def test_a_time_to_live_too_long_for_a_lock_keeps_the_model_and_the_ttl_thread(make_pool: object) -> None:
    changes = Changes()
    pool: ModelPool = make_pool(default_ttl_s=None, on_change=changes)  # type: ignore[operator]
    with pool.lease("alpha", ttl_s=1e300):  # finite, but past what a lock's wait takes
        pass
    with pool.lease("beta", ttl_s=0.1):
        pass
    changes.wait_for(lambda: state(pool, "beta") == "not loaded")  # the TTL thread still works
    assert state(pool, "alpha") == "loaded"


def test_memory_counts_until_an_unloaded_model_has_closed(make_pool: object, models: dict[str, LoadConfig]) -> None:
    """A model being unloaded still holds its memory until its engine has closed: a load that needs that
    room waits for it instead of loading beside it."""
    one = footprint(models["alpha"])
    closing = threading.Event()
    release = threading.Event()

    class SlowToClose(EngineService):
        def close(self) -> None:
            if self.model is not None and self.model_alias == "alpha":
                closing.set()
                release.wait(10)
            super().close()

    pool: ModelPool = make_pool(budget=MemoryBudget(ram_bytes=int(one.ram_bytes * 1.5), vram_bytes=0),
                                service_factory=SlowToClose)  # type: ignore[operator]  # fmt: skip
    use(pool, "alpha")
    with ThreadPoolExecutor(2) as workers:
        unloading = workers.submit(pool.unload, "alpha")
        assert closing.wait(10)
        loading = workers.submit(use, pool, "beta")  # needs alpha's room: waits for its close
        with pytest.raises(TimeoutError):  # (what must not happen: half a second is plenty for a tiny model)
            loading.result(timeout=0.5)
        assert state(pool, "beta") == "not loaded"
        release.set()
        unloading.result(10)
        loading.result(10)
    assert state(pool, "beta") == "loaded" and state(pool, "alpha") == "not loaded"
