"""The remote backend's figures: a stream's chunks as they arrived, and the generation's metrics at
the end, counted from the server's own figures where it gives them (usage, llama.cpp's `timings`).

A server's fields are read by type: a figure of the wrong type (a string, a list, null) is treated as
absent, never trusted into the metrics nor allowed to turn a finished answer into an error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ember_chat.engine.inference.metrics import GenerationMetrics, MetricsRecorder


@dataclass
class StreamChunk:
    t_ns: int
    text: str  # what it carried (answer text, or a tool call's fragment): its share of the tokens
    count: int | None  # tokens, when the server said (per-chunk usage)
    thinking: bool = False  # reasoning text only


def final_metrics(
    rec: MetricsRecorder,
    chunks: list[StreamChunk],
    usage: dict[str, Any],
    timings: dict[str, Any],
    reason: str,
    answer: str,
    t_end_ns: int,
    count_tokens: Callable[[str], int | None] | None = None,
) -> GenerationMetrics:
    """Count tokens from the server's own figures (usage, llama.cpp's timings), else with the
    server's tokenizer (`count_tokens`), spread over the chunks in proportion to their text; else one
    per chunk, marked estimated."""
    total = count(usage.get("completion_tokens")) or count(timings.get("predicted_n"))
    token_count = "exact"
    if not total:
        total = count_tokens(answer) if chunks and answer and count_tokens is not None else None
        token_count = "tokenized" if total else "estimated"
    final = MetricsRecorder(rec.context, t_start_ns=rec.t_start_ns, t_prefill_start_ns=rec.t_start_ns)
    if total and chunks:
        total = max(int(total), len(chunks))
        whole = sum(max(1, len(c.text)) for c in chunks)
        seen = given = 0
        for i, c in enumerate(chunks):
            seen += max(1, len(c.text))
            after = len(chunks) - i - 1  # each later chunk still needs at least one token
            target = total if after == 0 else round(total * seen / whole)
            share = min(max(1, target - given), total - given - after)
            final.token(c.t_ns, share, thinking=c.thinking)
            given += share
    else:
        for c in chunks:
            final.token(c.t_ns, c.count or 1, thinking=c.thinking)
    reasoning = count(field(usage.get("completion_tokens_details"), "reasoning_tokens"))
    if reasoning is not None:  # the server's own count (OpenAI, vLLM)
        final.thinking_tokens = reasoning
    prompt = count(usage.get("prompt_tokens"))
    cached = count(field(usage.get("prompt_tokens_details"), "cached_tokens"))
    if prompt is None and timings:
        prompt = (count(timings.get("prompt_n")) or 0) + (count(timings.get("cache_n")) or 0)
        cached = count(timings.get("cache_n"))
    final.prefill_started(prompt or 0, min(cached or 0, prompt or 0), rec.t_start_ns)
    perf = None
    if timings:
        perf = (
            _ms(timings.get("prompt_ms")),
            count(timings.get("prompt_n")),
            _ms(timings.get("predicted_ms")),
            count(timings.get("predicted_n")),
        )
    server = {"usage": usage, "timings": timings} if usage or timings else None
    return final.finish(reason, perf, t_end_ns=t_end_ns, token_count=token_count, server_timings=server)


def count(value: object) -> int | None:
    """A non-negative whole number, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return None
    return int(value) if float(value).is_integer() else None


def _ms(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        return None
    return float(value)


def field(obj: object, name: str) -> object:
    return obj.get(name) if isinstance(obj, dict) else None
