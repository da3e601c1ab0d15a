"""A sweep of loads on one target and its plain answer: the most users (or the highest request rate)
at which the latency objective held for 95 % of requests, in one sentence, then every run's figures."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx2

from ember_chat.engine.bench.serving.client import RequestResult, stream_chat
from ember_chat.engine.bench.serving.load import LoadPlan, LoadRun, run_load
from ember_chat.engine.bench.serving.machine import CpuMeter, busy_note, listening_pids
from ember_chat.engine.bench.serving.summary import Slo, over_repeats, summarize
from ember_chat.engine.bench.serving.targets import ServingTarget
from ember_chat.engine.bench.serving.workload import RequestSpec, Workload

ATTAINMENT = 0.95  # the share of requests that must meet the objective for a load to count as served


def sweep(
    target: ServingTarget,
    workload: Workload,
    plans: Sequence[LoadPlan],
    slo: Slo,
    cancel: threading.Event | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
    read_timeout_s: float = 120.0,
    load_runs: list[LoadRun] | None = None,
    repeats: int = 1,
) -> dict[str, Any]:
    """Each plan run `repeats` times in turn against `target` (a cancel keeps what ran); the result with
    its context: `runs` (every run), `loads` (each plan's repeats as one: medians and 95 % intervals).
    `load_runs`, when given, receives each run with its requests (export.vllm_result needs them). For a
    target on this machine each run says how much of the CPU other programs used meanwhile."""
    cancel = cancel or threading.Event()
    limits = httpx2.Limits(max_connections=max(p.concurrency or p.max_in_flight for p in plans) + 4)
    timeout = httpx2.Timeout(connect=10.0, read=read_timeout_s, write=30.0, pool=None)
    runs: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    port = urlsplit(target.base_url).port
    server_pids = tuple(listening_pids(port)) if target.on_this_machine and port else ()
    with httpx2.Client(limits=limits, timeout=timeout) as client:

        def send(spec: RequestSpec, result: RequestResult, start: float) -> RequestResult:
            return stream_chat(client, target.base_url, target.model, spec, result, start, target.api_key, cancel)

        first = 0  # (each load takes fresh requests of the workload: no server cache answers an earlier load's)

        for plan in plans:
            repeated: list[dict[str, Any]] = []
            for k in range(repeats):
                if cancel.is_set():
                    break
                label = plan.label if repeats == 1 else f"{plan.label}, repeat {k + 1} of {repeats}"
                tell = (lambda d, t, label=label: progress(label, d, t)) if progress is not None else None
                meter = CpuMeter(server_pids).start() if target.on_this_machine else None
                run = run_load(send, workload, plan, cancel, tell, first)
                first = run.next_index
                summary = summarize(run, slo)
                share = meter.others_share() if meter is not None else None
                summary.update(repeat=k + 1, busy_cpu_share=share, busy=busy_note(share))
                repeated.append(summary)
                if load_runs is not None:
                    load_runs.append(run)
            if repeated:
                load = {"load": plan.label, **over_repeats(repeated)}
                shares = [r["busy_cpu_share"] for r in repeated if r["busy_cpu_share"] is not None]
                load["median"]["busy"] = busy_note(max(shares, default=None))  # (busy in any repeat: said)
                loads.append(load)
            runs.extend(repeated)
    context = {
        **target.context(),
        "workload": workload.name,
        "workload_description": workload.description,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    return {
        "context": context,
        "slo": {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "e2el_ms": slo.e2el_ms},
        "answer": plain_answer(context, [load["median"] for load in loads], slo, loads),
        "runs": runs,
        "loads": loads,
    }


def _served(run: dict[str, Any]) -> bool:
    attained = run["slo_attainment"]
    return attained is not None and attained >= ATTAINMENT and not run["saturated"] and run["completed"] > 0


def plain_answer(
    context: dict[str, Any], runs: list[dict[str, Any]], slo: Slo, loads: list[dict[str, Any]] | None = None
) -> str:
    """e.g. 'gemma-3-270m on Intel Xeon … (2 logical cores) serves 3 chats at once within the objective
    (TTFT ≤ 1000 ms, TPOT ≤ 100 ms, E2E ≤ 60000 ms) for 95 % of requests: first tokens within 0.84 s
    (p95) and ≥ 14.2 tokens/s each.' With `loads` (sweep's: `runs` are then their medians), the answer
    names the repeats and the interval of the load it is about, and each load the machine was busy for."""
    where = context.get("hardware") or context.get("base_url")
    who = f"{context.get('model_name') or context.get('model')} on {where}"  # (the name people know it by)
    if not runs:
        return f"{who}: nothing was measured (the run was cancelled before its first load)."
    served = [r for r in runs if _served(r)]
    if not served:
        chosen = runs[0]
        answer = (
            f"{who} did not meet the objective ({slo.describe()}) for 95 % of requests even at "
            f"{_load_words(chosen)}: {_figures(chosen)}."
        )
    else:
        load = lambda r: (r["concurrency"] or 0, r["request_rate"] or 0.0)  # noqa: E731
        chosen = max(served, key=load)
        most = " (the most tried: try more)" if load(chosen) == max(load(r) for r in runs) else ""
        answer = (
            f"{who} serves {_load_words(chosen)}{most} within the objective ({slo.describe()}) for 95 % of "
            f"requests: {_figures(chosen)}."
        )
    if chosen.get("tools"):
        answer += f" {_tool_turn_words(chosen)}"
    for r, repeated in zip(runs, loads or (), strict=False):
        if r is chosen and repeated["repeats"] > 1:
            answer += f" {_repeats_words(repeated)}"
    for r in runs:
        if r.get("document"):
            answer += f" {_landing_words(r)}"
    for r in runs:
        if r.get("busy"):
            answer += f" {r['load'][0].upper()}{r['load'][1:]} — {r['busy']}."
    return answer


def _landing_words(run: dict[str, Any]) -> str:
    doc = run["document"]
    what = f"a {doc['prompt_tokens']:,}-token document" if doc.get("prompt_tokens") else "a long document"
    head = f"At {run['load']}, {what} landing at {doc['sent_s']:.1f} s"
    if not doc["ok"]:
        head += f" failed ({doc['error']})"
    before, during = doc["itl_p99_before_ms"], doc["itl_p99_during_ms"]
    if before is None or during is None:
        return head + ": no other answer was streaming both before and while it was read."
    first = f" (its first token after {doc['ttft_ms'] / 1000:.2f} s)" if doc.get("ttft_ms") is not None else ""
    return (
        f"{head}: the other chats' ITL p99 went from {before:.0f} ms before to {during:.0f} ms while it "
        f"was read{first}."
    )


def _repeats_words(repeated: dict[str, Any]) -> str:
    words = f"Medians of {repeated['repeats']} repeats"
    bounds = repeated["interval95"].get("ttft_ms", {}).get("p95")
    if bounds is not None:
        words += f"; p95 TTFT {bounds[0] / 1000:.2f}–{bounds[1] / 1000:.2f} s (95 % t-interval over the repeats)"
    return words + "."


def _load_words(run: dict[str, Any]) -> str:
    if run["concurrency"] is not None:
        n = run["concurrency"]
        if run.get("tools"):  # (the tools workload: users whose chat calls a tool, not plain chats)
            return "1 user calling a tool at a time" if n == 1 else f"{n} users calling tools at once"
        return "1 chat at a time" if n == 1 else f"{n} chats at once"
    return f"{run['request_rate']:g} requests/s"


def _tool_turn_words(run: dict[str, Any]) -> str:
    """The tools workload's user turns at the load the answer is about: a turn is the question, the tool
    call with its result sent back, and the final answer — two requests where the model called the tool."""
    tools = run["tools"]
    turn = tools.get("turn_ms") or {}
    words = (
        f"At {run['load']}, {tools['turns']} tool turns (a question, the tool's call and result, the answer) got "
        f"their answer, "
        + (f"{tools['called_tool']} of them calling the tool" if tools["called_tool"] else "none calling the tool")
    )
    if turn.get("p50") is not None and turn.get("p95") is not None:
        words += f"; a turn took {turn['p50'] / 1000:.2f} s (p50), {turn['p95'] / 1000:.2f} s (p95)"
    return words + " — the objective is each request's."


def _figures(run: dict[str, Any]) -> str:
    ttft, tpot = run["ttft_ms"]["p95"], run["tpot_ms"]["p95"]
    parts = []
    if ttft is not None:
        parts.append(f"first tokens within {ttft / 1000:.2f} s (p95)")
    if tpot:
        parts.append(f"≥ {1000 / tpot:.1f} tokens/s each (p95 TPOT {tpot:.0f} ms)")
    if run["failed"]:
        parts.append(f"{run['failed']} failed")
    return ", ".join(parts) or "no request completed"


def server_words(run: dict[str, Any]) -> str | None:
    """The server's own figures beside the client's, in a line (None when the server gave none), e.g.
    "server's own (timings): TTFT p50 41 ms (client +3 ms), decode 17.2 tok/s (client −0.1) — client − …"."""
    ttft, rate = run.get("server_ttft_ms"), run.get("server_decode_tokens_per_s")
    if ttft is None and rate is None:
        return None
    parts = []
    if ttft is not None:
        gap = run.get("ttft_minus_server_ms")
        parts.append(f"TTFT p50 {ttft:.0f} ms" + (f" (client {gap:+.0f} ms)" if gap is not None else ""))
    if rate is not None:
        gap = run.get("decode_minus_server_tokens_per_s")
        parts.append(f"decode {rate:.1f} tok/s" + (f" (client {gap:+.1f})" if gap is not None else ""))
    note = f" — {run['server_note']}" if run.get("server_note") else ""
    return f"server's own ({run.get('server_timings')}): {', '.join(parts)}{note}"


def settings_words(settings: object) -> str | None:
    """A context's load settings in a line: 'n_ctx=4096, parallel=2, flash_attn=off' (set ones only)."""
    if not isinstance(settings, dict):
        return None
    shown = {k: ("on" if v else "off") if isinstance(v, bool) else v for k, v in settings.items() if v is not None}
    return ", ".join(f"{k}={v}" for k, v in shown.items()) or None


def _cell(value: object, digits: int = 0) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:,.{digits}f}"
    return "—"


def report_markdown(result: dict[str, Any]) -> str:
    """A sweep's result (as `sweep` gives it, or read back from --save-result) as a Markdown report to
    share: the plain answer, its context, a table per load (each load's medians over its repeats), the
    server's own figures, failures with their reasons, and a busy machine."""
    context, slo = result.get("context", {}), result.get("slo", {})
    objective = Slo(slo.get("ttft_ms"), slo.get("tpot_ms"), slo.get("e2el_ms")).describe()
    lines = ["# Serving lab report", "", result.get("answer", ""), "", "## Context", "", "| | |", "|---|---|"]
    facts = {
        "Model": context.get("model"),
        "Model file": context.get("model_file"),
        "File hash (SHA-256)": context.get("model_sha256"),
        "Quantisation": context.get("quant"),
        "Target": context.get("target"),
        "Engine": context.get("engine"),
        "Engine version": context.get("engine_version"),
        "Hardware": context.get("hardware") or f"not this machine ({context.get('base_url')})",
        "Threads": context.get("threads"),
        "Load settings": settings_words(context.get("load_settings")),
        "Workload": " — ".join(str(w) for w in (context.get("workload"), context.get("workload_description")) if w),
        "Date": context.get("date"),
        "Objective (SLO)": f"{objective}, for {ATTAINMENT:.0%} of requests",
    }
    # (a server's words — its model's name and file — kept in their cell: no '|' or line break ends it)
    cell = lambda value: " ".join(str(value).replace("|", "\\|").split())  # noqa: E731
    lines += [f"| {name} | {cell(value)} |" for name, value in facts.items() if value]
    for load in result.get("loads", []):
        run = load["median"]
        repeats = load.get("repeats", 1)
        lines += ["", f"## {load['load']}" + (f" (medians of {repeats} repeats)" if repeats > 1 else ""), ""]
        lines += ["| figure | mean | p50 | p90 | p95 | p99 |", "|---|---:|---:|---:|---:|---:|"]
        for name, key in (("TTFT ms", "ttft_ms"), ("TPOT ms", "tpot_ms"), ("ITL ms", "itl_ms"), ("E2E ms", "e2el_ms")):
            d = run.get(key) or {}
            lines.append(
                f"| {name} | " + " | ".join(_cell(d.get(s)) for s in ("mean", "p50", "p90", "p95", "p99")) + " |"
            )
        attained = run.get("slo_attainment")
        lines += [
            "",
            f"Completed {run.get('completed')}, failed {run.get('failed')}; "
            f"{_cell(run.get('requests_per_s'), 2)} requests/s, {_cell(run.get('output_tokens_per_s'), 1)} output "
            f"tokens/s, goodput {_cell(run.get('goodput_requests_per_s'), 2)} requests/s, SLO attainment "
            + (f"{attained:.0%}." if isinstance(attained, int | float) else "—."),
        ]
        if said := server_words(run):
            lines += ["", f"{said[0].upper()}{said[1:]}."]
        failures = run.get("failures") or {}
        if failures:
            lines += ["", "Failures:", ""] + [f"- {count} × {reason}" for reason, count in failures.items()]
        if run.get("saturated"):
            lines += ["", f"Saturated: {run['saturated']}"]
        if run.get("busy"):
            lines += ["", f"Note — {run['busy']}."]
    return "\n".join(lines) + "\n"
