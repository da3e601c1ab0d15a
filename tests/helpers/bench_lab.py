"""A benchmark run from the window's Bench dialog, waited for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember_chat.app.lab.benchmark_dialog import BenchmarkDialog


def bench_dialog(qtbot: object, tmp_path: Path, models: Path, connections: object = None) -> BenchmarkDialog:
    """Models ▸ Benchmark… on these models (and connections), one thread, data kept in tmp_path."""
    from ember_chat.app.lab.benchmark_dialog import BenchmarkDialog
    from ember_chat.engine.models.library import ModelLibrary
    from ember_chat.engine.storage.connections import ConnectionStore
    from ember_chat.engine.storage.model_settings import ModelSettingsStore
    from ember_chat.engine.storage.settings import Settings

    dialog = BenchmarkDialog(
        ModelLibrary(models),
        Settings(threads=1),
        tmp_path / "data",
        connections or ConnectionStore(tmp_path / "connections.json"),  # type: ignore[arg-type]
        ModelSettingsStore(tmp_path / "model_settings.json"),
    )
    qtbot.addWidget(dialog)  # type: ignore[attr-defined]
    return dialog


def run_bench(qtbot: object, dialog: BenchmarkDialog, names: set[str], lengths: str, output: int) -> None:
    """Check these models (by name), set the plan (one repetition), run, wait for the end."""
    from PySide6.QtCore import Qt

    for i in range(dialog.models.count()):
        item = dialog.models.item(i)
        if item.data(Qt.ItemDataRole.UserRole) in names:
            item.setCheckState(Qt.CheckState.Checked)
    dialog.lengths.setText(lengths)
    dialog.output.setValue(output)
    dialog.reps.setValue(1)
    with qtbot.waitSignal(dialog.run_finished, timeout=60_000):  # type: ignore[attr-defined]
        dialog.start()
