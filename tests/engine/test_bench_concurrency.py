"""bench/concurrency.py: its options, prompts unique per server/round/client, the figures of a round
(aggregate tok/s, worst first token), the printed keys and ratios (llama-server's None when it was not
measured), and clients released together against a real `ember-chat serve` with the real openai client."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from bench import concurrency
from bench.concurrency import ClientResult, concurrent_prompts, round_figures, run_concurrently, summarize
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.peer_servers import ember_server


def test_options_and_quick() -> None:
    args = concurrency.parse_args([])
    assert (args.counts, args.parallel, args.ctx, args.max_tokens, args.runs) == ([1, 2, 4], 4, 4096, 64, 5)
    quick = concurrency.parse_args(["--quick", "--clients", "4,1"])
    assert (quick.runs, quick.max_tokens, quick.counts) == (1, 8, [1, 4])
    with pytest.raises(SystemExit):
        concurrency.parse_args(["--clients", "0,2"])


def test_every_prompt_is_unique_and_the_same_length() -> None:
    prompts = [
        prompt
        for server in concurrency.SERVERS
        for r in range(3)
        for n in (1, 2, 4)
        for prompt in concurrent_prompts(server, r, n)
    ]
    assert len(set(prompts)) == len(prompts) == 2 * 3 * 7
    assert len({len(p) for p in prompts}) == 1


def test_a_rounds_figures() -> None:
    four = [ClientResult(0.3, 2.0, 64, 40.0, "a"), ClientResult(0.2, 2.5, 64, 40.0, "b")] * 2
    figures = round_figures(four)
    assert figures == {"aggregate_tokens_per_s": pytest.approx(256 / 2.5), "worst_ttft_s": 0.3}
    one = round_figures([ClientResult(0.06, 1.0, 64, 67.5, "a")])
    assert one == {"aggregate_tokens_per_s": 64.0, "worst_ttft_s": 0.06, "decode_tokens_per_s": 67.5}


def test_the_printed_keys_ratios_and_a_server_not_measured() -> None:
    rounds = {
        "ember": {
            1: [{"aggregate_tokens_per_s": 60.0, "worst_ttft_s": 0.06, "decode_tokens_per_s": 63.0}],
            2: [{"aggregate_tokens_per_s": 80.0, "worst_ttft_s": 0.2}],
            4: [
                {"aggregate_tokens_per_s": 96.0, "worst_ttft_s": 0.5},
                {"aggregate_tokens_per_s": 90.0, "worst_ttft_s": 0.7},
            ],
        },
        "llama_server": {
            1: [{"aggregate_tokens_per_s": 64.0, "worst_ttft_s": 0.064, "decode_tokens_per_s": 67.5}],
            2: [{"aggregate_tokens_per_s": 85.0, "worst_ttft_s": 0.2}],
            4: [{"aggregate_tokens_per_s": 100.0, "worst_ttft_s": 0.4}],
        },
    }
    out = summarize(rounds, [1, 2, 4], {"ember": True, "llama_server": False})
    for key in ("single_tokens_per_s", "aggregate_tokens_per_s_2", "aggregate_tokens_per_s_4", "worst_ttft_s_4"):
        assert out[key] is not None and out[f"llama_server_{key}"] is not None
    assert out["single_tokens_per_s"] == 60.0 and out["single_decode_tokens_per_s"] == 63.0
    assert out["aggregate_tokens_per_s_4"] == 93.0 and out["worst_ttft_s_4"] == 0.6
    assert out["scaling_4"] == pytest.approx(93 / 60, abs=1e-4)
    assert out["llama_server_scaling_4"] == pytest.approx(100 / 64, abs=1e-4)
    assert out["ratio_aggregate_4"] == 0.93 and out["ratio_worst_ttft_4"] == 1.5
    assert out["ratio_single"] == pytest.approx(60 / 64, abs=1e-4)
    assert out["identical"] is True and out["llama_server_identical"] is False
    alone = summarize({"ember": rounds["ember"]}, [1, 2, 4], {"ember": True})
    assert alone["llama_server_aggregate_tokens_per_s_4"] is None and alone["ratio_aggregate_4"] is None
    assert alone["llama_server_identical"] is None and alone["scaling_4"] == out["scaling_4"]


def test_clients_are_released_together_against_a_real_server(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path / "tiny.gguf")
    with ember_server(model, threads=1, n_ctx=2048) as url:
        clients = [openai.OpenAI(base_url=url, api_key="bench", max_retries=0) for _ in range(2)]
        try:
            results = run_concurrently(clients, model.name, concurrent_prompts("ember", 0, 2), 6)
        finally:
            for client in clients:
                client.close()
    assert len(results) == 2
    for r in results:
        assert r.tokens == 6 and 0 < r.ttft_s <= r.end_s and r.text
    assert round_figures(results)["aggregate_tokens_per_s"] == pytest.approx(12 / max(r.end_s for r in results))
