"""The benchmark lab: prefill and decode speed of a model on this machine, measured as llama.cpp's
`llama-bench` does, through Ember's own runtime.

Methodology (first one untimed warm-up run, as llama-bench does — page the weights in, build the
compute graphs, open the server's connection; then for each prompt length n, `repetitions` times,
the median kept):
- the prompt is n pseudo-random tokens of the model's vocabulary (fixed seed; no template, no BOS),
  evaluated from an empty KV cache — llama-bench's "pp n";
- then `output_tokens` tokens are generated one at a time, greedily, end-of-generation tokens
  included, after that prompt — llama-bench's "tg" at context depth n;
- prefill tok/s = n / the time from the start of the prompt's evaluation to the first sampled token
  (the same clock as every answer's metrics), and llama.cpp's own prompt-eval counters beside it;
- decode tok/s = (tokens − 1) / the time from the first to the last token; ITL p50/p95/p99 over the
  same gaps; TTFT = the time from the request to the first token;
- peak memory = the process's peak resident size while this model was loaded and measured: sampled
  just before the load, every 20 ms on a thread of its own, and at the end (psutil, on every OS) —
  per model, so a second, smaller model measured in the same process does not report the first
  one's peak, as the process's lifetime maximum (ru_maxrss) would. It includes whatever else the
  process holds (a chat model loaded in the window: `resident_model` in the facts), and the run's
  facts keep the resident size just before the load (`rss_before_load_bytes`).

In the window the lab runs as an exclusive job of the engine service (`measure_exclusively`): on the
engine thread, after the running answer, while chat and API requests wait, so no other generation
shares the machine with the measurement; the facts say so (`exclusive`).

A remote connection's model is measured the same way through its server (engine/bench/targets.py
says what differs: a text prompt sized by the server's tokenizer, times that include the network).
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ember_chat.engine.bench.targets import TOKEN_SEED, BenchTarget, stopping_on, target_for
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.errors import InvalidParameter, JobCancelled, LoadCancelled
from ember_chat.engine.inference.backend import InferenceBackend
from ember_chat.engine.inference.llama.loader import system_info
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.remote.backend import RemoteBackend
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.models.fit import free_vram_bytes

MEMORY_SAMPLE_S = 0.02


@dataclass(frozen=True)
class BenchPlan:
    prompt_lengths: tuple[int, ...] = (128, 512)
    output_tokens: int = 64
    repetitions: int = 2

    def __post_init__(self) -> None:
        if not self.prompt_lengths or any(n < 1 for n in self.prompt_lengths):
            raise InvalidParameter("prompt lengths must be positive numbers of tokens.")
        if self.output_tokens < 2 or self.repetitions < 1:
            raise InvalidParameter("the benchmark needs at least 2 output tokens and 1 repetition.")


@dataclass(frozen=True)
class BenchPoint:
    """One prompt length's figures (medians over the repetitions). `prompt_tokens` is what the model
    evaluated (a remote server's count); peak memory is None for a model that runs elsewhere."""

    model: str
    where: str  # "local", or the connection's name
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    prefill_tokens_per_s: float | None  # None: a server that says nothing of the prompt's size
    llama_prefill_tokens_per_s: float | None
    decode_tokens_per_s: float
    llama_decode_tokens_per_s: float | None
    itl_p50_ms: float
    itl_p95_ms: float
    itl_p99_ms: float
    peak_rss_bytes: int | None
    repetitions: int


@dataclass
class BenchRun:
    machine: dict[str, Any]
    plan: dict[str, Any]
    points: list[BenchPoint] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    cancelled: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "plan": self.plan,
            "started": self.started,
            "cancelled": self.cancelled,
            "points": [asdict(p) for p in self.points],
        }

    def to_csv(self) -> str:
        return points_csv(self.points)


def points_csv(points: list[BenchPoint]) -> str:
    """The figures as CSV, one row per model and prompt length."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(BenchPoint.__dataclass_fields__))
    writer.writeheader()
    for p in points:
        writer.writerow(asdict(p))
    return out.getvalue()


def machine_facts(target: BenchTarget | None = None) -> dict[str, Any]:
    """What makes the figures meaningful: CPU, cores, RAM, GPU, backend, llama.cpp build (and, for a
    remote model, which server measured it)."""
    import llama_cpp
    import psutil  # here, not at import: on Linux it needs the `resource` module

    vram = free_vram_bytes()
    facts: dict[str, Any] = {
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": _cpu_name(),
        "cores_logical": os.cpu_count(),
        "cores_physical": psutil.cpu_count(logical=False),
        "ram_bytes": psutil.virtual_memory().total,
        "gpu_free_vram_bytes": vram,
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_features": system_info(),
    }
    if target is not None:
        facts.update(target.facts())
    return facts


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def prompt_seed(n: int, rep: int) -> int:
    """A different prompt for every length and repetition (nothing for a prompt cache to reuse)."""
    return TOKEN_SEED + 7919 * rep + n


class PeakMemory:
    """The peak resident size of this process over one model's measurement (a `with` block):
    sampled when it starts, every `interval_s` on a thread of its own, and when it ends. The thread
    is joined on exit."""

    def __init__(self, interval_s: float = MEMORY_SAMPLE_S) -> None:
        import psutil  # here, not at import: on Linux it needs the `resource` module

        self._process = psutil.Process()
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.before = 0  # the resident size when the block started
        self.peak = 0

    def sample(self) -> int:
        rss = int(self._process.memory_info().rss)
        with self._lock:
            self.peak = max(self.peak, rss)
        return rss

    def _watch(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def __enter__(self) -> PeakMemory:
        self.before = self.sample()
        self._thread = threading.Thread(target=self._watch, name="bench-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()


def _with_peak(run: BenchRun, peak: int) -> BenchRun:
    """The model's peak on each of its points (a model measured elsewhere keeps None)."""
    run.points = [p if p.peak_rss_bytes is None else replace(p, peak_rss_bytes=peak) for p in run.points]
    return run


def load_for_bench(ref: ModelRef, plan: BenchPlan, cancel: threading.Event | None = None) -> InferenceBackend:
    """A backend of its own with `ref` loaded (beside any chat's): a local model with a context that
    holds the longest prompt and its output, or a connection's model. The caller closes it. Raises
    LoadCancelled when `cancel` is set meanwhile."""
    backend: InferenceBackend
    if isinstance(ref, LoadConfig):
        # the context the plan needs, no more: a model set to 128k would hold a huge KV cache beside
        # the chat's copy, and the figures do not depend on it
        ref = replace(ref, n_ctx=max(256, max(plan.prompt_lengths) + plan.output_tokens + 8))
        backend = LocalRuntime()
    else:
        backend = RemoteBackend()
    try:
        with stopping_on(cancel or threading.Event(), backend.request_stop):
            backend.load(ref, cancel=cancel)
    except BaseException:
        backend.close()
        raise
    return backend


def measure_model(
    ref: ModelRef,
    plan: BenchPlan,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> BenchRun:
    """Load `ref` in a backend of its own, run the plan on it, close it (the command line's way, and
    the window's inside `measure_exclusively`; a cancel during the load raises LoadCancelled). Peak
    memory covers the load and the measurement of this model only."""
    with PeakMemory() as memory:
        backend = load_for_bench(ref, plan, cancel)
        try:
            run = run_lab(backend, plan, cancel, progress, memory)
        finally:
            backend.close()
    if isinstance(ref, LoadConfig):  # (a remote model's memory is the server's)
        run.machine["rss_before_load_bytes"] = memory.before
    return _with_peak(run, memory.peak)


def measure_exclusively(
    service: EngineService,
    ref: ModelRef,
    plan: BenchPlan,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> BenchRun:
    """`measure_model` as an exclusive job of the engine service (the window's way): on the engine
    thread, after the running answer, while chat and API requests wait. `cancel` stops it; while it
    still waits for its turn, at once (LoadCancelled). Blocks the calling thread until it ends."""
    cancel = cancel or threading.Event()
    resident = service.model.name if service.model is not None else None
    run = exclusive_job(service, lambda: measure_model(ref, plan, cancel, progress), "Benchmark", cancel)
    run.machine["resident_model"] = resident  # loaded for chat meanwhile (its memory is in the peak)
    return run


class LabRun(Protocol):
    machine: dict[str, Any]


R = TypeVar("R", bound=LabRun)  # a BenchRun, or speculation.py's SpeculationRun


def exclusive_job(service: EngineService, work: Callable[[], R], label: str, cancel: threading.Event) -> R:
    """`work()` (a lab run) as the service's exclusive job, waited for: `cancel` stops it, and drops it at
    once while it still waits for its turn (LoadCancelled). Its facts say no other generation ran."""
    job = service.run_exclusive(work, label, cancel)
    with stopping_on(cancel, lambda: service.cancel_exclusive(job)):
        try:
            run: R = job.result()
        except JobCancelled as exc:
            raise LoadCancelled(str(exc)) from exc
    run.machine["exclusive"] = True  # no other generation ran while it was measured
    return run


def run_lab(
    backend: InferenceBackend,
    plan: BenchPlan,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    memory: PeakMemory | None = None,
) -> BenchRun:
    """Run the plan on the loaded model (local, or a remote connection's). `progress(done, total,
    what)` after each measurement; `cancel` stops between (and inside) measurements — the run keeps
    what it measured. Peak memory (of a local model): over this run, or over the caller's `memory`
    block (which the caller then puts on the points when it ends)."""
    cancel = cancel or threading.Event()
    if backend.description is None:
        raise InvalidParameter("load a model before running the benchmark.")
    target = target_for(backend)
    if not target.measures_memory:
        return _run_plan(target, plan, cancel, progress)
    if memory is not None:
        run = _run_plan(target, plan, cancel, progress)
        memory.sample()
        return _with_peak(run, memory.peak)
    with PeakMemory() as own:
        run = _run_plan(target, plan, cancel, progress)
    return _with_peak(run, own.peak)


def _run_plan(
    target: BenchTarget,
    plan: BenchPlan,
    cancel: threading.Event,
    progress: Callable[[int, int, str], None] | None,
) -> BenchRun:
    run = BenchRun(machine_facts(target), asdict(plan))
    total = len(plan.prompt_lengths) * plan.repetitions
    done = 0
    if progress:
        progress(done, total, f"{target.name}: warming up")
    warm = min(plan.prompt_lengths)
    if target.measure(target.prompt(warm, prompt_seed(warm, plan.repetitions)), 2, cancel) is None:
        run.cancelled = True
        return run
    for n in plan.prompt_lengths:
        samples: list[GenerationMetrics] = []
        for rep in range(plan.repetitions):
            if cancel.is_set():
                run.cancelled = True
                return run
            metrics = target.measure(target.prompt(n, prompt_seed(n, rep)), plan.output_tokens, cancel)
            if metrics is None:
                run.cancelled = True
                return run
            samples.append(metrics)
            done += 1
            if progress:
                progress(done, total, f"{target.name}: {n} prompt tokens, run {rep + 1} of {plan.repetitions}")
        run.points.append(_point(target, n, plan, samples))
    return run


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _point(target: BenchTarget, n: int, plan: BenchPlan, samples: list[GenerationMetrics]) -> BenchPoint:
    def llama_rate(ms: float | None, count: int | None) -> float | None:
        return count / (ms / 1000) if ms and count else None

    evaluated = _median([m.prompt_tokens - m.prompt_tokens_reused for m in samples if m.prompt_tokens])
    generated = _median([m.output_tokens for m in samples])
    return BenchPoint(
        model=target.name,
        where=target.where,
        prompt_tokens=round(evaluated) if evaluated else n,
        output_tokens=round(generated) if generated else plan.output_tokens,
        ttft_s=_median([m.ttft_s for m in samples]) or 0.0,
        prefill_tokens_per_s=_median([m.prefill_tokens_per_s for m in samples]),
        llama_prefill_tokens_per_s=_median([llama_rate(m.llama_prefill_ms, m.llama_prefill_tokens) for m in samples]),
        decode_tokens_per_s=_median([m.decode_tokens_per_s for m in samples]) or 0.0,
        llama_decode_tokens_per_s=_median([llama_rate(m.llama_decode_ms, m.llama_decode_tokens) for m in samples]),
        itl_p50_ms=_median([m.itl_p50_ms for m in samples]) or 0.0,
        itl_p95_ms=_median([m.itl_p95_ms for m in samples]) or 0.0,
        itl_p99_ms=_median([m.itl_p99_ms for m in samples]) or 0.0,
        peak_rss_bytes=0 if target.measures_memory else None,  # the model's peak, put on at the end
        repetitions=len(samples),
    )


def save_run(run: BenchRun, folder: Path) -> Path:
    """Keep the run (with its machine facts) as JSON in the data folder's benchmarks/."""
    return write_run(run.to_dict(), run.started, folder, "bench")


def write_run(data: dict[str, Any], started: float, folder: Path, prefix: str) -> Path:
    """`data` as JSON in `folder`, named `prefix` and the time it started (speculation.py's runs too)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = time.strftime(f"{prefix}-%Y%m%d-%H%M%S", time.localtime(started))
    path = folder / f"{stem}.json"
    n = 1
    while path.exists():  # several models measured in the same second
        n += 1
        path = folder / f"{stem}-{n}.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path
