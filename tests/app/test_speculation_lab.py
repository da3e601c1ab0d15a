"""The benchmark lab's "Speculative decoding" tab on the window's loaded model (issue 31): each task (code
edit, answer from a document, free prose) answered off, with n-gram drafts and with the draft model set in
the model's load settings, the table filled (tokens/s, speedup, accepted share, same answer as off), copied,
exported and kept in the data folder; a model without a draft model has that column say why; a cancel
mid-run stops it and the chat answers afterwards."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.lab.speculation_panel import SpeculationPanel
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.model_settings import ModelLoadSettings
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.window import load, send, set_max_tokens


def open_lab(qtbot: QtBot, w: MainWindow) -> SpeculationPanel:
    w.models.open_benchmark()
    dialog = w.models.benchmark
    qtbot.waitExposed(dialog)
    dialog.tabs.setCurrentWidget(dialog.speculation)
    return dialog.speculation  # type: ignore[no-any-return]


def run(qtbot: QtBot, panel: SpeculationPanel, tokens: int) -> None:
    panel.tokens.setValue(tokens)
    with qtbot.waitSignal(panel.run_finished, timeout=120_000):
        panel.run_button.click()


def test_off_ngram_and_the_draft_model_per_task(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    draft = write_tiny_model(tmp_path / "same.gguf", TinySpec(seed=7))  # the same vocabulary, other weights
    w = make_window()
    own = ModelLoadSettings.from_settings(w.ctx.settings)
    w.model_settings.save("tiny.gguf", ModelLoadSettings(**{**own.options(), "n_ctx": 1024}, draft_model=str(draft)))
    load(qtbot, w)
    assert w.model.draft_model == "same.gguf"
    panel = open_lab(qtbot, w)
    assert "same.gguf" in panel.model_line.text() and panel.run_button.isEnabled()
    assert not panel.export_csv.isEnabled() and not panel.copy_button.isEnabled()
    run(qtbot, panel, 16)
    assert panel.status.text().startswith("Done"), panel.status.text()
    assert panel.progress.value() == panel.progress.maximum() == 12  # 3 warm-ups, then 3 tasks × 3 modes
    table = panel.table
    assert [table.item(r, 0).text() for r in range(3)] == ["Code edit", "Answer from a document", "Free prose"]
    assert [table.horizontalHeaderItem(c).text() for c in range(4)] == ["Task", "Off", "N-gram", "Draft model"]
    for r in range(3):
        assert table.item(r, 1).text().endswith("tokens/s")
        for c in (2, 3):
            cell = table.item(r, c).text()
            assert "tokens/s" in cell and "× off's speed" in cell and "same answer as off" in cell, cell
            assert "% accepted (" in cell or "nothing drafted" in cell, cell
    assert "% accepted (" in table.item(1, 2).text()  # the document's passage: n-grams to draft
    assert table.rowSpan(0, 3) == 1

    panel.copy()
    copied = QGuiApplication.clipboard().text().splitlines()
    assert len(copied) == 10 and copied[0].startswith("Task\tMode\tDecode tokens/s")
    assert copied[3].startswith("Code edit\tDraft model\t")
    panel.export(tmp_path / "spec.csv", "csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "spec.csv").read_text())))
    assert len(rows) == 9 and {r["mode"] for r in rows} == {"off", "ngram", "draft"}
    panel.export(tmp_path / "spec.json", "json")
    assert json.loads((tmp_path / "spec.json").read_text())["draft_model"] == "same.gguf"
    saved = list((w.ctx.data_dir / "benchmarks").glob("speculative-*.json"))
    assert len(saved) == 1 and len(json.loads(saved[0].read_text())["results"]) == 9

    set_max_tokens(w, 4)  # the chat answers after the lab had the engine (its cache cleared)
    send(qtbot, w, "Hello")
    assert w.store.thread(w.controller.conversation_id)[-1].content
    w.models.benchmark.close()


def test_without_a_draft_model_its_column_says_why_and_a_cancel_mid_run(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    own = ModelLoadSettings.from_settings(w.ctx.settings)
    w.model_settings.save("tiny.gguf", ModelLoadSettings(**{**own.options(), "n_ctx": 2048}))
    load(qtbot, w)
    panel = open_lab(qtbot, w)
    assert "no draft model" in panel.model_line.text() and "load settings (⚙)" in panel.model_line.text()
    run(qtbot, panel, 16)
    assert panel.status.text().startswith("Done")
    assert panel.table.rowSpan(0, 3) == 3  # one cell over the three tasks says why
    assert "no draft model" in panel.table.item(0, 3).text()
    assert all("tokens/s" in panel.table.item(r, c).text() for r in range(3) for c in (1, 2))
    assert panel.run is not None and {r.mode for r in panel.run.results} == {"off", "ngram"}

    def cancel_once_started(progress: tuple[int, int, str]) -> None:
        if progress[0] >= 1 and not panel._cancel.is_set():
            panel.cancel()

    shown = panel._show_progress  # (the reports reach it on the GUI thread: cancel at the first after a warm-up)
    panel._show_progress = lambda p: (shown(p), cancel_once_started(p))  # type: ignore[method-assign]
    run(qtbot, panel, 1024)
    assert panel.status.text().startswith("Cancelled"), panel.status.text()
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()
    assert panel.run is not None and panel.run.cancelled and len(panel.run.results) < 6  # stopped mid-run
    set_max_tokens(w, 4)
    send(qtbot, w, "Hello")
    assert w.store.thread(w.controller.conversation_id)[-1].content
    w.models.benchmark.close()


def test_the_lab_with_its_two_tabs_fits_a_small_screen(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """A 1024×640 screen, less a title bar: the tabs' extra height is taken from the charts' minimum, and
    the dialog opens within the screen it is on, not past its bottom edge (seen under Xvfb at 1024×640)."""
    w = make_window()
    w.models.open_benchmark()
    dialog = w.models.benchmark
    qtbot.waitExposed(dialog)
    room = dialog.screen().availableGeometry()
    assert dialog.width() <= room.width() and dialog.height() <= room.height()
    assert dialog.minimumSizeHint().height() <= 600 and dialog.minimumSizeHint().width() <= 1024
    dialog.close()
