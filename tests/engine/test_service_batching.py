"""Continuous batching in the engine service: batchable requests are decoded together (one backend
step for all active runs), newcomers join between steps in the round-robin order, and what cannot
be batched (a request with logprobs, a load, an exclusive job) waits for the active runs and then
has the engine to itself. The backend here decodes like the local runtime's batched path, but
deterministically: each run yields StepWanted before each of its tokens, and `step()` records which
runs it decoded."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.service.engine import (
    EngineService,
    GenerationRequest,
    QueueState,
    ServiceListener,
)
from tests.helpers.batched_fake import BatchedFake
from tests.helpers.sinks import RecordingSink

WAIT_S = 10.0


class Running(ServiceListener):
    """The most requests seen running at once (QueueState.running_all)."""

    def __init__(self) -> None:
        self.most = 0
        self.api_most = 0
        self.first_is_running = True

    def queue_changed(self, state: QueueState) -> None:
        self.most = max(self.most, len(state.running_all))
        self.api_most = max(self.api_most, state.count("api")[0])
        self.first_is_running &= state.running == (state.running_all[0] if state.running_all else None)


def ask(name: str, max_tokens: int, client: str = "api", **params: Any) -> tuple[GenerationRequest, RecordingSink]:
    sink = RecordingSink()
    req = GenerationRequest(
        SamplingParams(max_tokens=max_tokens, **params),
        sink,
        messages=[ChatMessage("user", name)],
        client=client,
        batch_s=0,
    )
    return req, sink


@pytest.fixture
def service() -> Iterator[Callable[..., tuple[EngineService, BatchedFake]]]:
    made: list[EngineService] = []

    def make(slots: int = 4, queue_limit: int = 16) -> tuple[EngineService, BatchedFake]:
        backend = BatchedFake(slots)
        svc = EngineService(lambda _ref: backend, queue_limit=queue_limit)
        made.append(svc)
        loaded = threading.Event()
        svc.load(LoadConfig(Path("batched.gguf")))
        svc.run_exclusive(loaded.set).result(WAIT_S)  # (after the load)
        assert loaded.is_set() and backend.loaded
        backend.log.clear()
        return svc, backend

    yield make
    for svc in made:
        svc.close()
        assert not svc.running


def held(svc: EngineService) -> threading.Event:
    """The engine busy with an exclusive job until the returned event is set: what is submitted
    meanwhile waits, and starts together."""
    gate = threading.Event()
    svc.run_exclusive(lambda: gate.wait(WAIT_S))
    return gate


def pause_at(backend: BatchedFake, step: int) -> tuple[threading.Event, threading.Event]:
    """The engine stops inside step `step` until `release` is set; `reached` says it got there."""
    reached, release = threading.Event(), threading.Event()

    def on_step(n: int) -> None:
        if n == step:
            reached.set()
            release.wait(WAIT_S)

    backend.on_step = on_step
    return reached, release


def first_step(backend: BatchedFake, name: str) -> int:
    return next(i for i, names in enumerate(backend.steps) if name in names)


def test_four_requests_are_decoded_in_the_same_steps_and_a_fifth_joins_when_one_ends(service: Any) -> None:
    svc, backend = service(slots=4)
    running = Running()
    svc.add_listener(running)
    gate = held(svc)
    asked = [ask("A", 2), ask("B", 5), ask("C", 5), ask("D", 5), ask("E", 3)]
    for req, _ in asked:
        svc.submit(req)
    gate.set()
    assert all(sink.done.wait(WAIT_S) for _, sink in asked)
    assert [sink.reason for _, sink in asked] == ["length"] * 5
    assert "".join(asked[1][1].text) == "B0 B1 B2 B3 B4 "
    # together, not one after the other: the first step decoded all four, E waited for a free slot
    assert set(backend.steps[0]) == set(backend.steps[1]) == {"A", "B", "C", "D"}
    assert set(backend.steps[2]) == {"B", "C", "D", "E"}  # A ended after its 2 tokens: E took its slot
    assert len(backend.steps) == 5  # (not 2 + 5 + 5 + 5 + 3)
    assert running.most == 4 and running.api_most == 4 and running.first_is_running
    assert backend.stops == 0
    assert svc.queue_state().running_all == ()
    for (req, sink), record in zip(asked, sorted(svc.recent, key=lambda r: r.id)[-5:], strict=True):
        assert record.id == req.id and record.metrics == sink.final and sink.final is not None


def test_the_windows_request_joins_at_once_in_its_own_slot_while_api_requests_fill_theirs(service: Any) -> None:
    svc, backend = service(slots=2, queue_limit=32)
    gate = held(svc)
    asked = [ask("A1", 2), ask("A2", 8)] + [ask(f"Q{i}", 1) for i in range(3)]
    for req, _ in asked:
        svc.submit(req)
    window = ask("W", 2, client="window")
    more: list[tuple[GenerationRequest, RecordingSink]] = []

    def on_step(n: int) -> None:  # a new API request at every step; the window sends during the first
        if n == 1:
            svc.submit(window[0])
        if n <= 10:
            more.append(ask(f"S{n}", 1))
            svc.submit(more[-1][0])

    backend.on_step = on_step
    gate.set()
    assert all(sink.done.wait(WAIT_S) for _, sink in [*asked, window, *more])
    assert window[1].reason == "length" and "".join(window[1].text) == "W0 W1 "
    assert set(backend.steps[0]) == {"A1", "A2"}
    # the window sent during step 1 with both API slots busy: it joined at once in the slot kept for
    # it, while the API requests waiting before it waited for A1 to end
    assert first_step(backend, "W") == 1 and {"A1", "A2", "W"} <= set(backend.steps[1])
    assert all(first_step(backend, name) >= 2 for name in ("Q0", "Q1", "Q2", "S1", "S2"))  # (A1 ended at step 1)
    assert max(sum(1 for name in step if name != "W") for step in backend.steps) == 2  # API: their 2 slots


def test_an_unbatchable_request_waits_for_the_active_runs_then_runs_alone(service: Any) -> None:
    svc, backend = service(slots=4)
    reached, release = pause_at(backend, 1)
    a, b = ask("A", 4), ask("B", 4)
    gate = held(svc)
    svc.submit(a[0])
    svc.submit(b[0])
    gate.set()
    assert reached.wait(WAIT_S)
    unbatchable = ask("U", 2, logprobs=1)
    later = ask("C", 2)
    svc.submit(unbatchable[0])
    svc.submit(later[0])
    release.set()
    assert all(sink.done.wait(WAIT_S) for _, sink in (a, b, unbatchable, later))
    assert [s.reason for _, s in (a, b, unbatchable, later)] == ["length"] * 4
    log = backend.log
    # U ran once A and B had ended, with nothing else running; C (free slots, but U waits) did not
    # join the batch meanwhile and started after U
    assert ("alone", "U", 0) in log
    assert log.index(("end", "A")) < log.index(("alone", "U", 0))
    assert log.index(("end", "B")) < log.index(("alone", "U", 0))
    assert log.index(("alone-end", "U")) < log.index(("start", "C"))
    assert all(set(names) <= {"A", "B"} for names in backend.steps[:4])
    assert backend.steps[4:] == [("C",), ("C",)]


def test_a_load_and_an_exclusive_job_wait_for_the_active_runs_and_stop_admissions(service: Any) -> None:
    svc, backend = service(slots=4)
    reached, release = pause_at(backend, 1)
    a, b = ask("A", 3), ask("B", 3)
    gate = held(svc)
    svc.submit(a[0])
    svc.submit(b[0])
    gate.set()
    assert reached.wait(WAIT_S)
    svc.load(LoadConfig(Path("batched.gguf")))
    job = svc.run_exclusive(lambda: backend.log.append(("job", len(backend._active))))
    later = ask("C", 2)
    svc.submit(later[0])
    release.set()
    job.result(WAIT_S)
    assert later[1].done.wait(WAIT_S) and later[1].reason == "length"
    assert a[1].reason == b[1].reason == "length"
    log = backend.log
    assert log.index(("end", "A")) < log.index(("load", 0)) and log.index(("end", "B")) < log.index(("load", 0))
    assert log.index(("load", 0)) < log.index(("job", 0)) < log.index(("start", "C"))
    assert all("C" not in names for names in backend.steps[:3])


def test_cancel_of_one_batched_run_leaves_the_others_running(service: Any) -> None:
    svc, backend = service(slots=4)
    reached, release = pause_at(backend, 2)
    asked = [ask("A", 6), ask("B", 6), ask("C", 6)]
    gate = held(svc)
    for req, _ in asked:
        svc.submit(req)
    gate.set()
    assert reached.wait(WAIT_S)
    svc.cancel(asked[1][0].id)
    release.set()
    assert all(sink.done.wait(WAIT_S) for _, sink in asked)
    (_, a), (_, b), (_, c) = asked
    assert b.reason == "cancelled" and "".join(b.text) == "B0 B1 "
    assert a.reason == c.reason == "length" and "".join(a.text) == "A0 A1 A2 A3 A4 A5 "
    assert backend.stops == 0  # the backend's stop-everything was never used
    assert all("B" not in names for names in backend.steps[2:]) and len(backend.steps) == 6


def test_an_error_in_one_run_fails_that_run_only(service: Any) -> None:
    svc, _ = service(slots=4)
    gate = held(svc)
    asked = [ask("A", 4), ask("boom", 4), ask("C", 4)]
    for req, _ in asked:
        svc.submit(req)
    gate.set()
    assert all(sink.done.wait(WAIT_S) for _, sink in asked)
    (_, a), (boom_req, boom), (_, c) = asked
    assert boom.reason == "error" and boom.failures and boom.failures[0][1] == "internal"
    assert "the model broke" in boom.failures[0][0] and "".join(boom.text) == "boom0 "
    assert a.reason == c.reason == "length" and "".join(c.text) == "C0 C1 C2 C3 "
    record = next(r for r in svc.recent if r.id == boom_req.id)
    assert record.reason == "error" and record.error is not None and "the model broke" in record.error


def test_a_failed_step_fails_the_runs_in_it_and_the_next_request_runs(service: Any) -> None:
    svc, backend = service(slots=4)
    backend.fail_step = 2
    gate = held(svc)
    asked = [ask("A", 4), ask("B", 4)]
    for req, _ in asked:
        svc.submit(req)
    gate.set()
    assert all(sink.done.wait(WAIT_S) for _, sink in asked)
    for name, (_, sink) in zip("AB", asked, strict=True):
        assert sink.reason == "error" and "llama_decode failed" in sink.failures[0][0]
        assert "".join(sink.text) == f"{name}0 "
        assert ("end", name) in backend.log  # its generation was closed (the backend's slot freed)
    after = ask("D", 2)
    svc.submit(after[0])
    assert after[1].done.wait(WAIT_S) and after[1].reason == "length"


def test_close_with_active_runs_ends_them_all_and_joins_the_thread(service: Any) -> None:
    svc, backend = service(slots=4)
    reached, release = pause_at(backend, 3)
    asked = [ask(name, 1_000_000) for name in "ABC"]
    gate = held(svc)
    for req, _ in asked:
        svc.submit(req)
    queued = ask("Q", 2, logprobs=1)  # (cannot join: waits)
    svc.submit(queued[0])
    gate.set()
    assert reached.wait(WAIT_S)
    closer = threading.Thread(target=svc.close)
    closer.start()
    try:
        assert all(req.cancelled.wait(WAIT_S) for req, _ in asked)
    finally:
        release.set()
        closer.join(WAIT_S)
    assert not closer.is_alive() and not svc.running
    assert [sink.reason for _, sink in asked] == ["cancelled"] * 3
    assert queued[1].reason == "cancelled" and queued[1].text == []
    assert {("end", name) for name in "ABC"} <= set(backend.log) and not backend._active
    assert all(len(sink.text) == 3 for _, sink in asked)  # 3 steps, then the cancel: within a token


def test_a_backend_that_cannot_batch_keeps_one_generation_at_a_time(service: Any) -> None:
    svc, backend = service(slots=1)  # (parallel 1)
    gate = held(svc)
    asked = [ask("A", 2), ask("B", 2)]
    for req, _ in asked:
        svc.submit(req)
    gate.set()
    assert all(sink.done.wait(WAIT_S) and sink.reason == "length" for _, sink in asked)
    assert backend.steps == [] and [e for e in backend.log if e[0] == "alone"] == [("alone", "A", 0), ("alone", "B", 0)]


def test_the_snapshot_store_goes_to_every_backend_the_service_makes() -> None:
    from ember_chat.engine.inference.kv.snapshots import SnapshotStore

    backends: list[BatchedFake] = []

    def factory(_ref: Any) -> BatchedFake:
        backends.append(BatchedFake())
        return backends[-1]

    svc = EngineService(factory)
    store = SnapshotStore(None, cap_bytes=0)
    try:
        svc.snapshot_store = store  # before any backend: given when it is made
        svc.load(LoadConfig(Path("batched.gguf")))
        svc.run_exclusive(lambda: None).result(WAIT_S)
        assert backends[0].snapshots is store and svc.snapshot_store is store
        svc.snapshot_store = None  # and when it changes (on the engine thread, like a load)
        svc.run_exclusive(lambda: None).result(WAIT_S)
        assert backends[0].snapshots is None
    finally:
        svc.close()
        store.close()
    assert not svc.running
