"""The comparisons with llama.cpp's own programs in bench/api.py and bench/lab_vs_llama.py: their options,
their JSON keys and ratios (from rows as the measurements give them), how llama-bench's tests line up with
the lab's points, and llama-server started and streamed from with the real `openai` client (when built)."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from bench import api, lab_vs_llama
from bench.llama_tools import LlamaBenchResult, find_tool, parse_llama_bench
from ember_chat.engine.core.params import SPECS
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.paths import TESTS

SAMPLES = TESTS / "llama_bench_samples"


def test_ratio_is_none_when_a_side_was_not_measured() -> None:
    assert api.ratio(63.3, 67.5) == pytest.approx(0.9378, abs=1e-4)
    assert api.ratio(None, 67.5) is None and api.ratio(63.3, None) is None and api.ratio(1.0, 0.0) is None


def test_api_quick_is_a_tiny_run_and_every_llama_server_figure_has_a_key() -> None:
    args = api.parse_args(["--quick", "--json"])
    assert (args.runs, args.max_tokens, args.ctx, args.json) == (1, 16, 1024, True)
    assert api.parse_args([]).runs == 5
    # every side gets Ember's own flash-attention default, told explicitly
    assert api.parse_args([]).flash_attn is SPECS["flash_attn"].default
    assert api.parse_args(["--no-flash-attn"]).flash_attn is False
    assert api.ember_flash_attn_flag(False) == "--no-flash-attn" and api.ember_flash_attn_flag(True) == "--flash-attn"
    rows = {
        "direct": [{"ttft_ms": 50.0, "decode_tps": 66.0}, {"ttft_ms": 52.0, "decode_tps": 64.0}],
        "ember": [{"ttft_ms": 60.0, "decode_tps": 63.0}, {"ttft_ms": 62.0, "decode_tps": 63.6}],
        "peer": [{"ttft_ms": 70.0, "decode_tps": 60.0}],
        "llama_server": [{"ttft_ms": 64.0, "decode_tps": 67.5}],
    }
    out = api.figures(args, "m.gguf", rows, {"llama_server": "/bin/llama-server"})
    assert out["server_decode_tps"] == pytest.approx(63.3) and out["direct_decode_tps"] == pytest.approx(65.0)
    assert out["server_decode_ratio"] == pytest.approx(63.3 / 65.0, abs=1e-4)
    assert out["llama_server_decode_tps"] == 67.5 and out["llama_server_ttft_ms"] == 64.0
    assert out["vs_llama_server_decode"] == pytest.approx(63.3 / 67.5, abs=1e-4)
    assert out["vs_llama_server_ttft"] == pytest.approx(61.0 / 64.0, abs=1e-4)
    assert out["server_ttft_overhead_ms"] == pytest.approx(10.0)
    assert out["llama_server"] == "/bin/llama-server"
    rows["llama_server"] = []  # not built
    out = api.figures(args, "m.gguf", rows, {})
    assert out["llama_server_decode_tps"] is None and out["vs_llama_server_decode"] is None
    assert out["vs_llama_server_ttft"] is None and out["vs_llama_cpp_python_server"] == pytest.approx(1.055)


def test_lab_vs_llama_lines_llama_bench_up_with_the_lab_points() -> None:
    results = parse_llama_bench((SAMPLES / "pp.json").read_text()) + parse_llama_bench(
        (SAMPLES / "tg.json").read_text()
    )
    keyed = lab_vs_llama.by_test([*results, LlamaBenchResult(8, 4, 0, 1.0, (1.0,))])  # (pp+tg: not used)
    assert keyed == {
        ("pp", 8): pytest.approx(67325.640181),
        ("pp", 16): results[1].avg_tokens_per_s,
        ("tg", 8): pytest.approx(17423.130459),
        ("tg", 16): pytest.approx(17850.579178),
    }
    samples = {
        "lab_pp": [480.0, 500.0, 490.0], "lab_tg": [66.0, 67.0, 68.0], "lab_llama_pp": [600.0],
        "bare_pp": [590.0], "bare_tg": [69.0], "llama_bench_pp": [610.0, 620.0, 630.0], "llama_bench_tg": [70.0],
    }  # fmt: skip
    p = lab_vs_llama.point(128, samples)
    assert p["prompt_tokens"] == 128 and p["lab_prefill_tokens_per_s"] == 490.0
    assert p["prefill_ratio_llama_bench"] == pytest.approx(490 / 620, abs=1e-4)
    assert p["decode_ratio_llama_bench"] == pytest.approx(67 / 70, abs=1e-4)
    assert p["prefill_ratio"] == pytest.approx(490 / 590, abs=1e-4) and p["lab_llama_prefill_tokens_per_s"] == 600
    assert p["prefill_ratio_llama_bench_best"] == pytest.approx(500 / 630, abs=1e-4)
    assert p["decode_ratio_llama_bench_best"] == pytest.approx(68 / 70, abs=1e-4)
    p = lab_vs_llama.point(128, {**samples, "llama_bench_pp": [], "llama_bench_tg": []})
    assert p["llama_bench_prefill_tokens_per_s"] is None and p["decode_ratio_llama_bench"] is None


def test_lab_vs_llama_options() -> None:
    quick = lab_vs_llama.parse_args(["--quick"])
    assert (quick.lengths, quick.output, quick.runs) == ([32], 8, 1)
    full = lab_vs_llama.parse_args(["--prompt-lengths", "128,512", "--flash-attn", "--no-llama-bench"])
    assert full.lengths == [128, 512] and full.output == 64 and full.flash_attn and full.no_llama_bench


@pytest.mark.skipif(find_tool("llama-server") is None, reason="llama-server is not built (python -m bench.llama_tools)")
def test_llama_server_starts_streams_to_the_openai_client_and_reports_its_prefill(tmp_path: Path) -> None:
    tool = find_tool("llama-server")
    assert tool is not None
    model = write_tiny_model(tmp_path / "tiny.gguf")
    server = api.ServerProcess.llama_server(tool, model, threads=1, n_ctx=256, parallel=2)
    client = openai.OpenAI(base_url=server.url, api_key="bench", max_retries=0)
    try:
        stream = api.stream_completion(client, model.name, "hello there", 6)
        assert stream.finish == "length" and stream.times and stream.times[0] >= stream.t0
        assert server.next_prefill_ms(0) is not None  # its own "prompt eval time" line was read
        assert any("n_slots = 2" in line for line in server.log)
    finally:
        client.close()
        server.close()
    assert server.proc.returncode is not None
