"""bench/retrieval.py's figures come from a real run: the generated facts are found (recall@5 over 200
passages), and a small --passages run reports every figure the issue asks for."""

from __future__ import annotations

import json

import pytest

from bench import retrieval


def test_the_retrieval_bench_reports_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert retrieval.main(["--passages", "300", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["passages"] == 300 and result["chunks"] >= 300
    assert result["recall_at_5"] >= 0.9
    assert result["index_passages_per_s"] > 0 and 0 < result["retrieval_p50_ms"] <= result["retrieval_p95_ms"]
    assert result["pdf_100_pages_extract_s"] > 0


def test_each_fact_is_in_exactly_one_passage() -> None:
    text, facts = retrieval.corpus(200)
    passages = text.split("\n\n")
    assert len(passages) == len(facts) == 200
    for _, fact in facts:
        assert sum(fact in p for p in passages) == 1
