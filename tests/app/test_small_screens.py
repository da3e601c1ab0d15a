"""Issue 16, item 8: the window fits small screens. Usable at 1024×640 with the side panel and at
800×600 without; the model bar elides instead of pushing the window wider; the default size fits the
screen's available area, with room left for a title bar."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QRect, QSize
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.main import build_window
from ember_chat.app.qt.window_frame import TITLE_BAR_ALLOWANCE
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.shell.window_size import default_geometry, default_splitter_sizes
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.fake_backend import FakeBackend

LONG = ModelDescription(
    "Qwen2.5-Coder-14B-Instruct-abliterated-Q4_K_M", "CUDA", 131_072, architecture="qwen2",
    quantization="Q4_K_M", parameter_count=14_770_000_000, threads=16, gpu_layers=49,
)  # fmt: skip


class LongNamedBackend(FakeBackend):
    """A model whose status and badge are as long as they get: a big local model on a GPU."""

    @property
    def description(self) -> ModelDescription | None:
        return LONG if self._loaded else None


@pytest.fixture
def window(qtbot: QtBot, tmp_path: Path, tiny_model: Path) -> Iterator[Callable[[], MainWindow]]:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    paths.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, paths.default_models_dir / "Qwen2.5-Coder-14B-Instruct-abliterated-Q4_K_M.gguf")
    made: list[MainWindow] = []

    def make() -> MainWindow:
        w = build_window(paths, backend_factory=lambda _ref: LongNamedBackend(n_tokens=5))
        qtbot.addWidget(w)
        w.show()
        made.append(w)
        with qtbot.waitSignal(w.models_listed, timeout=60_000):
            pass
        return w

    yield make
    for w in made:
        w.close()
        assert w.join_background(30)
        w.store.close()


def _load_long_named(qtbot: QtBot, w: MainWindow) -> None:
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=60_000):
        w.models.load_model("Qwen2.5-Coder-14B-Instruct-abliterated-Q4_K_M.gguf")
    assert "Q4_K_M" in w.model_bar.status.toolTip() and "49 GPU layers" in w.model_bar.badge.toolTip()


def _inside(w: MainWindow, widget: QWidget) -> bool:
    """The widget is shown whole inside the window's own rectangle."""
    top_left = widget.mapTo(w, widget.rect().topLeft())
    return widget.isVisible() and w.rect().contains(QRect(top_left, widget.size()))


@pytest.mark.parametrize(("side_panel", "size"), [(True, QSize(1024, 640)), (False, QSize(800, 600))])
def test_the_window_is_usable_on_a_small_screen(
    qtbot: QtBot, window: Callable[[], MainWindow], side_panel: bool, size: QSize
) -> None:
    w = window()
    _load_long_named(qtbot, w)
    if w.side.isVisible() != side_panel:
        w.toggle_side_panel()
    hint = w.minimumSizeHint()
    assert hint.width() <= size.width() and hint.height() <= size.height(), hint
    w.setMaximumSize(size)  # the offscreen screen may be smaller than the window asks for
    w.resize(size)
    qtbot.waitUntil(lambda: w.size() == size)
    QApplication.processEvents()
    assert _inside(w, w.statusBar())
    assert _inside(w, w.composer.button)
    assert _inside(w, w.model_bar.unload) and _inside(w, w.model_bar.badge)
    assert w.model_bar.status.width() > 0 and w.model_bar.badge.width() > 0
    assert w.composer.editor.height() >= 40  # room to type
    assert w.centre_stack.currentWidget().height() >= 150  # room to read


def test_the_model_bar_elides_instead_of_pushing(qtbot: QtBot, window: Callable[[], MainWindow]) -> None:
    w = window()
    before = w.model_bar.minimumSizeHint().width()
    _load_long_named(qtbot, w)
    bar = w.model_bar
    assert bar.minimumSizeHint().width() <= max(before, 480)  # a long name and badge do not widen it
    w.setMaximumWidth(1024)
    w.resize(1024, 640)
    qtbot.waitUntil(lambda: w.width() == 1024)
    QApplication.processEvents()
    shown = bar.status.displayed_text()
    assert shown.endswith("…") and shown != bar.status.text()  # the status is elided, all of it in its tooltip
    assert bar.status.text() in bar.status.toolTip()


def test_default_size_fits_a_1280x800_screen() -> None:
    available = QRect(0, 0, 1280, 800)
    rect = default_geometry(available, QSize(900, 560))
    assert available.contains(rect)
    assert rect.height() + TITLE_BAR_ALLOWANCE <= available.height()  # the status bar stays on screen
    assert rect.width() >= 1100 and rect.height() >= 680  # still a roomy window
    big = default_geometry(QRect(0, 0, 1920, 1040), QSize(900, 560))
    assert big.size() == QSize(1280, 800) and big.center() == QRect(0, 0, 1920, 1040).center()


def test_a_new_window_fits_the_screen_it_opens_on(window: Callable[[], MainWindow]) -> None:
    w = window()
    available = w.screen().availableGeometry()
    assert w.width() <= max(available.width(), w.minimumSizeHint().width())
    assert w.height() + TITLE_BAR_ALLOWANCE <= available.height()


STARTER_LIKE = ModelDescription(
    "gemma-3-270m-it-Q4_K_M", "CPU", 4_096, architecture="gemma3", quantization="Q4_K_M",
    parameter_count=268_000_000, threads=2, gpu_layers=0,
)  # fmt: skip


class StarterLikeBackend(FakeBackend):
    @property
    def description(self) -> ModelDescription | None:
        return STARTER_LIKE if self._loaded else None


def test_at_the_default_size_the_model_bar_is_shown_whole(qtbot: QtBot, tmp_path: Path, tiny_model: Path) -> None:
    """At 1280x800 with the default column widths, a usual model's status and badge are not elided
    (eliding is for small windows, not the default one)."""
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    paths.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, paths.default_models_dir / "gemma.gguf")
    w = build_window(paths, backend_factory=lambda _ref: StarterLikeBackend(n_tokens=5))
    qtbot.addWidget(w)
    w.show()
    try:
        with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=60_000):
            w.models.load_model("gemma.gguf")
        w.setMinimumSize(1280, 800)  # (the offscreen screen is smaller than a 1280x800 one)
        w.resize(1280, 800)
        qtbot.waitUntil(lambda: w.width() == 1280)
        w.splitter.setSizes(default_splitter_sizes(1280, w.side.minimumSizeHint().width()))
        QApplication.processEvents()
        bar = w.model_bar
        assert bar.status.displayed_text() == bar.status.text(), bar.status.displayed_text()
        assert bar.badge.displayed_text() == bar.badge.text(), bar.badge.displayed_text()
    finally:
        w.close()
        assert w.join_background(30)
        w.store.close()
