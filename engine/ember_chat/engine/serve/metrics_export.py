"""GET /metrics: the API server's own traffic in Prometheus's text exposition format (version 0.0.4),
per model (a `model` label, so a server that serves several models adds series, not names).

`MetricsRegistry` is fed by the server: every HTTP request answered (`request`, from the same
`RequestRecord` the request listener is told of) and every generation the engine ran for an API request
(`generation`, from its `GenerationMetrics` and inter-token gaps, on the engine thread). The window's
own chats are not counted: what a scraper sees is what the API's clients did. The gauges (queue,
slots) and the model loads are read from the engine service when /metrics is asked, so they are never
stale. Written by hand (no `prometheus_client`): the format is small, and the escaping is the spec's.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service.requests import QueueState
from ember_chat.engine.serve.request_log import GENERATION_PATHS, HttpExchange

if TYPE_CHECKING:
    from ember_chat.engine.inference.pool.pool import ModelPool
    from ember_chat.engine.inference.service.engine import EngineService

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OTHER_ROUTE = "other"  # every path the server does not serve: one series, whatever clients ask for

# Bucket bounds in seconds (Prometheus's base unit). TTFT from a warm small model (tens of ms) to a long
# prompt on a CPU (a minute); ITL from a GPU's ~1 ms per token to a CPU's slow second; a request from a
# health check's millisecond to a long answer's minutes.
TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
REQUEST_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

Labels = tuple[tuple[str, str], ...]  # (name, value) pairs in the order they are written


def escape_label(value: str) -> str:
    """A label value as the text format writes it between quotes: backslash, double quote and line feed
    escaped (the spec's three)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text: backslash and line feed escaped (a quote stays as it is there)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample's value: whole numbers without a fraction, +Inf/-Inf/NaN as the format spells them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def route_label(path: str, served: Iterable[str], prefixes: Iterable[str] = ()) -> str:
    """A request's `route` label: the path when the server serves it, `prefix{id}` for a path under one
    of `prefixes` (a stored response's id would make a series per id), else `other` (a scanner's guesses
    must not grow the series without bound)."""
    if path in set(served):
        return path
    for prefix in prefixes:
        if path.startswith(prefix):
            return prefix + "{id}"
    return OTHER_ROUTE


@dataclass
class _Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bucket, not cumulative (the last: over every bound)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        # `le` is "less than or equal": a value on a bound belongs to that bound's bucket
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1


@dataclass(frozen=True)
class EngineView:
    """What the engine service says when /metrics is asked: the model served (its name here; "" when
    none is loaded), its queue, and how many times each model was loaded (by its name here)."""

    model: str
    queue: QueueState
    loads: Mapping[str, int]
    evictions: Mapping[str, int] = field(default_factory=dict)  # the model pool's, by model
    kv_cells: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # (used, context size), by model


def kv_cells(model: str, service: EngineService, pool: ModelPool | None) -> dict[str, tuple[int, int]]:
    """(KV cells used, context size) of every local model loaded here, by its name here: the server's
    own engine's (`model`, "" when none is loaded) and each engine of the pool's. Read from what each
    engine thread last published (EngineService.kv_cells): /metrics never waits for a generation."""
    engines = [(model, service)] if model else []
    if pool is not None:
        engines += pool.engines()
    return {name: cells for name, engine in engines if (cells := engine.kv_cells()) is not None}


class MetricsRegistry:
    """The API server's counters and histograms, thread-safe (connection threads and the engine thread
    write, a scrape reads). `render` writes them with the engine's gauges in the text format."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, str, str, str]] = Counter()  # (model, route, method, code)
        self._durations: dict[tuple[str, str], _Histogram] = {}  # (model, route)
        self._prompt: Counter[str] = Counter()
        self._cached: Counter[str] = Counter()
        self._output: Counter[str] = Counter()
        self._generations: Counter[tuple[str, str]] = Counter()  # (model, stop reason)
        self._ttft: dict[str, _Histogram] = {}
        self._itl: dict[str, _Histogram] = {}
        self._evictions: Counter[str] = Counter()

    # ----- fed by the server
    def request(self, model: str, route: str, exchange: HttpExchange) -> None:
        """One HTTP request answered (any status), its path read as `route` (`route_label`). A generation
        route's time is the end-to-end latency its client saw (queue, prompt, answer, writing)."""
        with self._lock:
            self._requests[(model, route, exchange.method, str(exchange.status))] += 1
            if exchange.method == "POST" and exchange.path in GENERATION_PATHS:
                hist = self._durations.setdefault((model, route), _Histogram(REQUEST_BUCKETS))
                hist.observe(exchange.duration_s)

    def generation(self, model: str, metrics: GenerationMetrics, itl_ms: list[float]) -> None:
        """One generation the engine ran for an API request (each of a request's `n` samples), finished
        or stopped: its tokens were evaluated and written either way."""
        with self._lock:
            self._prompt[model] += metrics.prompt_tokens
            self._cached[model] += metrics.prompt_tokens_reused
            self._output[model] += metrics.output_tokens
            self._generations[(model, metrics.stop_reason)] += 1
            if metrics.ttft_s is not None:
                self._ttft.setdefault(model, _Histogram(TTFT_BUCKETS)).observe(metrics.ttft_s)
            itl = self._itl.setdefault(model, _Histogram(ITL_BUCKETS))
            for gap in itl_ms:
                itl.observe(gap / 1000.0)

    def evicted(self, model: str) -> None:
        """A model was unloaded to make room for another, or at the end of its idle time (the model pool's
        path, once the server serves several models)."""
        with self._lock:
            self._evictions[model] += 1

    # ----- the text format
    def render(self, engine: EngineView) -> str:
        with self._lock:
            out = _Writer()
            out.family(
                "ember_http_requests_total",
                "counter",
                "HTTP requests this API server answered, by route, method and status code (refusals included; "
                "the window's own chats are not API requests).",
                (
                    ((("model", m), ("route", r), ("method", meth), ("code", c)), n)
                    for (m, r, meth, c), n in sorted(self._requests.items())
                ),
            )
            out.histogram(
                "ember_request_duration_seconds",
                "End-to-end latency of the API's generation requests: from the request's arrival to the last "
                "byte of its answer (queue wait, prompt, every sample, writing), any status.",
                (((("model", m), ("route", r)), h) for (m, r), h in sorted(self._durations.items())),
            )
            models = sorted(
                {engine.model} - {""}
                | set(self._prompt)
                | set(engine.loads)
                | set(self._evictions)
                | set(engine.evictions)
            )  # every model something is known of, so a counter reads 0 before its first event
            out.family(
                "ember_generations_total",
                "counter",
                "Generations the engine ran for the API's requests (one per sample), by stop reason.",
                (((("model", m), ("reason", r)), n) for (m, r), n in sorted(self._generations.items())),
            )
            for name, counter, what in (
                (
                    "ember_prompt_tokens_total",
                    self._prompt,
                    "Prompt tokens of the API's generations (cached included).",
                ),
                (
                    "ember_prompt_tokens_cached_total",
                    self._cached,
                    "Prompt tokens of the API's generations reused from the KV cache (not evaluated again).",
                ),
                ("ember_output_tokens_total", self._output, "Tokens the API's generations answered."),
            ):
                out.family(name, "counter", what, (((("model", m),), counter[m]) for m in models))
            out.histogram(
                "ember_time_to_first_token_seconds",
                "Time to the first token of each API generation, from its request's start in the engine.",
                (((("model", m),), h) for m, h in sorted(self._ttft.items())),
            )
            out.histogram(
                "ember_inter_token_latency_seconds",
                "Gaps between consecutive output tokens of the API's generations.",
                (((("model", m),), h) for m, h in sorted(self._itl.items())),
            )
            self._engine_gauges(out, engine)
            out.family(
                "ember_model_loads_total",
                "counter",
                "Times the engine service loaded each model (the window's loads included: the engine is shared).",
                (((("model", m),), engine.loads.get(m, 0)) for m in models),
            )
            out.family(
                "ember_model_evictions_total",
                "counter",
                "Models unloaded to make room for another or at the end of their idle time.",
                (((("model", m),), self._evictions[m] + engine.evictions.get(m, 0)) for m in models),
            )
            return out.text()

    @staticmethod
    def _engine_gauges(out: _Writer, engine: EngineView) -> None:
        """The queue now, by client kind: the engine serves the window and the API from one queue, so a
        request of the API waits behind the window's too."""
        queue = engine.queue
        running = queue.running_all or ((queue.running,) if queue.running is not None else ())
        clients = sorted({"api", "window"} | {r.client for r in running} | {r.client for r in queue.queued})
        model = engine.model
        queued = Counter(r.client for r in queue.queued)
        busy = Counter(r.client for r in running)
        out.family(
            "ember_queue_depth",
            "gauge",
            "Requests waiting in the engine's queue now, by client kind.",
            (((("model", model), ("client", c)), queued[c]) for c in clients),
        )
        out.family(
            "ember_slots_busy",
            "gauge",
            "Generations (or exclusive jobs) running on the engine now, by client kind.",
            (((("model", model), ("client", c)), busy[c]) for c in clients),
        )
        cells = sorted(engine.kv_cells.items())
        out.family(
            "ember_kv_cells_used",
            "gauge",
            "KV cache cells the loaded model's sequences hold now (the window's conversation and the API's "
            "slots alike), as of the engine's last step.",
            (((("model", m),), used) for m, (used, _total) in cells),
        )
        out.family(
            "ember_kv_cells_total",
            "gauge",
            "KV cache cells of the loaded model's context: its context size (every sequence shares them).",
            (((("model", m),), total) for m, (_used, total) in cells),
        )


class _Writer:
    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[Labels, float]]) -> None:
        self._lines += [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} {kind}"]
        for labels, value in samples:
            self._sample(name, labels, value)

    def histogram(self, name: str, help_text: str, series: Iterable[tuple[Labels, _Histogram]]) -> None:
        self._lines += [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} histogram"]
        for labels, hist in series:
            running = 0
            for bound, count in zip((*hist.bounds, math.inf), hist.counts, strict=True):
                running += count  # buckets are cumulative
                self._sample(f"{name}_bucket", (*labels, ("le", format_value(bound))), running)
            self._sample(f"{name}_sum", labels, hist.total)
            self._sample(f"{name}_count", labels, hist.n)

    def _sample(self, name: str, labels: Labels, value: float) -> None:
        inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
        self._lines.append(f"{name}{{{inner}}} {format_value(value)}" if inner else f"{name} {format_value(value)}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
