"""Inference metrics measured where tokens are produced (`time.perf_counter_ns`).

Definitions (the ones an inference engineer uses):
- TTFT: request start (before templating/tokenizing) to the first sampled token.
- prefill tokens/s: prompt tokens actually evaluated (not reused from the KV cache) / prefill time,
  where prefill time is from the start of evaluation to the first sampled token.
- decode tokens/s: (output tokens - 1) / (last token time - first token time); the first token
  belongs to prefill.
- inter-token latency (ITL): gaps between consecutive sampled tokens; TPOT is their mean.
- e2e: request start to the end of the generation.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field
from typing import Any


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default method), q in [0, 100]."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass(frozen=True)
class RunContext:
    """What makes a number meaningful: which model ran where, how."""

    model: str
    quantization: str
    backend: str
    threads: int
    gpu_layers: int
    n_ctx: int


@dataclass(frozen=True)
class GenerationMetrics:
    ttft_s: float | None
    prompt_tokens: int
    prompt_tokens_reused: int
    prefill_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    output_tokens: int
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    itl_p99_ms: float | None
    tpot_ms: float | None
    e2e_s: float
    stop_reason: str
    n_ctx: int
    context_used: int
    model: str
    quantization: str
    backend: str
    threads: int
    gpu_layers: int
    dropped_messages: int = 0
    # llama.cpp's own counters for the same generation (llama_perf_context), for cross-checking.
    llama_prefill_ms: float | None = None
    llama_prefill_tokens: int | None = None
    llama_decode_ms: float | None = None
    llama_decode_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationMetrics:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})

    def summary_line(self) -> str:
        """e.g. 'TTFT 0.21 s · 31.8 tok/s · 128 tokens · stop'."""
        parts = []
        if self.ttft_s is not None:
            parts.append(f"TTFT {self.ttft_s:.2f} s")
        if self.decode_tokens_per_s is not None:
            parts.append(f"{self.decode_tokens_per_s:.1f} tok/s")
        parts.append(f"{self.output_tokens} tokens")
        parts.append(self.stop_reason)
        return " · ".join(parts)


@dataclass
class MetricsRecorder:
    """Collects timestamps during one generation; `snapshot()` is cheap enough to call live."""

    context: RunContext
    t_start_ns: int = field(default_factory=time.perf_counter_ns)
    t_prefill_start_ns: int | None = None
    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0
    dropped_messages: int = 0
    token_times_ns: list[int] = field(default_factory=list)

    def prefill_started(self, prompt_tokens: int, reused: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.prompt_tokens_reused = reused
        self.t_prefill_start_ns = time.perf_counter_ns()

    def token(self) -> int:
        t = time.perf_counter_ns()
        self.token_times_ns.append(t)
        return t

    def finish(self, stop_reason: str, llama_perf: tuple[float, int, float, int] | None = None) -> GenerationMetrics:
        return self._build(stop_reason, time.perf_counter_ns(), llama_perf)

    def snapshot(self) -> GenerationMetrics:
        return self._build("running", time.perf_counter_ns(), None)

    def _build(
        self, stop_reason: str, t_end_ns: int, llama_perf: tuple[float, int, float, int] | None
    ) -> GenerationMetrics:
        times = self.token_times_ns
        n = len(times)
        ttft = (times[0] - self.t_start_ns) / 1e9 if n else None
        prefill_tokens = self.prompt_tokens - self.prompt_tokens_reused
        prefill_tps = None
        if n and self.t_prefill_start_ns is not None and times[0] > self.t_prefill_start_ns:
            prefill_tps = prefill_tokens / ((times[0] - self.t_prefill_start_ns) / 1e9)
        itl_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(times)]
        decode_tps = tpot = None
        if n >= 2 and times[-1] > times[0]:
            span_s = (times[-1] - times[0]) / 1e9
            decode_tps = (n - 1) / span_s
            tpot = span_s * 1e3 / (n - 1)
        c = self.context
        perf = llama_perf or (None, None, None, None)
        return GenerationMetrics(
            ttft_s=ttft,
            prompt_tokens=self.prompt_tokens,
            prompt_tokens_reused=self.prompt_tokens_reused,
            prefill_tokens_per_s=prefill_tps,
            decode_tokens_per_s=decode_tps,
            output_tokens=n,
            itl_p50_ms=percentile(itl_ms, 50),
            itl_p95_ms=percentile(itl_ms, 95),
            itl_p99_ms=percentile(itl_ms, 99),
            tpot_ms=tpot,
            e2e_s=(t_end_ns - self.t_start_ns) / 1e9,
            stop_reason=stop_reason,
            n_ctx=c.n_ctx,
            context_used=self.prompt_tokens + n,
            model=c.model,
            quantization=c.quantization,
            backend=c.backend,
            threads=c.threads,
            gpu_layers=c.gpu_layers,
            dropped_messages=self.dropped_messages,
            llama_prefill_ms=perf[0],
            llama_prefill_tokens=perf[1],
            llama_decode_ms=perf[2],
            llama_decode_tokens=perf[3],
        )


@dataclass
class LiveMetrics:
    """What a client can show while an answer streams, built from the events alone."""

    t_start_ns: int = 0
    t_prefill_ns: int = 0
    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0
    n_ctx: int = 0
    token_times_ns: list[int] = field(default_factory=list)

    def on_prompt(self, prompt_tokens: int, reused: int, n_ctx: int, t_start_ns: int, t_ns: int) -> None:
        self.prompt_tokens, self.prompt_tokens_reused, self.n_ctx = prompt_tokens, reused, n_ctx
        self.t_start_ns, self.t_prefill_ns = t_start_ns, t_ns

    def on_token(self, index: int, t_ns: int) -> None:
        if index >= len(self.token_times_ns):
            self.token_times_ns.append(t_ns)

    def snapshot(self, now_ns: int | None = None) -> dict[str, float | int | None]:
        now_ns = now_ns if now_ns is not None else time.perf_counter_ns()
        t = self.token_times_ns
        n = len(t)
        ttft = (t[0] - self.t_start_ns) / 1e9 if n else None
        prefill = None
        if n and t[0] > self.t_prefill_ns:
            prefill = (self.prompt_tokens - self.prompt_tokens_reused) / ((t[0] - self.t_prefill_ns) / 1e9)
        decode = (n - 1) / ((t[-1] - t[0]) / 1e9) if n >= 2 and t[-1] > t[0] else None
        return {
            "elapsed_s": (now_ns - self.t_start_ns) / 1e9 if self.t_start_ns else 0.0,
            "ttft_s": ttft,
            "prefill_tokens_per_s": prefill,
            "decode_tokens_per_s": decode,
            "output_tokens": n,
            "context_used": self.prompt_tokens + n,
            "n_ctx": self.n_ctx,
        }

    def itl_ms(self) -> list[float]:
        return [(b - a) / 1e6 for a, b in itertools.pairwise(self.token_times_ns)]
