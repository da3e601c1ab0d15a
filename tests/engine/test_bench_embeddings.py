"""bench/embeddings.py's parts that need no llama-server: its inputs (distinct, within the word counts),
the cosine of two vectors, and the figures from the rounds (medians, every round's ratio)."""

from __future__ import annotations

import math

from bench import embeddings


def test_inputs_are_distinct_and_of_the_asked_lengths() -> None:
    texts = embeddings.inputs(40, 4, 12)
    assert len(set(texts)) == 40
    assert all(4 <= len(t.split(" ")) - 1 <= 12 for t in texts)  # (each begins with its number)
    assert texts == embeddings.inputs(40, 4, 12)


def test_cosine() -> None:
    assert math.isclose(embeddings.cosine([1.0, 0.0], [2.0, 0.0]), 1.0)
    assert math.isclose(embeddings.cosine([1.0, 0.0], [0.0, 3.0]), 0.0, abs_tol=1e-12)
    assert embeddings.cosine([0.0, 0.0], [1.0, 0.0]) == 0.0


def test_figures_are_medians_with_every_round() -> None:
    args = embeddings.parse_args(["--rounds", "3"])
    rounds = [
        {"ember_inputs_per_s": 10.0, "llama_server_inputs_per_s": 10.0, "ratio": 1.0},
        {"ember_inputs_per_s": 9.0, "llama_server_inputs_per_s": 10.0, "ratio": 0.9},
        {"ember_inputs_per_s": 12.0, "llama_server_inputs_per_s": 11.0, "ratio": 1.0909},
    ]
    result = embeddings.figures(args, "m.gguf", rounds, [0.9999, 0.99, 1.0])
    assert result["throughput_ratio"] == 1.0 and result["round_ratios"] == [1.0, 0.9, 1.0909]
    assert result["ember_inputs_per_s"] == 10.0 and result["llama_server_inputs_per_s"] == 10.0
    assert result["min_cosine"] == 0.99 and result["median_cosine"] == 0.9999
