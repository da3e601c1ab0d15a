"""A run's figures, as serving engineers state them (the keys of vLLM's `bench serve` results where
they exist): TTFT, ITL, TPOT and end-to-end latency (mean, p50, p90, p95, p99, in ms), requests and
tokens per second, failed requests with their reasons, and goodput — the requests per second that met
the latency objective (SLO) — with the share that met it. A failed request meets no objective.

The default objective is a chat's: the first token within 1 s, then at least 10 tokens/s
(TPOT ≤ 100 ms), the answer within 60 s."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ember_chat.engine.bench.serving.client import RequestResult
from ember_chat.engine.bench.serving.load import LoadRun
from ember_chat.engine.errors import EmberError

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Slo:
    ttft_ms: float | None = 1000.0
    tpot_ms: float | None = 100.0
    e2el_ms: float | None = 60_000.0

    def met(self, r: RequestResult) -> bool:
        if not r.ok or r.ttft_s is None or r.e2el_s is None:
            return False
        if self.ttft_ms is not None and r.ttft_s * 1000 > self.ttft_ms:
            return False
        tpot = r.tpot_s
        if self.tpot_ms is not None and tpot is not None and tpot * 1000 > self.tpot_ms:
            return False
        return self.e2el_ms is None or r.e2el_s * 1000 <= self.e2el_ms

    def describe(self) -> str:
        parts = []
        if self.ttft_ms is not None:
            parts.append(f"TTFT ≤ {self.ttft_ms:g} ms")
        if self.tpot_ms is not None:
            parts.append(f"TPOT ≤ {self.tpot_ms:g} ms")
        if self.e2el_ms is not None:
            parts.append(f"E2E ≤ {self.e2el_ms:g} ms")
        return ", ".join(parts) or "none"


def parse_slo(text: str) -> Slo:
    """'ttft=1s,tpot=100ms,e2el=30s' (units ms or s; a metric left out has no limit)."""
    limits: dict[str, float | None] = {"ttft_ms": None, "tpot_ms": None, "e2el_ms": None}
    for part in text.split(","):
        if not part.strip():
            continue
        name, _, value = part.partition("=")
        key = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms", "e2e": "e2el_ms"}.get(name.strip().lower())
        if key is None or not value.strip():
            raise EmberError(f"--slo takes ttft=…, tpot=…, e2el=… (e.g. ttft=1s,tpot=100ms), got {part.strip()!r}.")
        limits[key] = _milliseconds(value.strip(), part.strip())
    return Slo(**limits)


def _milliseconds(value: str, part: str) -> float:
    scale = 1.0
    if value.endswith("ms"):
        value = value[:-2]
    elif value.endswith("s"):
        value, scale = value[:-1], 1000.0
    try:
        number = float(value) * scale
    except ValueError:
        raise EmberError(f"--slo: {part!r} is not a time (say 800ms or 1.5s).") from None
    if not number > 0:
        raise EmberError(f"--slo: {part!r} must be more than 0.")
    return number


def percentile(ordered: list[float], q: float) -> float:
    """The q-th percentile of sorted values, linearly interpolated (numpy's default)."""
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def distribution(values_s: list[float]) -> dict[str, float | None]:
    """mean, p50, p90, p95, p99 in milliseconds (None without values)."""
    if not values_s:
        return {"mean": None, **{f"p{q}": None for q in PERCENTILES}}
    ordered = sorted(v * 1000 for v in values_s)
    return {"mean": statistics.fmean(ordered), **{f"p{q}": percentile(ordered, q) for q in PERCENTILES}}


def summarize(run: LoadRun, slo: Slo) -> dict[str, Any]:
    """The run's figures (JSON-ready)."""
    done = [r for r in run.results if r.ok]
    failed = [r for r in run.results if not r.ok]
    seconds = run.duration_s or float("nan")
    met = sum(1 for r in run.results if slo.met(r))
    output = sum(r.output_tokens for r in done)
    prompt = sum(r.prompt_tokens or 0 for r in done)
    late = [max(0.0, r.sent_s - r.scheduled_s) for r in run.results]
    plan = run.plan
    return {
        "load": plan.label,
        "concurrency": plan.concurrency,
        "request_rate": plan.rate,
        "burstiness": plan.burstiness if plan.rate is not None else None,
        "duration_s": run.duration_s,
        "completed": len(done),
        "failed": len(failed),
        "failures": dict(Counter(r.error for r in failed if r.error)),
        "saturated": run.saturated,
        "cancelled": run.cancelled,
        "ttft_ms": distribution([r.ttft_s for r in done if r.ttft_s is not None]),
        "tpot_ms": distribution([t for r in done if (t := r.tpot_s) is not None]),
        "itl_ms": distribution([gap for r in done for gap in r.itl_s]),
        "e2el_ms": distribution([r.e2el_s for r in done if r.e2el_s is not None]),
        "requests_per_s": len(done) / seconds,
        "output_tokens_per_s": output / seconds,
        "total_tokens_per_s": (output + prompt) / seconds,
        "total_input_tokens": prompt,
        "total_output_tokens": output,
        "goodput_requests_per_s": met / seconds,
        "slo_attainment": met / len(run.results) if run.results else None,
        "send_lateness_ms": distribution(late),
        "document": landing_stall(run),
        "tools": tool_turns(run),
        **server_side(done),
    }


SERVER_NOTES = {
    "timings": "client − server: the TTFT gap is the queueing, network and HTTP before llama-server's clock "
    "starts (and the first chunk's way back); its predicted_per_second leaves out the first token, as 1/TPOT "
    "does, so the rates measure one span",
    "ember": "client − server: the TTFT gap is the queueing, network and HTTP before Ember's clock starts (and "
    "the first chunk's way back); its decode_tokens_per_s leaves out the first token, as 1/TPOT does",
}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def server_side(done: list[RequestResult]) -> dict[str, Any]:
    """What the server said of its own timing (llama.cpp's `timings`, Ember's `ember` metrics), beside the
    client's: the medians of its TTFT (prompt_ms; ttft_s) and decode rate (predicted_per_second;
    decode_tokens_per_s) over the answered requests that carried them, and the medians of the per-request
    differences client − server (the client's TTFT and 1/TPOT). None where no request carried them."""
    ttfts: list[float] = []
    rates: list[float] = []
    ttft_gaps: list[float] = []
    rate_gaps: list[float] = []
    sources: Counter[str] = Counter()
    for r in done:
        timings = r.server or {}
        source = timings.get("source")
        if source == "timings":
            ttft_ms, rate = _number(timings.get("prompt_ms")), _number(timings.get("predicted_per_second"))
        elif source == "ember":
            ttft_s, rate = _number(timings.get("ttft_s")), _number(timings.get("decode_tokens_per_s"))
            ttft_ms = ttft_s * 1000 if ttft_s is not None else None
        else:
            continue
        sources[source] += 1
        if ttft_ms is not None:
            ttfts.append(ttft_ms)
            if r.ttft_s is not None:
                ttft_gaps.append(r.ttft_s * 1000 - ttft_ms)
        if rate is not None:
            rates.append(rate)
            if tpot := r.tpot_s:
                rate_gaps.append(1 / tpot - rate)
    median = lambda values: statistics.median(values) if values else None  # noqa: E731
    source = sources.most_common(1)[0][0] if sources else None
    return {
        "server_timings": source,
        "server_ttft_ms": median(ttfts),
        "server_decode_tokens_per_s": median(rates),
        "ttft_minus_server_ms": median(ttft_gaps),
        "decode_minus_server_tokens_per_s": median(rate_gaps),
        "server_note": SERVER_NOTES.get(source) if source else None,
    }


def landing_stall(run: LoadRun) -> dict[str, Any] | None:
    """What the mid-run document did to the others (None without one): the gaps between the other
    requests' chunks that ended before it was sent, against those that overlapped its prefill (from
    its sending to its first token; to its end when it failed) — their p99 and the longest."""
    doc = run.landing
    if doc is None:
        return None
    begin = doc.sent_s
    if doc.ttft_s is not None:
        end = begin + doc.ttft_s
    else:
        end = begin + (doc.e2el_s if doc.e2el_s is not None else run.duration_s)
    before: list[float] = []
    during: list[float] = []
    for r in run.results:
        if not r.ok or r.ttft_s is None:
            continue
        t = r.sent_s + r.ttft_s  # (the first chunk; each gap ends at the next)
        for gap in r.itl_s:
            start, t = t, t + gap
            if t <= begin:
                before.append(gap * 1000)
            elif start < end:
                during.append(gap * 1000)
    before.sort()
    during.sort()
    p99_before = percentile(before, 99) if before else None
    p99_during = percentile(during, 99) if during else None
    return {
        "sent_s": begin,
        "ok": doc.ok,
        "error": doc.error,
        "prompt_tokens": doc.prompt_tokens,
        "ttft_ms": doc.ttft_s * 1000 if doc.ttft_s is not None else None,
        "itl_p99_before_ms": p99_before,
        "itl_p99_during_ms": p99_during,
        "itl_max_during_ms": during[-1] if during else None,
        "gaps_before": len(before),
        "gaps_during": len(during),
        "stall_ms": p99_during - p99_before if p99_before is not None and p99_during is not None else None,
    }


def tool_turns(run: LoadRun) -> dict[str, Any] | None:
    """The users' turns that got their final answer (the `tools` workload; None for others): how many,
    how many called the tool on the way, and the time from the user's turn to the final answer."""
    ends = [r.turn for r in run.results if r.turn is not None]
    if not ends:
        return None
    return {
        "turns": len(ends),
        "called_tool": sum(1 for t in ends if t.called_tool),
        "turn_ms": distribution([t.seconds for t in ends]),
    }


# Student's t, two-sided 95 %, by degrees of freedom 1…30 (no scipy in the engine's dependencies)
_T95 = (
    *(12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228),
    *(2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086),
    *(2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
)
INTERVAL_METHOD = "Student t-interval (95 %) of the mean over the repeats; the figure is the repeats' median"


def t_interval(values: list[float]) -> tuple[float, float] | None:
    """The 95 % t-interval of the mean of `values` (None under 2 values)."""
    n = len(values)
    if n < 2:
        return None
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.96 + 2.5 / (n - 1)  # (within 0.002 of t past 30)
    mean, half = statistics.fmean(values), t * statistics.stdev(values) / n**0.5
    return mean - half, mean + half


def over_repeats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The repeats of one load as one: every figure's median over the repeats (`median`, shaped like one
    run's summary) and its 95 % interval (`interval95`: [low, high] where the figure is a number)."""

    def number(v: object) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    def medians(items: list[Any]) -> Any:
        if any(isinstance(item, dict) for item in items):  # (a dict in some repeats: those)
            items = [item for item in items if isinstance(item, dict)]
        first = items[0]
        if isinstance(first, dict):
            keys = dict.fromkeys(k for item in items for k in item)
            return {k: medians([item.get(k) for item in items]) for k in keys}
        if all(number(v) for v in items):
            return first if len(set(items)) == 1 else statistics.median(items)  # (2 users stay 2, not 2.0)
        return next((v for v in items if v not in (None, {}, False)), first)  # (a saturation said once stays)

    def intervals(items: list[Any]) -> Any:
        if any(isinstance(item, dict) for item in items):  # (a dict in some repeats: those)
            items = [item for item in items if isinstance(item, dict)]
        first = items[0]
        if isinstance(first, dict):
            keys = dict.fromkeys(k for item in items for k in item)
            found = {k: intervals([item.get(k) for item in items]) for k in keys}
            return {k: v for k, v in found.items() if v is not None}
        values = [v for v in items if number(v)]
        if len(values) != len(items):
            return None
        bounds = t_interval([float(v) for v in values])
        return None if bounds is None else [bounds[0], bounds[1]]

    return {"repeats": len(runs), "median": medians(runs), "interval95": intervals(runs), "method": INTERVAL_METHOD}
