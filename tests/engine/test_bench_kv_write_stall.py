"""bench.kv_write_stall's machinery on a small snapshot: the store really writes the file while the
event loop's gaps are measured (the figures themselves are the benchmark's, not asserted here)."""

from __future__ import annotations

import json

import pytest

from bench import kv_write_stall


def test_the_stall_benchmark_writes_its_snapshots_and_reports_the_gaps(
    qapp: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kv_write_stall.main(["--mb", "2", "--writes", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files"] == 2 and out["snapshot_mb"] == 2
    assert out["idle_longest_gap_ms"] > 0 and out["writing_longest_gap_ms"] > 0
