"""The serving lab's runs in the shape of vLLM's `vllm bench serve --save-result` JSON (and as CSV rows),
so that a run here sits beside a vLLM or SGLang benchmark in the same notebook or dashboard.

One dict per load run, with vLLM's keys: the traffic (`request_rate` "inf" for a closed loop, whose
users are vLLM's `max_concurrency`), the totals and throughputs, `mean_/median_/std_/pNN_` of TTFT, TPOT,
ITL and E2E latency in ms (vLLM's percentile is numpy's linear one, as summary.percentile), and the
per-request lists of `--save-detailed` (input_lens, output_lens, ttfts and itls in seconds, errors; a
failed request has 0 and its reason, as vLLM's). `generated_texts` is left out: the lab does not keep
the answers. What vLLM has no key for (the load's label, SLO attainment, saturation) comes under
`ember_`-prefixed keys."""

from __future__ import annotations

import csv
import datetime
import io
import statistics
from typing import Any

from ember_chat.engine.bench.serving.load import LoadRun
from ember_chat.engine.bench.serving.summary import Slo, percentile

EXPORT_PERCENTILES = (90, 95, 99)  # (vLLM's default --metric-percentiles is 99; 90 and 95 are common asks)
BACKEND = "openai-chat"  # vLLM's name for a streamed /v1/chat/completions client, which the lab is


def _metric(name: str, values_s: list[float]) -> dict[str, float | None]:
    ms = sorted(v * 1000 for v in values_s)
    figures: dict[str, float | None] = {
        f"mean_{name}_ms": statistics.fmean(ms) if ms else None,
        f"median_{name}_ms": statistics.median(ms) if ms else None,
        f"std_{name}_ms": statistics.pstdev(ms) if ms else None,  # (numpy's np.std: the population's)
    }
    for q in EXPORT_PERCENTILES:
        figures[f"p{q}_{name}_ms"] = percentile(ms, q) if ms else None
    return figures


def vllm_result(run: LoadRun, context: dict[str, Any], slo: Slo) -> dict[str, Any]:
    """One load run as vLLM's save-result JSON (keys as vLLM writes them, values JSON-ready)."""
    plan = run.plan
    done = [r for r in run.results if r.ok]
    seconds = run.duration_s or float("nan")
    output = sum(r.output_tokens for r in done)
    prompt = sum(r.prompt_tokens or 0 for r in done)
    met = sum(1 for r in run.results if slo.met(r))
    when = context.get("date")
    moment = datetime.datetime.fromisoformat(when) if isinstance(when, str) else datetime.datetime.now(datetime.UTC)
    result: dict[str, Any] = {
        "date": moment.strftime("%Y%m%d-%H%M%S"),
        "backend": BACKEND,
        "endpoint_type": BACKEND,
        "label": context.get("engine"),
        "model_id": context.get("model"),
        "tokenizer_id": context.get("model"),
        "num_prompts": len(run.results),
        "request_rate": plan.rate if plan.rate is not None else "inf",
        "burstiness": plan.burstiness,
        "max_concurrency": plan.concurrency,
        "duration": run.duration_s,
        "completed": len(done),
        "total_input_tokens": prompt,
        "total_output_tokens": output,
        "request_throughput": len(done) / seconds,
        "request_goodput": met / seconds,
        "output_throughput": output / seconds,
        "total_token_throughput": (output + prompt) / seconds,
        **_metric("ttft", [r.ttft_s for r in done if r.ttft_s is not None]),
        **_metric("tpot", [t for r in done if (t := r.tpot_s) is not None]),
        **_metric("itl", [gap for r in done for gap in r.itl_s]),
        **_metric("e2el", [r.e2el_s for r in done if r.e2el_s is not None]),
        "input_lens": [r.prompt_tokens or 0 for r in run.results],
        "output_lens": [r.output_tokens if r.ok else 0 for r in run.results],
        "ttfts": [r.ttft_s if r.ok and r.ttft_s is not None else 0.0 for r in run.results],
        "itls": [list(r.itl_s) if r.ok else [] for r in run.results],
        "errors": [r.error or "" for r in run.results],
        "ember_load": plan.label,
        "ember_workload": context.get("workload"),
        "ember_base_url": context.get("base_url"),
        "ember_slo_attainment": met / len(run.results) if run.results else None,
        "ember_saturated": run.saturated,
    }
    return result


def csv_text(results: list[dict[str, Any]]) -> str:
    """One row per load run: every figure of vllm_result that is not a per-request list."""
    columns = [key for key, value in results[0].items() if not isinstance(value, list)] if results else []
    for extra in results[1:]:
        columns += [key for key, value in extra.items() if not isinstance(value, list) and key not in columns]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in results:
        writer.writerow({key: "" if row.get(key) is None else row.get(key) for key in columns})
    return out.getvalue()


def runs_csv(result: dict[str, Any]) -> str:
    """A row per load run of a sweep's result (report.sweep; knobs.knob_sweep's name their setting first):
    its repeat, figures (ms, per second) and failures, for a spreadsheet (the window's Export CSV;
    csv_text is vLLM's shape)."""
    out = io.StringIO()
    writer = csv.writer(out)
    swept = any("setting" in r for r in result["runs"])
    head = [*(["setting"] if swept else []), "load", "repeat", "concurrency", "request_rate", "completed"]
    head += ["failed", "duration_s"]
    dists = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
    head += [f"{d}_{s}" for d in dists for s in ("mean", "p50", "p90", "p95", "p99")]
    rates = ("requests_per_s", "output_tokens_per_s", "total_tokens_per_s", "goodput_requests_per_s")
    head += [*rates, "slo_attainment", "saturated", "cancelled", "failures"]
    writer.writerow(head)
    for r in result["runs"]:
        row: list[object] = [
            *([r.get("setting")] if swept else []),
            r["load"],
            r.get("repeat"),
            r["concurrency"],
            r["request_rate"],
            r["completed"],
            r["failed"],
            r["duration_s"],
        ]
        row += [r[d][s] for d in dists for s in ("mean", "p50", "p90", "p95", "p99")]
        row += [r[k] for k in rates]
        failures = "; ".join(f"{n}× {why}" for why, n in r["failures"].items())
        row += [r["slo_attainment"], r["saturated"] or "", r["cancelled"], failures]
        writer.writerow(["" if v is None else v for v in row])
    return out.getvalue()
