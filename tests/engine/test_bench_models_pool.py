"""bench/models_pool.py: its options, the eviction budget (room for the pinned and the larger model, never
for both others), /proc's memory lines, the switch ratios' medians, and a whole quick run against real
`ember-chat serve` processes on tiny models with the real openai client: the printed JSON's shape and
invariants (never its timings)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench import models_pool
from bench.models_pool import eviction_budget, status_bytes, switch_ratios
from tests.helpers.gguf_factory import TinySpec, write_tiny_model


def test_options_and_quick() -> None:
    args = models_pool.parse_args([])
    assert (args.model_a, args.model_b, args.ctx, args.max_tokens, args.rounds) == (
        "gemma-3-270m", "starter", 2048, 8, 5,
    )  # fmt: skip
    assert models_pool.parse_args(["--quick"]).rounds == 1
    with pytest.raises(SystemExit):
        models_pool.parse_args(["--rounds", "0"])


@pytest.mark.parametrize(("pinned", "a", "b"), [(1, 320, 160), (1, 160, 320), (50, 300, 290), (1, 300, 10)])
def test_the_budget_forces_an_eviction_and_holds_the_larger_model(pinned: int, a: int, b: int) -> None:
    budget = eviction_budget(pinned * 10**6, a * 10**6, b * 10**6)
    assert pinned * 10**6 + max(a, b) * 10**6 <= budget < (pinned + a + b) * 10**6
    assert budget <= 1.5 * max(a, b) * 10**6


def test_memory_lines_of_proc_status() -> None:
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc here")
    rss, peak = status_bytes(os.getpid(), "VmRSS"), status_bytes(os.getpid(), "VmHWM")
    assert 0 < rss <= peak
    with pytest.raises(RuntimeError, match="NoSuchLine"):
        status_bytes(os.getpid(), "NoSuchLine")


def test_switch_ratios_are_each_models_median() -> None:
    rounds = [
        {"model": "b", "ratio": 1.0}, {"model": "a", "ratio": 1.2}, {"model": "b", "ratio": 3.0},
        {"model": "a", "ratio": 0.9}, {"model": "b", "ratio": 1.1}, {"model": "a", "ratio": 1.0},
    ]  # fmt: skip
    assert switch_ratios(rounds) == {"b": 1.1, "a": 1.0}


def test_a_quick_run_on_tiny_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_tiny_model(tmp_path / "big.gguf", TinySpec(seed=2, name="big", dim=128, ff=256))
    b = write_tiny_model(tmp_path / "small.gguf", TinySpec(seed=1, name="small"))
    argv = ["--model-a", str(a), "--model-b", str(b), "--threads", "1", "--rounds", "2", "--json"]
    assert models_pool.main(argv) == 0
    out = json.loads(capsys.readouterr().out)

    assert (out["model_a"], out["model_b"], out["rounds"], out["max_tokens"]) == ("big.gguf", "small.gguf", 2, 8)
    for name in ("big.gguf", "small.gguf"):
        jit = out["jit"][name]
        assert jit["cold_ttft_s"] > 0 and jit["warm_ttft_s"] > 0
        # (each figure rounded to 4 decimals: their difference may be a unit of the last apart)
        assert (
            out["jit_load_s"][name] == jit["load_s"] == pytest.approx(jit["cold_ttft_s"] - jit["warm_ttft_s"], abs=2e-4)
        )
    # rounds of B, A: each request after the other model, then warm
    assert [(r["round"], r["model"]) for r in out["switch_rounds"]] == [
        (0, "small.gguf"), (0, "big.gguf"), (1, "small.gguf"), (1, "big.gguf"),
    ]  # fmt: skip
    for r in out["switch_rounds"]:  # (the times are rounded to 0.1 ms: a few-ms TTFT's ratio moves by that)
        switch, warm = r["switch_ttft_s"], r["warm_ttft_s"]
        slack = 5e-5 * (1 / warm + switch / warm**2) + 1e-3
        assert abs(r["ratio"] - switch / warm) <= slack, (r, slack)
    assert set(out["switch_ratio"]) == {"big.gguf", "small.gguf"}
    assert out["switch_ratio_worst"] == max(out["switch_ratio"].values())

    ev = out["eviction"]
    sizes = ev["footprint_bytes"]
    assert ev["pinned"] == "pinned-tiny.gguf" and set(sizes) == {"big.gguf", "small.gguf", "pinned-tiny.gguf"}
    assert ev["budget_bytes"] == eviction_budget(sizes["pinned-tiny.gguf"], sizes["big.gguf"], sizes["small.gguf"])
    assert ev["budget_x_larger"] == pytest.approx(ev["budget_bytes"] / sizes["big.gguf"], abs=1e-4)
    # B twice, then A, B per round: every load after the first evicts the other model
    assert [r["model"] for r in ev["requests"]] == ["small.gguf"] * 2 + ["big.gguf", "small.gguf"] * 2
    assert ev["evictions"] == 4
    assert 0 < ev["start_rss_bytes"] <= ev["peak_rss_bytes"]
    assert ev["peak_over_budget"] == pytest.approx(ev["peak_rss_bytes"] / ev["budget_bytes"], abs=1e-4)
