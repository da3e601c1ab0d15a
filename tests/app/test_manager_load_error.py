"""Issue 28, item 11: Model Manager ▸ Installed, Load on a damaged file. Its error showed in the main
window, behind the Model Manager; it shows in the Manager's own banner while it is open (and in the
window's, which stays when the Manager is closed). A damaged row's long message pushed every other
column out of view; it is elided, the whole text in its tooltip."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.models.manager.dialog import SIZE, ModelManager
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.fake_backend import FakeBackend

TIMEOUT = 30_000
DAMAGED = "Llama-3.2-3B-Instruct-Q4_K_M-download-cut-short.gguf"  # a long name, as Hub files have


def damaged_copy(tiny: Path, folder: Path) -> Path:
    """A download cut short: the model's first bytes only (its header ends mid-way)."""
    path = folder / DAMAGED
    path.write_bytes(tiny.read_bytes()[:300])
    return path


def open_manager(qtbot: QtBot, w: MainWindow) -> ModelManager:
    mm = w.models.model_manager()
    with qtbot.waitSignal(mm.headers_read, timeout=TIMEOUT):
        w.models.open_model_manager()
    mm.tabs.setCurrentIndex(1)
    return mm


def row_of(mm: ModelManager, name: str) -> int:
    table = mm.installed
    return next(r for r in range(table.rowCount()) if table.item(r, 0).data(Qt.ItemDataRole.UserRole).name == name)


def test_load_on_a_damaged_file_says_why_in_the_manager(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    damaged_copy(paths.default_models_dir / "tiny.gguf", paths.default_models_dir)
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    mm = open_manager(qtbot, w)
    assert mm.select_installed(DAMAGED)
    mm.installed_tab.load_selected()
    qtbot.waitUntil(mm.banner.isVisible, timeout=TIMEOUT)
    assert mm.banner.kind() == "error"
    assert DAMAGED in mm.banner.text() or "damaged" in mm.banner.text().lower()
    assert w.banner.text() == mm.banner.text()  # (the window keeps it once the Manager is closed)
    # a model that loads ends the Manager's error too
    assert mm.select_installed("tiny.gguf")
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=TIMEOUT):
        mm.installed_tab.load_selected()
    assert not mm.banner.isVisible()
    mm.close()


def test_a_damaged_rows_long_message_is_elided_and_the_other_columns_stay_in_view(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    damaged_copy(paths.default_models_dir / "tiny.gguf", paths.default_models_dir)
    shutil.copy(paths.default_models_dir / "tiny.gguf", paths.default_models_dir / "another.gguf")
    w = make_window()
    mm = open_manager(qtbot, w)
    mm.resize(SIZE)  # (its size on a usual screen: the offscreen screen is 800 px wide, where it is smaller)
    QApplication.processEvents()
    table = mm.installed
    cell = table.item(row_of(mm, DAMAGED), 1)
    assert cell.toolTip().startswith("damaged: ") and len(cell.toolTip()) > 80  # the whole message
    # the damaged row's column is no wider than a usual one's longest text allows
    assert table.columnWidth(1) <= table.fontMetrics().horizontalAdvance("M" * 24), table.columnWidth(1)
    assert cell.text().endswith("…") or table.fontMetrics().horizontalAdvance(cell.text()) <= table.columnWidth(1)
    # the columns a user reads a model by stay in view in the Manager at its size
    header = table.horizontalHeader()
    right = max(header.sectionViewportPosition(c) + header.sectionSize(c) for c in (0, 1, 2, 3, 4, 5))
    assert right <= table.viewport().width(), (right, table.viewport().width())
    mm.close()
