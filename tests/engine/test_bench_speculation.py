"""The benchmark lab's speculative decoding comparison (engine/bench/speculation.py) on tiny models: each
task answered off, with n-gram drafts and with the draft model (only where one is loaded: otherwise the
run says which and why), the counts and speedups filled in, the answers off's, the KV cache left empty; a
cancel mid-run keeps the finished tasks; as the engine service's exclusive job on its loaded model."""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.bench.speculation import (
    LAB_TASKS,
    SpeculationRun,
    compare_exclusively,
    compare_speculation,
    save_speculation_run,
)
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.errors import NoModelLoaded
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.service.engine import EngineService
from tests.helpers.gguf_factory import TinySpec, write_tiny_model


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny models with the same tokenizer and different weights (another seed)."""
    folder = tmp_path_factory.mktemp("pair")
    return write_tiny_model(folder / "target.gguf"), write_tiny_model(folder / "draft.gguf", TinySpec(seed=7))


def opened(path: Path, draft: Path | None = None) -> LocalRuntime:
    rt = LocalRuntime()
    rt.load(LoadConfig(path, n_ctx=1024, threads=1, draft_model=draft))
    return rt


@pytest.fixture
def with_draft(tiny_pair: tuple[Path, Path]) -> Iterator[LocalRuntime]:
    rt = opened(*tiny_pair)
    yield rt
    rt.close()


def test_each_task_off_ngram_and_the_draft_model(with_draft: LocalRuntime, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    said: list[str] = []
    run = compare_speculation(
        with_draft, tokens=16, progress=lambda done, total, what: (seen.append((done, total)), said.append(what))
    )
    assert said[5].endswith(": code edit, n-gram, round 1 of 1")  # (the progress line in words, after 1 + 3 + 1)
    assert run.draft_model == "draft.gguf" and run.draft_refused is None and not run.cancelled
    assert seen[-1] == (12, 12) and [d for d, _ in seen] == sorted(d for d, _ in seen)  # 3 warm-ups, 3 tasks × 3
    assert [(r.task, r.mode) for r in run.results] == [(t, m) for t in LAB_TASKS for m in ("off", "ngram", "draft")]
    for r in run.results:
        assert r.decode_tokens_per_s > 0 and r.output_tokens == 16 and r.rounds == 1
        assert r.identical, (r.task, r.mode)  # greedy: speculation gives off's tokens
        if r.mode == "off":
            assert r.drafted is None and r.speedup is None and r.acceptance is None
        else:
            assert r.drafted is not None and r.accepted is not None and 0 <= r.accepted <= r.drafted
            assert r.speedup is not None and r.speedup > 0
    copy = run.result("copy", "ngram")
    assert copy is not None and copy.drafted  # a passage repeated: n-grams to draft
    assert run.result("copy", "draft") is not None and run.result("copy", "draft").drafted  # type: ignore[union-attr]
    assert with_draft.kv_cells_used() == 0  # the last answer's cells are not left for the chat's next answer

    rows = list(csv.DictReader(io.StringIO(run.to_csv())))
    assert len(rows) == 9 and rows[2]["mode"] == "draft" and rows[2]["draft_model"] == "draft.gguf"
    saved = json.loads(save_speculation_run(run, tmp_path).read_text())
    assert saved["model"] == run.model and len(saved["results"]) == 9 and saved["machine"]["threads"] == 1


def test_without_a_draft_model_the_draft_column_is_left_out_and_why(
    tiny_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    target, _ = tiny_pair
    rt = opened(target)
    try:
        run = compare_speculation(rt, tokens=8)
        assert run.draft_model is None and run.draft_refused is None
        assert {r.mode for r in run.results} == {"off", "ngram"} and len(run.results) == 6
    finally:
        rt.close()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(target.read_bytes()[:4096])  # a truncated file: refused, the model loads without it
    rt = opened(target, broken)
    try:
        run = compare_speculation(rt, tokens=8)
        assert run.draft_model is None and run.draft_refused
        assert {r.mode for r in run.results} == {"off", "ngram"}
    finally:
        rt.close()


def test_a_cancel_mid_run_keeps_the_finished_tasks(with_draft: LocalRuntime) -> None:
    cancel = threading.Event()

    def progress(done: int, _total: int, _what: str) -> None:
        if done == 7:  # the second task's first answer (3 warm-ups, then 3 per task)
            cancel.set()

    run = compare_speculation(with_draft, tokens=16, cancel=cancel, progress=progress)
    assert run.cancelled and [r.task for r in run.results] == ["code_edit"] * 3
    assert with_draft.kv_cells_used() == 0
    again = compare_speculation(with_draft, tokens=8)  # the runtime answers as before
    assert not again.cancelled and len(again.results) == 9


def test_as_the_engine_service_s_exclusive_job(tiny_pair: tuple[Path, Path]) -> None:
    service = EngineService()
    try:
        with pytest.raises(NoModelLoaded):
            compare_exclusively(service, tokens=8)
        service.load(LoadConfig(tiny_pair[0], n_ctx=1024, threads=1, draft_model=tiny_pair[1]))
        service.run_exclusive(lambda: None).result(120)  # (after the load)
        run = compare_exclusively(service, tokens=8)
        assert isinstance(run, SpeculationRun) and run.machine["exclusive"] is True
        assert run.draft_model == "draft.gguf" and len(run.results) == 9
    finally:
        service.close()
