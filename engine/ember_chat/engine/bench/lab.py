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
- peak memory = the process's peak resident size after the run (what the OS had to give).

A remote connection's model is measured the same way through its server (engine/bench/targets.py
says what differs: a text prompt sized by the server's tokenizer, times that include the network).
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from ember_chat.engine.bench.targets import TOKEN_SEED, BenchTarget, stopping_on, target_for
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.backend import InferenceBackend, ModelRef
from ember_chat.engine.inference.llama_loader import system_info
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.params import LoadConfig
from ember_chat.engine.inference.remote import RemoteBackend
from ember_chat.engine.inference.runtime import LocalRuntime
from ember_chat.engine.models.fit import free_vram_bytes


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


def peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


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
    """Load `ref` in a backend of its own, run the plan on it, close it (the window's and the
    command line's way; a cancel during the load raises LoadCancelled)."""
    backend = load_for_bench(ref, plan, cancel)
    try:
        return run_lab(backend, plan, cancel, progress)
    finally:
        backend.close()


def run_lab(
    backend: InferenceBackend,
    plan: BenchPlan,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> BenchRun:
    """Run the plan on the loaded model (local, or a remote connection's). `progress(done, total,
    what)` after each measurement; `cancel` stops between (and inside) measurements — the run keeps
    what it measured."""
    cancel = cancel or threading.Event()
    if backend.description is None:
        raise InvalidParameter("load a model before running the benchmark.")
    target = target_for(backend)
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
        peak_rss_bytes=peak_rss_bytes() if target.measures_memory else None,
        repetitions=len(samples),
    )


def save_run(run: BenchRun, folder: Path) -> Path:
    """Keep the run (with its machine facts) as JSON in the data folder's benchmarks/."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = time.strftime("bench-%Y%m%d-%H%M%S", time.localtime(run.started))
    path = folder / f"{stem}.json"
    n = 1
    while path.exists():  # several models measured in the same second
        n += 1
        path = folder / f"{stem}-{n}.json"
    path.write_text(json.dumps(run.to_dict(), indent=2), encoding="utf-8")
    return path
