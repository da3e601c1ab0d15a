"""bench.speculative's machinery on the tiny model: both tasks run off and ngram, the answers are the same
and the counts come back (the speeds themselves are the benchmark's, not asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import speculative


def test_the_speculative_benchmark_compares_off_and_ngram(tiny_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", str(tiny_model), "--tokens", "16", "--rounds", "1", "--threads", "1", "--ctx", "1024", "--json"]
    assert speculative.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for task in speculative.TASKS:
        figures = out[task]
        assert figures["identical"] is True
        assert figures["off_decode_tokens_per_s"] > 0 and figures["ngram_decode_tokens_per_s"] > 0
        assert 0 <= figures["accepted"] <= figures["drafted"]
    assert out["rounds"] == 1 and out["tokens"] == 16
