"""Inference metrics measured where tokens are produced or received (`time.perf_counter_ns`).

Definitions (the ones an inference engineer uses, as `vllm bench serve` and GenAI-Perf define them):
- TTFT: request start (before templating/tokenizing, or before the HTTP request) to the first token
  of the answer.
- prefill tokens/s: prompt tokens actually evaluated (not reused from the KV cache) / prefill time,
  where prefill time is from the start of evaluation to the first token.
- decode tokens/s: (output tokens - 1) / (last token time - first token time); the first token
  belongs to prefill.
- inter-token latency (ITL): gaps between consecutive tokens (over tokens, not network chunks: a
  chunk that carries k tokens counts as k tokens spread over its gap); TPOT is their mean.
- e2e: request start to the end of the generation.
- output tokens: the tokens of the answer (an end-of-generation token is not part of it).

One recorder computes them all, live (`snapshot`) and at the end (`finish`), so a live figure and
the final record never disagree.
"""

from __future__ import annotations

import functools
import itertools
import time
import types
import typing
from dataclasses import asdict, dataclass, field
from typing import Any

from ember_chat.engine.inference.wording import ENGLISH, Wording


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
    """What makes a number meaningful: which model ran where, how. Local-only facts are optional."""

    model: str
    quantization: str | None
    backend: str
    threads: int | None
    gpu_layers: int | None
    n_ctx: int
    connection: str | None = None  # the remote connection's name


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
    quantization: str | None
    backend: str
    threads: int | None
    gpu_layers: int | None
    dropped_messages: int = 0
    # llama.cpp's own counters for the same generation (llama_perf_context, or a llama.cpp server's
    # `timings`), for cross-checking.
    llama_prefill_ms: float | None = None
    llama_prefill_tokens: int | None = None
    llama_decode_ms: float | None = None
    llama_decode_tokens: int | None = None
    connection: str | None = None
    # How output_tokens was counted: "exact" (sampled here, or reported by the server), "tokenized"
    # (the answer counted with the server's own tokenizer: its stream reported no usage) or
    # "estimated" (neither: one token per streamed chunk).
    token_count: str = "exact"
    thinking_tokens: int = 0  # of output_tokens, those inside the model's thinking
    ttfat_s: float | None = None  # time to the first token of the answer proper (after the thinking)
    seed: int | None = None  # the sampling seed actually used (reproduces the answer)
    server_timings: dict[str, Any] | None = None  # the remote server's own figures, as it sent them
    # Time spent encoding the prompt's images with the projector (0.0 when every image's embedding was
    # cached from an earlier turn; None when the prompt has no image). Part of TTFT, not of prefill.
    image_encode_ms: float | None = None
    # An answer asked for as JSON (response_format): "valid" when it parses and matches the schema, else
    # what is wrong with it ("not JSON", "age is required"); None when free text was asked for.
    json_check: str | None = None
    prompt_tokens_restored: int = 0  # of prompt_tokens_reused, those restored from a saved KV snapshot
    # The answer stopped inside a UTF-8 character (max tokens, Stop): the bytes of it written so far, in
    # hex ("d8"). They are not in the text (never a U+FFFD); a Continue starts from them.
    held_utf8: str | None = None
    # Speculative decoding (inference/llama/speculative.py): tokens drafted, and of those accepted by the
    # model; None when it did not run. Its mode ("auto", "ngram"); the answer's decode time without it over
    # the time with it (None until a plain and a verify step were timed); whether "auto" stopped it.
    speculative_drafted: int | None = None
    speculative_accepted: int | None = None
    speculative_mode: str | None = None
    speculative_speedup: float | None = None
    speculative_stopped: bool | None = None
    # Why an answer that asked for speculation decoded without it (speculative.OFF_*: "grammar", "images",
    # "logprobs", "recurrent"); None when it ran or was not asked for.
    speculative_off: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationMetrics:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_stored(cls, data: object) -> GenerationMetrics | None:
        """A message's stored metrics, which an imported chat file may have written (`{"ttft_s": "x"}`, a
        field missing): None unless every field has a value of its type, so drawing the message never
        fails on them."""
        if not isinstance(data, dict):
            return None
        hints = _field_types()
        known = {k: v for k, v in data.items() if k in hints}
        if not all(_fits(v, hints[k]) for k, v in known.items()):
            return None
        try:
            return cls(**known)
        except TypeError:  # a field without a default is missing
            return None

    def speculative_share(self) -> dict[str, str]:
        """{"percent": "62", "drafted": "410", "speedup": "1.9"}: the share of drafted tokens the model
        accepted, and the speedup ("" when not measured; call it only where speculative_drafted is more
        than 0)."""
        drafted = self.speculative_drafted or 0
        percent = round(100 * (self.speculative_accepted or 0) / drafted) if drafted else 0
        speedup = f"{self.speculative_speedup:.1f}" if self.speculative_speedup is not None else ""
        return {"percent": str(percent), "drafted": f"{drafted:,}", "speedup": speedup}

    def speculative_text(self, words: Wording = ENGLISH) -> str:
        """'speculative 62 % of 410 accepted, 1.9×', and that "auto" stopped it where it did."""
        share = self.speculative_share()
        text = words.speculative.format(**share)
        if share["speedup"]:
            text += ", " + words.speculative_speedup.format(**share)
        if self.speculative_stopped:
            text += " (" + words.speculative_stopped + ")"
        return text

    def summary_line(self, words: Wording = ENGLISH) -> str:
        """e.g. 'TTFT 0.21 s · 31.8 tok/s · 128 tokens · stop' (in the window's language with its words)."""
        parts = []
        if self.ttft_s is not None:
            parts.append(words.ttft.format(seconds=f"{self.ttft_s:.2f}"))
        if self.decode_tokens_per_s is not None:
            parts.append(words.decode.format(rate=f"{self.decode_tokens_per_s:.1f}"))
        parts.append(words.token_count(self.output_tokens, estimated=self.token_count == "estimated"))
        if self.thinking_tokens:
            parts.append(words.thinking.format(count=self.thinking_tokens))
        parts.append(words.reason(self.stop_reason))
        if self.json_check == "valid":
            parts.append(words.valid_json)
        elif self.json_check is not None:
            parts.append(words.invalid_json.format(problem=self.json_check))
        if self.speculative_drafted:  # (only where speculation ran and drafted something)
            parts.append(self.speculative_text(words))
        if self.seed is not None:
            parts.append(words.seed.format(seed=self.seed))
        if self.connection:
            parts.append(self.connection)
        return " · ".join(parts)


@dataclass
class MetricsRecorder:
    """Collects timestamps during one generation; `snapshot()` is cheap enough to call live."""

    context: RunContext
    t_start_ns: int = field(default_factory=time.perf_counter_ns)
    t_prefill_start_ns: int | None = None
    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0
    prompt_tokens_restored: int = 0
    dropped_messages: int = 0
    token_times_ns: list[int] = field(default_factory=list)
    thinking_tokens: int = 0
    t_first_answer_ns: int | None = None

    def prefill_started(self, prompt_tokens: int, reused: int, t_ns: int | None = None, restored: int = 0) -> None:
        """`reused`: prompt tokens already in the KV cache, `restored` of them from a snapshot."""
        self.prompt_tokens = prompt_tokens
        self.prompt_tokens_reused = reused
        self.prompt_tokens_restored = restored
        self.t_prefill_start_ns = time.perf_counter_ns() if t_ns is None else t_ns

    def take_back(self, count: int) -> None:
        """The last `count` answer tokens were taken back (generated again under a tool call's grammar)."""
        if count > 0:
            del self.token_times_ns[-count:]

    def token(self, t_ns: int | None = None, count: int = 1, thinking: bool = False) -> int:
        """Record `count` tokens that arrived at `t_ns`. Several tokens in one arrival (a network
        chunk) are spread evenly over the gap since the previous one, so ITL stays over tokens."""
        t = time.perf_counter_ns() if t_ns is None else t_ns
        if thinking:
            self.thinking_tokens += count
        elif self.t_first_answer_ns is None and count:
            self.t_first_answer_ns = t
        times = self.token_times_ns
        if count > 1 and times:
            prev = times[-1]
            times.extend(prev + (t - prev) * (i + 1) // count for i in range(count))
        else:
            times.extend([t] * max(1, count))
        return t

    def itl_ms(self) -> list[float]:
        return [(b - a) / 1e6 for a, b in itertools.pairwise(self.token_times_ns)]

    def finish(
        self,
        stop_reason: str,
        llama_perf: tuple[float, int, float, int] | None = None,
        t_end_ns: int | None = None,
        **extra: Any,
    ) -> GenerationMetrics:
        """The record; `t_end_ns`: when the generation ended (default: now)."""
        return self._build(stop_reason, time.perf_counter_ns() if t_end_ns is None else t_end_ns, llama_perf, **extra)

    def snapshot(self, now_ns: int | None = None) -> GenerationMetrics:
        """The figures so far, without the ITL percentiles (sorting every gap ten times a second
        would cost CPU the model needs; the final record has them)."""
        return self._build("running", time.perf_counter_ns() if now_ns is None else now_ns, None, percentiles=False)

    def _build(
        self,
        stop_reason: str,
        t_end_ns: int,
        llama_perf: tuple[float, int, float, int] | None,
        percentiles: bool = True,
        **extra: Any,
    ) -> GenerationMetrics:
        times = self.token_times_ns
        n = len(times)
        ttft = (times[0] - self.t_start_ns) / 1e9 if n else None
        prefill_tokens = self.prompt_tokens - self.prompt_tokens_reused
        prefill_tps = None
        if n and self.t_prefill_start_ns is not None and times[0] > self.t_prefill_start_ns and prefill_tokens > 0:
            prefill_tps = prefill_tokens / ((times[0] - self.t_prefill_start_ns) / 1e9)
        itl_ms = self.itl_ms() if percentiles else []
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
            prompt_tokens_restored=self.prompt_tokens_restored,
            llama_prefill_ms=perf[0],
            llama_prefill_tokens=perf[1],
            llama_decode_ms=perf[2],
            llama_decode_tokens=perf[3],
            connection=c.connection,
            thinking_tokens=self.thinking_tokens,
            ttfat_s=(self.t_first_answer_ns - self.t_start_ns) / 1e9 if self.t_first_answer_ns else None,
            **extra,
        )


def live_snapshot(recorder: MetricsRecorder, now_ns: int | None = None) -> dict[str, Any]:
    """The live figures a client shows while an answer streams (same computation as the record),
    plus the time elapsed since the request started."""
    m = recorder.snapshot(now_ns)
    return {**m.to_dict(), "elapsed_s": m.e2e_s}


@functools.cache
def _field_types() -> dict[str, object]:
    return typing.get_type_hints(GenerationMetrics)


def _fits(value: object, kind: object) -> bool:
    """Whether `value` is of the annotated `kind` (the shapes GenerationMetrics uses)."""
    if kind is Any:
        return True
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return any(_fits(value, k) for k in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    origin = typing.get_origin(kind) or kind
    return isinstance(origin, type) and isinstance(value, origin)
