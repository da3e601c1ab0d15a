"""Remote connections in the model pool's table, against a real OpenAI-compatible server on 127.0.0.1
(FakeOpenAI): a connection's models listed as `remote:<connection>/<model id>` with its API key from the
keychain, asked again only once the list is older than the refresh time (the old list used meanwhile),
a name the stale list lacks still served, a remote model served by an engine of its own that takes no
memory and no --models-max place and is never evicted for room (its TTL closes it), and a connection
that is down or hangs contributing nothing — said once — without holding a request past the connect
timeout."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.core.refs import ModelRef, RemoteModelRef
from ember_chat.engine.inference.pool import pool as pool_module
from ember_chat.engine.inference.pool.memory import MemoryBudget
from ember_chat.engine.inference.pool.pool import ModelDoesNotFit, ModelNotFound, ModelPool
from ember_chat.engine.inference.pool.remote_catalog import RemoteCatalog
from ember_chat.engine.storage.connections import Connection, ConnectionStore
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.peer_servers import free_port
from tests.helpers.sse_server import FakeOpenAI


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Said:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cond = threading.Condition()

    def __call__(self, what: str) -> None:
        with self.cond:
            self.lines.append(what)
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.lines) >= count, timeout), self.lines


def store_with(tmp_path: Path, url: str, key: str | None = "lab-secret", name: str = "lab") -> ConnectionStore:
    store = ConnectionStore(tmp_path / "connections.json")
    store.save(Connection(name, url), api_key=key)
    return store


def listed(catalog: RemoteCatalog, name: str, timeout: float = 10.0) -> dict[str, ModelRef]:
    """The catalog once it lists `name` (a refresh runs on its own thread: look again every 20 ms)."""
    deadline = time.monotonic() + timeout
    while name not in (names := catalog()):
        assert time.monotonic() < deadline, f"{name} was not listed: {sorted(names)}"
        time.sleep(0.02)
    return names


def model_gets(server: FakeOpenAI) -> int:
    return sum(1 for r in server.requests if r.method == "GET" and r.path.endswith("/models"))


def test_a_connections_models_are_listed_with_its_key_and_asked_again_after_the_refresh_time(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    clock = Clock()
    catalog = RemoteCatalog(store_with(tmp_path, server.base_url), refresh_s=60, clock=clock)
    names = listed(catalog, "remote:lab/test-model")  # (never listed: the first call waits for it, a while)
    assert list(names) == ["remote:lab/test-model"]
    ref = names["remote:lab/test-model"]
    assert isinstance(ref, RemoteModelRef) and ref.model_id == "test-model"
    assert ref.endpoint.api_key == "lab-secret" and ref.endpoint.base_url == server.base_url
    assert server.requests[-1].headers["authorization"] == "Bearer lab-secret"
    assert "lab-secret" not in repr(ref)
    catalog()
    catalog()
    assert model_gets(server) == 1  # within the refresh time: no request goes to the network
    server.models.append({"id": "second", "object": "model"})
    clock.now += 61
    assert "remote:lab/test-model" in catalog()  # (the old list, while the new one is asked for)
    assert set(listed(catalog, "remote:lab/second")) == {"remote:lab/test-model", "remote:lab/second"}
    assert model_gets(server) == 2


def test_a_remote_model_is_served_by_the_pool_without_memory_or_a_place_and_its_ttl_closes_it(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    local = LoadConfig(write_tiny_model(tmp_path / "alpha.gguf", TinySpec(name="alpha")), n_ctx=256, parallel=1)
    said = Said()
    remote = RemoteCatalog(store_with(tmp_path, server.base_url), said=said)
    pool = ModelPool(lambda: {**remote(), "alpha": local}, MemoryBudget(ram_bytes=10**12, vram_bytes=0, models_max=1),
                     on_change=said, lookup=remote.lookup)  # fmt: skip
    try:
        listed(remote, "remote:lab/test-model")
        rows = {s.name: s for s in pool.states()}
        assert rows["remote:lab/test-model"].state == "remote" and rows["remote:lab/test-model"].connection == "lab"
        assert rows["alpha"].state == "not loaded" and rows["alpha"].connection is None
        with pool.lease("alpha"):
            pass
        with pool.lease("remote:lab/test-model", ttl_s=0.2) as service:
            assert service.model is not None and service.model.backend == "remote" and service.model.source == "lab"
            row = next(s for s in pool.states() if s.name == "remote:lab/test-model")
            assert (row.state, row.loaded_by, row.memory_bytes, row.connection) == ("loaded", "api", 0, "lab")
        # --models-max 1 and alpha loaded: the remote model took no place, so nothing was evicted for it
        assert pool.evictions == 0 and next(s for s in pool.states() if s.name == "alpha").state == "loaded"
        said.wait_for(3)  # loaded alpha, loaded the remote model, then its TTL closed it
        assert said.lines[2] == "unloaded remote:lab/test-model (idle for 0.2 s, its time to live)"
        assert next(s for s in pool.states() if s.name == "remote:lab/test-model").state == "remote"
        assert pool.loads_by_model["remote:lab/test-model"] == 1
        # a model the list does not have yet (a stale list) is still served by its connection's name
        server.models.append({"id": "fresh", "object": "model"})
        assert pool.resolve("remote:lab/fresh") == ("remote:lab/fresh", remote.lookup("remote:lab/fresh"))
        with pool.lease("remote:lab/fresh") as fresh:
            assert fresh.model is not None and fresh.model.name == "fresh"
        with pytest.raises(ModelNotFound, match="remote:lab/test-model"):
            pool.resolve("remote:nobody/test-model")
    finally:
        pool.close()


def test_a_remote_model_is_never_evicted_for_a_local_one_and_takes_no_place_under_models_max(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    """A budget of one model: a remote one loaded first leaves the place to the local one, and stays."""
    local = LoadConfig(write_tiny_model(tmp_path / "alpha.gguf", TinySpec(name="alpha")), n_ctx=256, parallel=1)
    remote = RemoteCatalog(store_with(tmp_path, server.base_url))
    pool = ModelPool(lambda: {**remote(), "alpha": local}, MemoryBudget(ram_bytes=10**12, vram_bytes=0, models_max=1),
                     lookup=remote.lookup)  # fmt: skip
    try:
        with pool.lease("remote:lab/test-model"):
            pass
        with pool.lease("alpha"):
            pass
        rows = {s.name: s.state for s in pool.states()}
        assert rows == {"alpha": "loaded", "remote:lab/test-model": "loaded"} and pool.evictions == 0
    finally:
        pool.close()


def test_a_connection_that_is_down_or_hangs_contributes_nothing_said_once_and_never_holds_a_request(
    hanging_server: FakeOpenAI, server: FakeOpenAI, tmp_path: Path
) -> None:
    store = store_with(tmp_path, f"http://127.0.0.1:{free_port()}/v1", name="down")
    store.save(Connection("hangs", hanging_server.base_url))
    store.save(Connection("lab", server.base_url))
    clock = Clock()
    said = Said()
    catalog = RemoteCatalog(store, refresh_s=60, connect_timeout_s=1.0, said=said, clock=clock)
    t0 = time.monotonic()
    catalog()
    assert time.monotonic() - t0 < 1.0 + 0.5  # the connect timeout (and the machine's slack), not the read's
    assert list(listed(catalog, "remote:lab/test-model")) == ["remote:lab/test-model"]
    said.wait_for(1)
    assert said.lines[0].startswith("the connection down (http://127.0.0.1:") and "did not answer" in said.lines[0]
    t0 = time.monotonic()
    for _ in range(5):  # the hanging one is still being asked: later requests do not wait for it
        assert list(catalog()) == ["remote:lab/test-model"]
    assert time.monotonic() - t0 < 0.3
    clock.now += 61  # the down one is asked again, fails again: not said again
    catalog()
    deadline = time.monotonic() + 5
    while catalog._listings["down"].running:  # (its second listing ends on its own thread; nothing is said)
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert sum(1 for line in said.lines if line.startswith("the connection down")) == 1
    assert list(catalog()) == ["remote:lab/test-model"]


def test_remote_engines_are_bounded_the_least_recently_used_idle_one_gives_way(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client may name any id of a connection, and each open remote model is an engine (a thread): at most
    MAX_REMOTE are open; the least recently used idle one is closed for a new one; all busy is a refusal."""
    monkeypatch.setattr(pool_module, "MAX_REMOTE", 2)
    server.models.extend({"id": name, "object": "model"} for name in "abcd")
    remote = RemoteCatalog(store_with(tmp_path, server.base_url))
    pool = ModelPool(remote, MemoryBudget(ram_bytes=10**12, vram_bytes=0), lookup=remote.lookup)
    try:
        for name in ("a", "b", "a", "c"):  # c closes b (a was used after it)
            with pool.lease(f"remote:lab/{name}"):
                pass
        open_now = sorted(s.name for s in pool.states() if s.state == "loaded")
        assert open_now == ["remote:lab/a", "remote:lab/c"] and pool.evictions == 1
        busy = pool.lease("remote:lab/a"), pool.lease("remote:lab/c")
        with busy[0], busy[1], pytest.raises(ModelDoesNotFit, match="at most 2"):
            pool.load("remote:lab/d")
    finally:
        pool.close()
