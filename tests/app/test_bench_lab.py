"""The benchmark lab: exactly the planned tokens, medians over repetitions, machine facts, cancel,
exports, and `ember-chat bench`."""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ember_chat.engine.bench.lab import BenchPlan, machine_facts, run_lab, save_run
from ember_chat.engine.bench.targets import bench_tokens
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import ContextOverflowError, InvalidParameter
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from tests.helpers.cli import cli
from tests.helpers.runtime_support import loaded

if TYPE_CHECKING:
    pass
from tests.helpers.bench_lab import bench_dialog, run_bench


@pytest.fixture
def rt(tiny_model: Path) -> Iterator[LocalRuntime]:
    with loaded(tiny_model) as runtime:
        yield runtime


def test_run_tokens_generates_exactly_the_planned_tokens(rt: LocalRuntime) -> None:
    tokens = bench_tokens(rt, 40)
    assert tokens == bench_tokens(rt, 40) and len(set(tokens)) > 10  # fixed seed, varied ids
    fin = list(rt.run_tokens(tokens, SamplingParams(temperature=0, max_tokens=30)))[-1]
    assert isinstance(fin, Finished) and fin.metrics.output_tokens == 30  # end-of-generation does not stop it
    assert fin.metrics.prompt_tokens == 40
    with pytest.raises(ContextOverflowError):
        list(rt.run_tokens(bench_tokens(rt, 250), SamplingParams(max_tokens=30)))


def test_lab_run_medians_facts_and_exports(rt: LocalRuntime, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    run = run_lab(rt, BenchPlan((16, 64), 8, 2), progress=lambda d, t, _what: seen.append((d, t)))
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)] and not run.cancelled  # (0: the warm-up)
    assert [p.prompt_tokens for p in run.points] == [16, 64]
    for p in run.points:
        assert p.prefill_tokens_per_s > 0 and p.decode_tokens_per_s > 0 and p.ttft_s > 0
        assert p.itl_p50_ms <= p.itl_p95_ms <= p.itl_p99_ms and p.peak_rss_bytes > 0 and p.repetitions == 2
        assert p.llama_prefill_tokens_per_s and p.llama_decode_tokens_per_s  # llama.cpp's own counters
    facts = run.machine
    assert facts["cores_logical"] >= 1 and facts["ram_bytes"] > 0 and facts["threads"] == 1
    assert facts["backend"] and "llama_cpp_features" in facts and facts["cpu"]
    rows = list(csv.DictReader(io.StringIO(run.to_csv())))
    assert [int(r["prompt_tokens"]) for r in rows] == [16, 64]
    saved = save_run(run, tmp_path / "benchmarks")
    assert json.loads(saved.read_text())["points"][1]["prompt_tokens"] == 64


def test_lab_cancel_keeps_what_was_measured(rt: LocalRuntime) -> None:
    cancel = threading.Event()
    run = run_lab(rt, BenchPlan((16, 32, 64), 8, 1), cancel, progress=lambda d, _t, _w: d == 2 and cancel.set())
    assert run.cancelled and [p.prompt_tokens for p in run.points] == [16, 32]


def test_plan_is_checked() -> None:
    with pytest.raises(InvalidParameter):
        BenchPlan((), 8, 1)
    with pytest.raises(InvalidParameter):
        BenchPlan((16,), 1, 1)
    assert machine_facts()["os"]


@pytest.mark.slow
def test_cli_bench(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.csv"
    result = cli(
        "bench", "--model", str(tiny_model), "--model", str(tiny_model), "--prompt-lengths", "16,32",
        "--output", "4", "--reps", "1", "--threads", "1", "--json", "--csv", str(out), data_dir=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    runs = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(runs) == 2 and [p["prompt_tokens"] for p in runs[0]["points"]] == [16, 32]
    assert len(list(csv.DictReader(io.StringIO(out.read_text())))) == 4  # two models x two lengths
    assert len(list((tmp_path / "benchmarks").glob("bench-*.json"))) >= 1  # kept with the machine facts
    bad = cli("bench", "--model", str(tiny_model), "--prompt-lengths", "x", data_dir=tmp_path)
    assert bad.returncode == 2 and "--prompt-lengths" in bad.stderr


def test_the_benchmark_window_measures_plots_and_exports(qtbot: object, tmp_path: Path) -> None:
    import shutil

    from tests.helpers.gguf_factory import write_tiny_model

    models = tmp_path / "models"
    models.mkdir()
    write_tiny_model(models / "a.gguf")
    shutil.copy(models / "a.gguf", models / "b.gguf")
    from ember_chat.engine.storage.model_settings import ModelLoadSettings, ModelSettingsStore

    own = ModelLoadSettings(n_ctx=256, threads=2, threads_batch=2, gpu_layers=0, n_batch=64, flash_attn=False,
                            kv_cache_type="f16")  # fmt: skip
    ModelSettingsStore(tmp_path / "model_settings.json").save("a.gguf", own)  # a.gguf's own load settings
    dialog = bench_dialog(qtbot, tmp_path, models)
    dialog.start()
    assert "Check at least one model" in dialog.status.text()
    run_bench(qtbot, dialog, {"a.gguf", "b.gguf"}, "16,48", 4)  # (the library also lists the starter models)
    assert dialog.status.text() == "Done." and dialog.table.rowCount() == 4
    series = dialog.prefill_chart.series()
    assert [s.name() for s in series] == ["a.gguf", "b.gguf"] and all(s.count() == 2 for s in series)
    assert [p.x() for p in dialog.decode_chart.series()[0].points()] == [16.0, 48.0]
    assert len(list((tmp_path / "data" / "benchmarks").glob("*.json"))) == 2
    assert [r.machine["threads"] for r in dialog.runs] == [2, 1]  # a.gguf with its own settings, b.gguf default
    dialog.export(tmp_path / "out.csv", "csv")
    assert len((tmp_path / "out.csv").read_text().strip().splitlines()) == 5
    dialog.export(tmp_path / "out.json", "json")
    assert json.loads((tmp_path / "out.json").read_text())[1]["machine"]["model_name"] == "b.gguf"
    # cancel: what was measured is kept and shown
    dialog.lengths.setText("16,32,48,64,80,96,112")
    dialog.reps.setValue(3)
    with qtbot.waitSignal(dialog.run_finished, timeout=60_000):
        dialog.start()
        dialog.cancel()
    assert dialog.status.text().startswith("Cancelled") and dialog.run_button.isEnabled()
