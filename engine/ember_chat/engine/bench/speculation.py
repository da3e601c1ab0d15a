"""Speculative decoding's comparison tasks and one greedy answer to each (bench.speculative on the command
line, the benchmark lab in the window): an answer that copies a passage it was given, a code edit, free prose.

The lab's comparison (`compare_speculation`, in the window `compare_exclusively`) runs on the loaded model
itself: each task answered at temperature 0 with speculation off, with n-gram drafts and with the model's
draft model (only when one is loaded with it: its load settings name one and it was not refused), the KV
cache cleared before every answer, the modes alternating within each round (so a slower moment of the
machine does not land on one mode only), a first untimed answer to page the weights in. Per task and mode:
the median decode tokens/s, the tokens drafted and accepted over the rounds, the speedup over off's median
(measured, not the answers' own estimate) and whether every answer was off's, token for token.
"""

from __future__ import annotations

import csv
import io
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ember_chat.engine.bench.lab import exclusive_job, machine_facts, write_run
from ember_chat.engine.bench.targets import LocalTarget
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.stopping import stopping_on
from ember_chat.engine.errors import InvalidParameter, NoModelLoaded
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service.engine import EngineService

PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, lit the great lamp, and wrote "
    "the weather, the ships he saw and the state of the sea in a leather-bound log. In winter the storms "
    "came from the north and the waves broke over the rocks below the tower; in summer the fishing boats "
    "passed close to the shore and their crews waved to him. He had kept the light for thirty years, and "
    "in all that time not one ship had been lost on the reef he watched over."
)
CODE = """def total_price(items, tax_rate):
    subtotal = 0.0
    for item in items:
        subtotal += item.price * item.quantity
    tax = subtotal * tax_rate
    return round(subtotal + tax, 2)


def cheapest(items):
    best = None
    for item in items:
        if best is None or item.price < best.price:
            best = item
    return best


def describe(items, tax_rate):
    lines = [f"{item.name}: {item.quantity} x {item.price:.2f}" for item in items]
    lines.append(f"total: {total_price(items, tax_rate):.2f}")
    return "\\n".join(lines)
"""
RENAMED = CODE.replace("total_price", "order_total")
TASKS = {
    # an answer that copies its input: where prompt lookup pays
    "copy": f"Text: {PASSAGE}\nThe same text, repeated word for word:\nText:",
    # a code edit: the file again with one name changed
    "code_edit": f"# before\n{CODE}\n# after: total_price renamed to order_total\n{RENAMED[:60]}",
    # free prose: little to copy, the drafts mostly rejected
    "free": "Once upon a time, in a small village by the sea, there lived an old fisherman who",
}


def one_run(
    rt: LocalRuntime, prompt: str, tokens: int, mode: str, temperature: float = 0.0
) -> tuple[str, GenerationMetrics]:
    """The answer to `prompt` (the cache cleared first); sampled at a temperature, with a fixed seed, so
    each mode draws the same answer."""
    rt.reset_cache()
    fin = None
    params = SamplingParams(
        temperature=temperature,
        max_tokens=tokens,
        ignore_eos=True,
        speculative=mode,
        seed=SEED if temperature else None,
    )
    for ev in rt.complete(prompt, params):
        if isinstance(ev, Finished):
            fin = ev
    assert fin is not None
    return fin.text, fin.metrics


SEED = 7  # (a sampled answer's: the same in every mode and round)
LAB_TASKS = ("code_edit", "copy", "free")  # the lab's order: code edit, answer from a document, free prose
LAB_MODES = ("off", "ngram", "draft")  # "draft" only where the model has a draft model loaded
_SAID = {
    "code_edit": "code edit",
    "copy": "answer from a document",
    "free": "free prose",
    "ngram": "n-gram",
    "draft": "draft model",
    "off": "speculation off",
}  # fmt: skip  (the progress line's words)


@dataclass(frozen=True)
class SpeculationResult:
    """One task's answers in one mode (`rounds` of them): drafted/accepted are None for off."""

    task: str
    mode: str
    decode_tokens_per_s: float  # the median over the rounds
    output_tokens: int
    drafted: int | None  # over the rounds
    accepted: int | None
    speedup: float | None  # decode_tokens_per_s / off's (None for off, or off not measured)
    identical: bool  # every answer was off's, token for token (off: its rounds agreed)
    rounds: int

    @property
    def acceptance(self) -> float | None:
        """The share of drafted tokens accepted (0..1); None where nothing was drafted."""
        return self.accepted / self.drafted if self.drafted and self.accepted is not None else None


@dataclass
class SpeculationRun:
    model: str
    draft_model: str | None  # the draft model's file name; None: the draft column was not measured
    draft_refused: str | None  # why the draft model named in the load settings was not loaded
    tokens: int
    rounds: int
    machine: dict[str, Any]
    results: list[SpeculationResult] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    cancelled: bool = False

    def result(self, task: str, mode: str) -> SpeculationResult | None:
        return next((r for r in self.results if r.task == task and r.mode == mode), None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["results"] = [asdict(r) | {"acceptance": r.acceptance} for r in self.results]
        return d

    def to_csv(self) -> str:
        """One row per task and mode."""
        out = io.StringIO()
        names = ["model", "draft_model", *SpeculationResult.__dataclass_fields__, "acceptance"]
        writer = csv.DictWriter(out, fieldnames=names)
        writer.writeheader()
        for r in self.results:
            writer.writerow(
                {"model": self.model, "draft_model": self.draft_model, **asdict(r), "acceptance": r.acceptance}
            )
        return out.getvalue()


def compare_speculation(
    runtime: LocalRuntime,
    tokens: int = 128,
    rounds: int = 1,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> SpeculationRun:
    """Answer LAB_TASKS with each mode on the loaded model (module docstring). `progress(done, total,
    what)` after each answer; `cancel` stops within a token, and the run keeps the tasks it finished
    (`cancelled` set). Leaves the KV cache empty."""
    if tokens < 2 or rounds < 1:
        raise InvalidParameter("the comparison needs at least 2 tokens and 1 round.")
    desc = runtime.description
    if desc is None:
        raise NoModelLoaded("No model is loaded. Load one first.")
    cancel = cancel or threading.Event()
    modes = [m for m in LAB_MODES if m != "draft" or desc.draft_model is not None]
    run = SpeculationRun(
        desc.name, desc.draft_model, desc.draft_refused, tokens, rounds, machine_facts(LocalTarget(runtime))
    )
    total = len(modes) + len(LAB_TASKS) * rounds * len(modes)
    done = 0

    def answer(prompt: str, n: int, mode: str, what: str) -> tuple[str, GenerationMetrics] | None:
        nonlocal done
        text, metrics = one_run(runtime, prompt, n, mode)
        if cancel.is_set():
            return None
        done += 1
        if progress:
            progress(done, total, what)
        return text, metrics

    with stopping_on(cancel, runtime.request_stop):
        try:
            if progress:
                progress(0, total, f"{desc.name}: warming up")
            for mode in modes:  # (a draft model's graphs are built on its first answer too)
                if answer(TASKS["free"], 8, mode, f"{desc.name}: warming up") is None:
                    run.cancelled = True
                    return run
            for task in LAB_TASKS:
                answers: dict[str, list[tuple[str, GenerationMetrics]]] = {m: [] for m in modes}
                for r in range(rounds):
                    for mode in modes:
                        got = answer(
                            TASKS[task],
                            tokens,
                            mode,
                            f"{desc.name}: {_SAID[task]}, {_SAID[mode]}, round {r + 1} of {rounds}",
                        )
                        if got is None:
                            run.cancelled = True
                            return run
                        answers[mode].append(got)
                run.results.extend(_results(task, answers))
        finally:
            runtime.reset_cache()  # (the last answer's cells: the chat's next answer starts from its own)
    return run


def _results(task: str, answers: dict[str, list[tuple[str, GenerationMetrics]]]) -> list[SpeculationResult]:
    off_texts = {text for text, _ in answers["off"]}
    off_rate = statistics.median(m.decode_tokens_per_s or 0.0 for _, m in answers["off"])
    results = []
    for mode, runs in answers.items():
        rate = statistics.median(m.decode_tokens_per_s or 0.0 for _, m in runs)
        texts = {text for text, _ in runs}
        drafted = None if mode == "off" else sum(m.speculative_drafted or 0 for _, m in runs)
        accepted = None if mode == "off" else sum(m.speculative_accepted or 0 for _, m in runs)
        results.append(
            SpeculationResult(
                task=task,
                mode=mode,
                decode_tokens_per_s=rate,
                output_tokens=round(statistics.median(m.output_tokens for _, m in runs)),
                drafted=drafted,
                accepted=accepted,
                speedup=rate / off_rate if mode != "off" and off_rate else None,
                identical=len(off_texts) == 1 and texts == off_texts,
                rounds=len(runs),
            )
        )
    return results


def compare_exclusively(
    service: EngineService,
    tokens: int = 128,
    rounds: int = 1,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> SpeculationRun:
    """`compare_speculation` on the service's loaded model as an exclusive job (the window's way): on the
    engine thread, after the running answer, while chat and API requests wait. The chat's KV cache is
    cleared (its next answer evaluates its conversation again). `cancel` stops it; while it still waits
    for its turn, at once (LoadCancelled). NoModelLoaded without a model; InvalidParameter for a remote one."""
    cancel = cancel or threading.Event()

    def work() -> SpeculationRun:
        backend = service._backend  # (the engine thread's own: this runs there, between generations)
        if backend is None or backend.description is None:
            raise NoModelLoaded("No model is loaded. Load one first.")
        if not isinstance(backend, LocalRuntime):
            raise InvalidParameter("Speculative decoding runs on a model on this computer, not a remote one.")
        return compare_speculation(backend, tokens, rounds, cancel, progress)

    return exclusive_job(service, work, "Speculative decoding", cancel)


def save_speculation_run(run: SpeculationRun, folder: Path) -> Path:
    """Keep the run as JSON in the data folder's benchmarks/, beside the lab's speed runs."""
    return write_run(run.to_dict(), run.started, folder, "speculative")
