"""Knob sweeps: a local model loaded with each of several load settings in turn (parallel slots, context,
threads, flash attention, KV cache type, batch sizes: the load parameters of core/params.py), each run
through the same loads and workload (report.sweep), then the settings compared: the Pareto front (more
goodput and output tok/s, a lower p95 TTFT) and the winner — the highest goodput within the objective,
ties broken by tok/s — which `--apply` saves as the model's own load settings (model_settings.json, the
window's ⚙ dialog). One knob is not a load setting: `speculative` (off, auto, ngram, draft: the server's
default speculative decoding, `serve --speculative`), which the target's server is started with; it is a
chat's setting (the side panel's, kept with each chat), not the model's, so `apply_winner` saves nothing
for it (`saved_knobs` says which knobs were saved).

The caller makes the target for each LoadConfig (a local model served in process: cli/bench_serve.py),
as bench/ does not reach into the API server itself."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ember_chat.engine.bench.serving.load import LoadPlan, LoadRun
from ember_chat.engine.bench.serving.report import ATTAINMENT, sweep
from ember_chat.engine.bench.serving.summary import Slo
from ember_chat.engine.bench.serving.targets import ServingTarget
from ember_chat.engine.bench.serving.workload import Workload
from ember_chat.engine.core.params import LOAD_SPECS, SPECS, SPECULATIVE_MODES, LoadConfig
from ember_chat.engine.errors import EmberError, InvalidParameter
from ember_chat.engine.storage.model_settings import ModelLoadSettings, ModelSettingsStore

SPECULATIVE = "speculative"  # (the one knob that is the server's, not a load setting)
# The names a knob is also known by (the CLI's flags: --ctx, --batch-size).
ALIASES = {"ctx": "n_ctx", "context": "n_ctx", "batch_size": "n_batch", "batch": "n_batch", "spec": SPECULATIVE}
_ON, _OFF = ("on", "true", "yes", "1"), ("off", "false", "no", "0")

Setting = dict[str, Any]  # {load parameter: value}, the swept ones only


@dataclass(frozen=True)
class Knob:
    name: str  # the load parameter (LOAD_SPECS)
    values: tuple[Any, ...]


def parse_knob(text: str, said_as: str = "--sweep") -> Knob:
    """'parallel=1,2,4', 'flash_attn=on,off', 'kv_cache_type=f16,q8_0', 'ctx=2048,4096' as a knob; an
    unknown name or a value out of its range: EmberError saying which and why, naming the knob as
    `said_as` and its name (the CLI's flag; the window's own words)."""
    name, eq, values = text.partition("=")
    key = name.strip().lstrip("-").replace("-", "_").lower()
    key = ALIASES.get(key, key)
    known = {spec.name for spec in LOAD_SPECS} | {SPECULATIVE}
    if not eq or not name.strip():
        raise EmberError(f"{said_as} takes NAME=VALUE,VALUE…, e.g. parallel=1,2,4; got {text!r}.")
    if key == SPECULATIVE:
        return _speculative_knob(values, said_as)
    if key not in known:
        raise EmberError(f"{said_as} {name.strip()}: not a load setting; one of {', '.join(sorted(known))}.")
    spec = SPECS[key]
    parsed: list[Any] = []
    for raw in (v.strip() for v in values.split(",")):
        if not raw:
            continue
        value: Any = raw
        if spec.kind is bool:
            if raw.lower() not in _ON + _OFF:
                raise EmberError(f"{said_as} {key}: {raw!r} is neither on nor off.")
            value = raw.lower() in _ON
        elif spec.kind is int:
            try:
                value = int(raw)
            except ValueError:
                raise EmberError(f"{said_as} {key}: {raw!r} is not a whole number.") from None
        try:
            spec.check(value)
        except InvalidParameter as exc:
            raise EmberError(f"{said_as} {key}: {exc}") from None
        if value not in parsed:
            parsed.append(value)
    if not parsed:
        raise EmberError(f"{said_as} {key}: no value given (e.g. {key}={spec.default}).")
    return Knob(key, tuple(parsed))


def _speculative_knob(values: str, said_as: str) -> Knob:
    modes: list[str] = []
    for raw in (v.strip().lower() for v in values.split(",")):
        if raw and raw not in SPECULATIVE_MODES:
            raise EmberError(f"{said_as} {SPECULATIVE}: {raw[:40]!r} is not one of {', '.join(SPECULATIVE_MODES)}.")
        if raw and raw not in modes:
            modes.append(raw)
    if not modes:
        raise EmberError(f"{said_as} {SPECULATIVE}: no value given (e.g. {SPECULATIVE}=off,auto).")
    return Knob(SPECULATIVE, tuple(modes))


def parse_knobs(texts: Sequence[str]) -> list[Knob]:
    knobs = [parse_knob(text) for text in texts]
    names = [k.name for k in knobs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise EmberError(f"--sweep names {', '.join(twice)} more than once: give its values in one --sweep.")
    return knobs


def settings_of(knobs: Sequence[Knob]) -> list[Setting]:
    """Every combination of the knobs' values, the first knob's slowest."""
    return [dict(zip([k.name for k in knobs], combo, strict=True)) for combo in itertools.product(
        *(k.values for k in knobs))]  # fmt: skip


def label_of(setting: Setting) -> str:
    def shown(v: object) -> str:
        return ("on" if v else "off") if isinstance(v, bool) else str(v)

    return ", ".join(f"{name}={shown(value)}" for name, value in setting.items())


@dataclass(frozen=True)
class Figures:
    """One setting's figures: those of its best load (the served load with the most goodput; without one,
    the load with the most goodput)."""

    goodput: float  # requests/s that met the objective
    tokens_per_s: float  # output tokens/s
    ttft_p95_ms: float | None  # None: no request completed
    within_slo: bool
    load: str


def _within(load: dict[str, Any]) -> bool:
    attained = load["slo_attainment"]
    return attained is not None and attained >= ATTAINMENT and not load["saturated"] and load["completed"] > 0


def figures_of(loads: Sequence[dict[str, Any]]) -> Figures | None:
    """From report.sweep's `loads` (each with its `median`); None when no load ran."""
    medians = [load["median"] for load in loads]
    if not medians:
        return None
    served = [m for m in medians if _within(m)]
    best = max(served or medians, key=lambda m: (m["goodput_requests_per_s"], m["output_tokens_per_s"]))
    return Figures(best["goodput_requests_per_s"], best["output_tokens_per_s"], best["ttft_ms"]["p95"],
                   bool(served), best["load"])  # fmt: skip


def _dominates(a: Figures, b: Figures) -> bool:
    inf = float("inf")
    ta, tb = inf if a.ttft_p95_ms is None else a.ttft_p95_ms, inf if b.ttft_p95_ms is None else b.ttft_p95_ms
    no_worse = a.goodput >= b.goodput and a.tokens_per_s >= b.tokens_per_s and ta <= tb
    better = a.goodput > b.goodput or a.tokens_per_s > b.tokens_per_s or ta < tb
    return no_worse and better


def pareto_front(points: Sequence[Figures]) -> list[int]:
    """The indices of the points no other point beats on every figure (goodput and tok/s up, p95 TTFT
    down) and betters on one; equal points are all on the front."""
    return [i for i, p in enumerate(points) if not any(_dominates(q, p) for q in points)]


def winner(points: Sequence[Figures]) -> int | None:
    """The index of the highest goodput within the objective (ties: the most tok/s; then the first),
    None when no setting kept the objective."""
    within = [i for i, p in enumerate(points) if p.within_slo]
    return max(within, key=lambda i: (points[i].goodput, points[i].tokens_per_s, -i), default=None)


def knob_sweep(
    make_target: Callable[..., ServingTarget],
    base: LoadConfig,
    knobs: Sequence[Knob],
    workload: Workload,
    plans: Sequence[LoadPlan],
    slo: Slo,
    cancel: threading.Event | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
    load_runs: list[LoadRun] | None = None,
    repeats: int = 1,
) -> dict[str, Any]:
    """Each setting of `knobs` (on `base`'s other settings) loaded in turn by `make_target`, run through
    `plans` with `workload` and closed before the next; a setting that cannot be loaded (a quantized KV
    cache without flash attention, a context too large for the memory, speculative=draft without a draft
    model) is `skipped` with its reason. `make_target(config)` makes the target; with `speculative` swept,
    `make_target(config, speculative=MODE)` (the server's default mode; a sweep without it calls it with
    the LoadConfig alone).
    The result: `settings` (each with its report.sweep result and figures), `runs` (every run, naming
    its setting), `pareto` and `winner` (labels), and a plain `answer`."""
    cancel = cancel or threading.Event()
    done: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for setting in settings_of(knobs):
        if cancel.is_set():
            break
        label = label_of(setting)
        load = {name: value for name, value in setting.items() if name != SPECULATIVE}
        server = {name: value for name, value in setting.items() if name == SPECULATIVE}
        try:
            if server.get(SPECULATIVE) == "draft" and base.draft_model is None:
                raise EmberError("no draft model is loaded with it (choose one in its load settings, ⚙)")
            config = dataclasses.replace(base, **load)
            target = make_target(config, **server)
        except EmberError as exc:
            skipped.append({"setting": setting, "label": label, "reason": str(exc)})
            continue
        tell = (lambda s, d, t, label=label: progress(f"{label}: {s}", d, t)) if progress is not None else None
        try:
            result = sweep(target, workload, plans, slo, cancel, tell, load_runs=load_runs, repeats=repeats)
        finally:
            target.close()
        figures = figures_of(result["loads"])
        if figures is not None:
            done.append({"setting": setting, "label": label, "figures": dataclasses.asdict(figures), **result})
    points = [Figures(**d["figures"]) for d in done]
    front = [done[i]["label"] for i in pareto_front(points)]
    best = winner(points)
    runs = [{"setting": d["label"], **run} for d in done for run in d["runs"]]
    return {
        "context": done[0]["context"] if done else {},
        "slo": {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "e2el_ms": slo.e2el_ms},
        "knobs": {k.name: list(k.values) for k in knobs},
        "settings": done,
        "skipped": skipped,
        "runs": runs,
        "pareto": front,
        "winner": None if best is None else done[best]["label"],
        "winner_setting": None if best is None else done[best]["setting"],
        "answer": _answer(done, best, front, skipped, slo),
    }


def _answer(done: list[dict[str, Any]], best: int | None, front: list[str], skipped: list[dict[str, Any]],
            slo: Slo) -> str:  # fmt: skip
    if not done:
        return "No setting was measured" + (f" ({len(skipped)} could not be loaded)." if skipped else ".")
    if best is None:
        words = f"No setting kept the objective ({slo.describe()}) for 95 % of requests."
    else:
        f = done[best]["figures"]
        ttft = "" if f["ttft_p95_ms"] is None else f", first tokens within {f['ttft_p95_ms'] / 1000:.2f} s (p95)"
        words = (
            f"Best within the objective ({slo.describe()}): {done[best]['label']} — {f['goodput']:.2f} good "
            f"requests/s at {f['load']}, {f['tokens_per_s']:.1f} output tok/s{ttft}."
        )
    words += f" Pareto front: {'; '.join(front)}."
    if skipped:
        not_loaded = "; ".join(f"{s['label']} ({s['reason']})" for s in skipped)
        words += f" Not loaded: {not_loaded}."
    return words


def saved_knobs(setting: Setting) -> tuple[Setting, Setting]:
    """(the part of a winning `setting` apply_winner saves as the model's load settings, the part it does
    not: `speculative`, a chat's setting, not the model's)."""
    return ({k: v for k, v in setting.items() if k != SPECULATIVE},
            {k: v for k, v in setting.items() if k == SPECULATIVE})  # fmt: skip


def apply_winner(
    store: ModelSettingsStore, name: str, setting: Setting, measured: LoadConfig
) -> ModelLoadSettings | None:
    """Saves `setting` as model `name`'s own load settings: a model that has its own keeps those not
    swept; one without takes the rest from `measured` (the load options the sweep ran with). Its
    `speculative` is not saved (saved_knobs: a chat's setting, not the model's); a setting of nothing
    else saves nothing (None)."""
    setting, _not_saved = saved_knobs(setting)
    if not setting:
        return None
    own = store.get(name)
    if own is not None:
        chosen = dataclasses.replace(own, **setting)
    else:
        draft = str(measured.draft_model) if measured.draft_model is not None else None
        values = {**measured.options(), **setting}
        if values["threads_batch"] is None:  # (a saved entry names it: the threads, as loading takes it)
            values["threads_batch"] = values["threads"]
        chosen = ModelLoadSettings(**values, draft_model=draft)
    store.save(name, chosen)
    return chosen
