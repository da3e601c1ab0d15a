"""The load: a closed loop (a fixed number of users, each sending its next request when the last one
ended) or an open loop (requests arriving at a rate, each at its scheduled time whether or not the
server has answered the earlier ones — no coordinated omission: a slow server meets the load it was
given, and each request's lateness is recorded).

Open-loop arrivals are a gamma process: the gaps are gamma-distributed with mean 1/rate and shape
`burstiness` (1: exponential gaps, a Poisson process; below 1 burstier, above 1 more regular), as vLLM's
benchmark draws them. Warm-up requests run first, one at a time, and are not counted. A run ends after
its requests or its duration; an open loop whose requests in flight reach `max_in_flight` is saturated:
it stops sending and says so, rather than queueing for ever."""

from __future__ import annotations

import itertools
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ember_chat.engine.bench.serving.client import RequestResult
from ember_chat.engine.bench.serving.workload import RequestSpec, Workload
from ember_chat.engine.errors import EmberError

# (spec, result to fill, the run's start) → the filled result; blocking, called on a worker thread
Send = Callable[[RequestSpec, RequestResult, float], RequestResult]


@dataclass(frozen=True)
class LoadPlan:
    concurrency: int | None = None  # closed loop: this many users
    rate: float | None = None  # open loop: requests per second
    burstiness: float = 1.0
    requests: int | None = 20
    duration_s: float | None = None
    warmup: int = 1
    seed: int = 0
    max_in_flight: int = 64

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise EmberError("A load is a concurrency (closed loop) or a request rate (open loop), not both.")
        if self.concurrency is not None and self.concurrency < 1:
            raise EmberError("The concurrency must be 1 or more.")
        if self.rate is not None and not self.rate > 0:
            raise EmberError("The request rate must be more than 0 per second.")
        if not self.burstiness > 0:
            raise EmberError("The burstiness must be more than 0 (1: Poisson arrivals).")
        if self.requests is None and self.duration_s is None:
            raise EmberError("A run ends after a number of requests or a duration: give one.")
        if self.requests is not None and self.requests < 1:
            raise EmberError("A run needs 1 request or more.")

    @property
    def label(self) -> str:
        if self.concurrency is not None:
            return f"concurrency {self.concurrency}"
        shape = "" if self.burstiness == 1.0 else f", burstiness {self.burstiness:g}"
        return f"{self.rate:g} requests/s{shape}"


@dataclass
class LoadRun:
    plan: LoadPlan
    results: list[RequestResult] = field(default_factory=list)
    duration_s: float = 0.0
    saturated: str | None = None  # why sending stopped early (the server fell behind)
    cancelled: bool = False
    started: float = 0.0  # time.perf_counter() when the first request was due
    landing: RequestResult | None = None  # the workload's mid-run request (a document landing), if sent
    first: int = 0  # the workload's index of its first request (after the warm-up ones)

    @property
    def next_index(self) -> int:
        """The workload's first request the next load takes (none of this one's again)."""
        return self.first + self.plan.warmup + len(self.results)


def arrivals(rate: float, burstiness: float, seed: int = 0) -> Iterator[float]:
    """The arrival times (seconds from the start, endless) of a gamma process: gaps with mean 1/rate and
    shape `burstiness` (1: exponential, a Poisson process)."""
    rng = random.Random(seed)
    scale = 1.0 / (rate * burstiness)
    t = 0.0
    while True:
        t += rng.gammavariate(burstiness, scale)
        yield t


def arrival_times(rate: float, burstiness: float, count: int, seed: int = 0) -> list[float]:
    """The first `count` arrival times of `arrivals`."""
    return list(itertools.islice(arrivals(rate, burstiness, seed), count))


def run_load(
    send: Send,
    workload: Workload,
    plan: LoadPlan,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    first: int = 0,
) -> LoadRun:
    """Drive `send` with `workload` as `plan` says; every request's result, in the order they were due.
    The workload's requests from `first` on (a sweep's later loads take fresh ones: a server's prefix
    cache must not answer them from an earlier load's). An interrupt (Ctrl+C) or error here cancels the
    requests in flight before it is raised."""
    cancel = cancel or threading.Event()
    try:
        return _run(send, workload, plan, cancel, progress, first)
    except BaseException:
        cancel.set()
        raise


def _run(
    send: Send,
    workload: Workload,
    plan: LoadPlan,
    cancel: threading.Event,
    progress: Callable[[int, int | None], None] | None,
    first: int,
) -> LoadRun:
    for i in range(plan.warmup):
        if cancel.is_set():
            break
        _sent(send, workload, first + i, RequestResult(-1 - i, 0.0), time.perf_counter())
    run = LoadRun(plan, first=first)
    ended = threading.Event()
    lander = None
    if workload.landing is not None:
        lander = threading.Thread(
            target=_land, args=(send, workload.landing, plan, run, cancel, ended), name="ember-load-landing"
        )
        lander.start()
    try:
        if plan.concurrency is not None:
            _closed(send, workload, plan, run, cancel, progress)
        else:
            _open(send, workload, plan, run, cancel, progress)
    except BaseException:
        cancel.set()  # (before the lander is joined: its request ends too)
        raise
    finally:
        ended.set()
        if lander is not None:
            lander.join()
    run.cancelled = cancel.is_set()
    run.results.sort(key=lambda r: r.index)
    return run


def _closed(
    send: Send,
    workload: Workload,
    plan: LoadPlan,
    run: LoadRun,
    cancel: threading.Event,
    progress: Callable[[int, int | None], None] | None,
) -> None:
    lock = threading.Lock()
    taken = [0]
    start = run.started = time.perf_counter()
    end = start + plan.duration_s if plan.duration_s is not None else None

    def user() -> None:
        while not cancel.is_set():
            with lock:
                index = taken[0]
                if plan.requests is not None and index >= plan.requests:
                    return
                if end is not None and time.perf_counter() >= end:
                    return
                taken[0] += 1
            now = time.perf_counter() - start
            result = _sent(send, workload, run.first + plan.warmup + index, RequestResult(index, now), start)
            with lock:
                run.results.append(result)
                done = len(run.results)
            if progress is not None:
                progress(done, plan.requests)

    threads = [threading.Thread(target=user, name=f"ember-load-{i}", daemon=True) for i in range(plan.concurrency or 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.duration_s = time.perf_counter() - start


def _open(
    send: Send,
    workload: Workload,
    plan: LoadPlan,
    run: LoadRun,
    cancel: threading.Event,
    progress: Callable[[int, int | None], None] | None,
) -> None:
    assert plan.rate is not None
    times = arrivals(plan.rate, plan.burstiness, plan.seed)
    if plan.requests is not None:
        times = itertools.islice(times, plan.requests)
    lock = threading.Lock()
    in_flight = [0]

    def one(index: int, due: float, start: float) -> None:
        try:
            result = _sent(send, workload, run.first + plan.warmup + index, RequestResult(index, due), start)
        finally:
            with lock:
                in_flight[0] -= 1
        with lock:
            run.results.append(result)
            done = len(run.results)
        if progress is not None:
            progress(done, plan.requests)

    start = run.started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=plan.max_in_flight, thread_name_prefix="ember-load") as pool:
        try:
            for index, due in enumerate(times):
                if plan.duration_s is not None and due >= plan.duration_s:
                    break
                if cancel.wait(max(0.0, start + due - time.perf_counter())):
                    break
                with lock:
                    if in_flight[0] >= plan.max_in_flight:
                        run.saturated = (
                            f"{plan.max_in_flight} requests were waiting for answers at {due:.1f} s: the server "
                            f"cannot keep up with {plan.rate:g} requests/s, so sending stopped there"
                        )
                        break
                    in_flight[0] += 1
                pool.submit(one, index, due, start)
        except BaseException:  # (Ctrl+C: the requests in flight end at their next bytes, none is waited for)
            cancel.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    run.duration_s = time.perf_counter() - start


def _sent(send: Send, workload: Workload, index: int, result: RequestResult, start: float) -> RequestResult:
    """Request `index` of the workload sent; a send that raised is a failed request with the reason (the
    run goes on, and counts it)."""
    try:
        result = send(workload.request(index), result, start)
    except Exception as exc:
        result.ok, result.error = False, f"the request could not be made: {exc.__class__.__name__}: {exc}"
    result.turn = workload.done(index, result.answer if result.ok else None, result.tool_calls)
    return result


def _land(
    send: Send, spec: RequestSpec, plan: LoadPlan, run: LoadRun, cancel: threading.Event, ended: threading.Event
) -> None:
    """Send `spec` once mid-run — when half the run's requests are answered, or half its duration has
    passed — while the others go on (a run over before then sends nothing). It waits a further median
    TTFT and four median gaps of the answers so far, so that it lands while the next answers are
    streaming (sent just as one ended, it would meet the others before their first token: the stall
    would be in their TTFT, not between their tokens)."""
    half = max(1, (plan.requests or 0) // 2)
    while not ended.is_set() and not cancel.is_set():
        if run.started:
            elapsed = time.perf_counter() - run.started
            if (plan.requests is not None and len(run.results) >= half) or (
                plan.duration_s is not None and elapsed >= plan.duration_s / 2
            ):
                answered = [r for r in list(run.results) if r.ok and r.ttft_s is not None]
                ttft = statistics.median(r.ttft_s or 0.0 for r in answered) if answered else 0.0
                gaps = [gap for r in answered for gap in r.itl_s]
                settle = min(10.0, ttft + 4 * (statistics.median(gaps) if gaps else 0.0))
                if ended.wait(settle) or cancel.is_set():
                    return
                elapsed = time.perf_counter() - run.started
                run.landing = send(spec, RequestResult(-1, elapsed), run.started)
                return
        ended.wait(0.005)
