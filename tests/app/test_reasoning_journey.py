"""Issue 10's user story, end to end in the real window with the real runtime: download a reasoning
model from the (local) Hub, tune how it loads (GPU layers "auto", threads), chat with it — its chat
template (DeepSeek-R1 distill's, the real one) opens the thinking, which the window shows as thinking
— then measure it and a second model in the benchmark lab and look at both lines of the plot.

The model is a tiny scripted GGUF carrying that template and `<think>` control tokens: whatever it is
asked, it thinks " hello world", closes its thinking, answers " Ember!" and ends its turn (its weights
decide each next token, tests/helpers/gguf_factory.py), and every step a user takes goes through the same code
as with the real file. (The thinking streaming live and opening on a click: tests/app/test_app_reasoning.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.model_settings import AUTO_GPU_LAYERS
from tests.helpers.bench_lab import run_bench
from tests.helpers.gguf_factory import TinySpec, says, write_tiny_model
from tests.helpers.hub_server import FakeHub
from tests.helpers.models_window import open_files, select_quant
from tests.helpers.paths import TESTS

REPO = "unsloth/DeepSeek-R1-Distill-Qwen-1.5B-GGUF"
FILES = ("DeepSeek-R1-Distill-Qwen-1.5B-Q4_K_M.gguf", "DeepSeek-R1-Distill-Qwen-1.5B-Q8_0.gguf")
TEMPLATE = TESTS / "templates" / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
TIMEOUT = 60_000


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    spec = TinySpec(
        think_tokens=True,
        chat_template=TEMPLATE.read_text(encoding="utf-8"),
        name="R1 Distill Tiny",
        script=says("▁hello", "▁world", "</think>", "▁Ember", "!", "</s>"),
    )
    model = write_tiny_model(tmp_path / "r1.gguf", spec).read_bytes()
    h = FakeHub().start()
    h.add_repo(REPO, {FILES[0]: model, FILES[1]: model}, downloads=1000)
    yield h
    h.stop()


def download(qtbot: QtBot, w: MainWindow, quant: str) -> str:
    mm = w.models.model_manager()
    open_files(qtbot, mm, REPO)
    select_quant(mm, quant)
    with qtbot.waitSignal(mm.library_changed, timeout=TIMEOUT):
        mm.download_selected()
    return next(e.name for e in w.library.entries() if quant in e.name)


def test_download_tune_chat_and_benchmark_a_reasoning_model(qtbot: QtBot, window: MainWindow) -> None:
    w = window
    q4 = download(qtbot, w, "Q4_K_M")
    q8 = download(qtbot, w, "Q8_0")

    # tune: GPU layers "auto" (none on this machine), one decode thread, a 1024-token context
    qtbot.waitUntil(lambda: w.model_picker.findData(q4) >= 0, timeout=TIMEOUT)  # listed off the GUI thread
    w.model_picker.setCurrentIndex(w.model_picker.findData(q4))
    with qtbot.waitSignal(w.load_settings_opened, timeout=TIMEOUT):  # once the header is read
        w.models.open_load_settings()
    dialog = w.models.load_settings
    dialog.gpu_layers.setValue(AUTO_GPU_LAYERS)
    dialog.threads.setValue(1)
    dialog.n_ctx.setValue(1024)
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=TIMEOUT):
        assert dialog.submit(load_now=True, confirm=True)
    assert w.model is not None and w.model.threads == 1 and w.model.n_ctx == 1024
    assert "1 thread " in w.model_bar.badge.text()

    # the template's thinking switch is offered, on; the answer starts inside the thinking
    assert w.side.params.think.isEnabled() and w.side.params.think.isChecked()
    w.side.params.max_tokens.setValue(6)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=TIMEOUT):
        w.controller.send("Is 1001 a prime number?")
    qtbot.waitUntil(lambda: not w.transcript.rendering, timeout=TIMEOUT)
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.role == "assistant" and answer.content == "<think>\n hello world</think> Ember!"
    assert answer.metrics["stop_reason"] == "stop"
    # (the closing marker counts as thinking)
    assert (answer.metrics["thinking_tokens"], answer.metrics["output_tokens"]) == (3, 5)
    text = w.transcript.plain_text()
    assert "▸ Thinking  · 2 words" in text and "Ember!" in text
    assert "hello world" not in text  # the thinking is folded once the answer starts

    # the benchmark lab on both downloads: a line each in both plots
    w.models.open_benchmark()
    lab = w.models.benchmark
    run_bench(qtbot, lab, {q4, q8}, "16,48", 4)
    assert lab.status.text() == "Done."
    for chart in (lab.prefill_chart, lab.decode_chart):
        assert [s.count() for s in chart.series()] == [2, 2]
    assert lab.runs[0].machine["threads"] == 1  # the first model ran with its own load settings
    lab.close()
    assert w.model_picker.findData(q8) >= 0  # both downloads are in the picker
