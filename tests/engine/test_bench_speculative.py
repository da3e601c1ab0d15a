"""bench.speculative's machinery on the tiny model: every task runs off, auto and ngram, the answers are the same
and the counts come back (the speeds themselves are the benchmark's, not asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import speculative


def test_the_speculative_benchmark_compares_off_auto_and_ngram(
    tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--model", str(tiny_model), "--tokens", "16", "--rounds", "1", "--threads", "1", "--ctx", "1024", "--json"]
    assert speculative.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for task in speculative.TASKS:
        figures = out[task]
        assert figures["identical"] is True
        for mode in speculative.MODES:
            assert figures[f"{mode}_decode_tokens_per_s"] > 0
        for mode in ("auto", "ngram"):
            assert 0 <= figures[f"{mode}_accepted"] <= figures[f"{mode}_drafted"]
        assert figures["auto_stopped"].endswith("of 1")
    assert out["rounds"] == 1 and out["tokens"] == 16
