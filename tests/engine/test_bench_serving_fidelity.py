"""bench/serving_fidelity.py: the per-request comparison with llama-server's timings (on made-up
results), and the load generator's overhead against its instant server (a tiny run, for real)."""

from __future__ import annotations

import pytest

from bench import serving_fidelity
from ember_chat.engine.bench.serving.client import RequestResult


def answered(ttft_s: float, e2el_s: float, tokens: int, prompt_ms: float, per_s: float) -> RequestResult:
    server = {"source": "timings", "prompt_ms": prompt_ms, "predicted_per_second": per_s, "predicted_n": tokens}
    return RequestResult(0, 0.0, ok=True, ttft_s=ttft_s, e2el_s=e2el_s, output_tokens=tokens, server=server)


def test_the_lab_s_ttft_and_decode_rate_are_compared_with_llama_server_s_timings() -> None:
    results = [
        answered(0.102, 1.102, 21, 100.0, 20.0),  # TTFT +2 %; 1/TPOT = 20 / 1 s: the same as the server's
        answered(0.208, 0.608, 9, 200.0, 19.0),  # +4 %; 8 / 0.4 s = 20/s against 19: +5.3 %
        answered(0.330, 1.330, 11, 300.0, 10.0),  # +10 %; 10/s: the same
        RequestResult(1, 0.0, error="HTTP 500: no"),  # (failed: not compared)
        RequestResult(2, 0.0, ok=True, ttft_s=0.1, e2el_s=0.2, output_tokens=4),  # (no timings: not compared)
    ]
    out = serving_fidelity.compare(results)
    assert (out["compared"], out["requests"]) == (3, 5)
    assert out["median_ttft_diff"] == pytest.approx(0.04)
    assert out["median_decode_diff"] == pytest.approx(0.0)
    assert out["budget_met"] is True
    assert [row["decode_diff"] for row in out["rows"]] == pytest.approx([0.0, 1 / 19, 0.0])
    slow = [answered(0.2, 1.2, 21, 100.0, 20.0) for _ in range(3)]  # TTFT double the server's prefill
    assert serving_fidelity.compare(slow)["budget_met"] is False
    assert serving_fidelity.compare([])["budget_met"] is False  # (nothing compared: not met)


def test_the_load_generator_keeps_up_with_an_instant_server() -> None:
    out = serving_fidelity.overhead(requests=40, long_tokens=200)
    assert out["requests_failed"] == 0 and out["tokens_failed"] == 0
    # (the budgets, with room: on this busy 2-core machine it reached ~1,300 requests/s, ~200,000 tokens/s)
    assert out["requests_per_s"] >= serving_fidelity.REQUESTS_BUDGET
    assert out["tokens_per_s"] >= serving_fidelity.TOKENS_BUDGET and out["open_loop_sent_per_s"] > 0
    assert out["open_loop_lateness_ms_p50"] >= 0 and out["tokens_per_answer"] == 200
