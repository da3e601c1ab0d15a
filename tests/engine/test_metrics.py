from __future__ import annotations

import pytest

from ember_chat.engine.inference.local.stop_strings import StopStringScanner
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext, percentile

CTX = RunContext("m", "Q4_K_M", "CPU", 2, 0, 1024)


def test_percentile_matches_numpy_linear() -> None:
    import numpy as np

    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    for q in (0, 50, 95, 99, 100):
        assert percentile(values, q) == pytest.approx(np.percentile(values, q))
    assert percentile([], 50) is None


def test_recorder_definitions() -> None:
    rec = MetricsRecorder(CTX, t_start_ns=0)
    rec.prompt_tokens, rec.prompt_tokens_reused, rec.t_prefill_start_ns = 100, 20, 10_000_000
    rec.token_times_ns = [210_000_000, 220_000_000, 240_000_000, 250_000_000]  # ns
    m = rec._build("length", 300_000_000, (150.0, 80, 30.0, 3))
    assert m.ttft_s == pytest.approx(0.21)
    assert m.prefill_tokens_per_s == pytest.approx(80 / 0.2)
    assert m.decode_tokens_per_s == pytest.approx(3 / 0.04)
    assert m.tpot_ms == pytest.approx(40 / 3)
    assert (m.itl_p50_ms, m.itl_p99_ms) == (pytest.approx(10.0), pytest.approx(19.8))
    assert m.e2e_s == pytest.approx(0.3) and m.output_tokens == 4 and m.context_used == 104
    assert m.llama_prefill_tokens == 80
    assert m.summary_line() == "TTFT 0.21 s · 75.0 tok/s · 4 tokens · max tokens reached"


def test_no_tokens_means_no_rates() -> None:
    m = MetricsRecorder(CTX, t_start_ns=0)._build("cancelled", 1_000, None)
    assert m.ttft_s is None and m.decode_tokens_per_s is None and m.itl_p50_ms is None


@pytest.mark.parametrize(
    ("chunks", "stops", "shown", "hit"),
    [
        (["Hello", " wor", "ld"], ("world",), "Hello ", True),
        (["ab", "c<", "/s", ">x"], ("</s>",), "abc", True),
        (["a<", "b"], ("<>",), "a<b", False),
        (["plain"], (), "plain", False),
        (["x", "EN", "D"], ("END", "STOP"), "x", True),
    ],
)
def test_stop_string_scanner(chunks: list[str], stops: tuple[str, ...], shown: str, hit: bool) -> None:
    sc = StopStringScanner(stops)
    out = ""
    was_hit = False
    for c in chunks:
        text, was_hit = sc.feed(c)
        out += text
        if was_hit:
            break
    if not was_hit:
        out += sc.flush()
    assert (out, was_hit) == (shown, hit)


def test_states_are_named_but_stored_and_sent_as_their_strings() -> None:
    """Stop reasons, download job states and fit labels are string enums: code names them, and what is
    saved in chats, sent over the API and shown stays the plain string it always was."""
    import json

    from ember_chat.engine.core.states import FitLabel, JobState, StopReason
    from ember_chat.engine.models.download_queue import PAUSED
    from ember_chat.engine.models.fit import estimate_fit

    assert StopReason.LENGTH == "length" and json.dumps({"r": StopReason.LENGTH}) == '{"r": "length"}'
    assert f"{StopReason.CANCELLED}" == "cancelled" and PAUSED is JobState.PAUSED
    fit = estimate_fit(1_000_000, 512, free_ram=10**12)
    assert fit.label is FitLabel.FITS and fit.label == "fits"
