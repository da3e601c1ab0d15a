"""Vision models in the window (issue 17): the model picker and the Model Manager's Installed tab say
which models see images (a projector file beside them) and which are vision models whose projector is
missing ("vision needs the projector file", the top complaint elsewhere). Real tiny GGUF files: a
vision LLM with its mmproj, the same kind of model alone in another folder, and a text model."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.main import build_window
from ember_chat.app.models.manager.installed import InstalledTab
from ember_chat.app.models.manager.tables import StatusBanner
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.vision_factory import write_tiny_vision_model

TIMEOUT = 60_000
VISION_COLUMN = 9


def models_folder(root: Path, tiny_model: Path) -> Path:
    """A text model, a vision model with its projector, and a vision model without one."""
    models = root / "models"
    write_tiny_vision_model(models / "seeing", stem="tiny-vision")
    (models / "lonely").mkdir()
    write_tiny_model(models / "lonely" / "lonely-vision.gguf", TinySpec(name="Lonely Vision Test", seed=3))
    shutil.copy(tiny_model, models / "tiny-text.gguf")
    return models


@pytest.fixture
def window(qtbot: QtBot, tmp_path: Path, tiny_model: Path) -> Iterator[MainWindow]:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    models_folder(paths.data_dir, tiny_model)
    w = build_window(paths)
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.models_listed, timeout=TIMEOUT):
        pass
    yield w
    w.close()
    assert w.join_background(30)
    w.store.close()


def test_the_picker_says_which_models_see_images_and_which_lack_their_projector(window: MainWindow) -> None:
    labels = {name: label for label, name in window.model_bar.choices()}
    tips = {
        window.model_picker.itemData(i): window.model_picker.itemData(i, Qt.ItemDataRole.ToolTipRole)
        for i in range(1, window.model_picker.count())
    }
    seeing = next(n for n in labels if "tiny-vision" in n)
    lonely = next(n for n in labels if "lonely-vision" in n)
    text = next(n for n in labels if "tiny-text" in n)
    assert labels[seeing].endswith(" · vision") and "mmproj-tiny-vision.gguf" in tips[seeing]
    assert labels[lonely].endswith(" · vision needs the projector file") and "mmproj" in tips[lonely]
    assert "vision" not in labels[text] and "image" not in tips[text]


def test_the_installed_tab_says_vision_and_vision_needs_the_projector_file(
    qtbot: QtBot, tmp_path: Path, tiny_model: Path
) -> None:
    library = ModelLibrary(models_folder(tmp_path, tiny_model))
    tasks = TaskRunner()
    banner = StatusBanner()
    tab = InstalledTab(library, tasks, banner, lambda: None)
    qtbot.addWidget(tab)
    qtbot.addWidget(banner)
    with qtbot.waitSignal(tab.headers_read, timeout=TIMEOUT):
        tab.refresh_installed()
    table = tab.installed
    assert table.horizontalHeaderItem(VISION_COLUMN).text() == "Vision"
    rows = [(table.item(r, 0).text(), table.item(r, VISION_COLUMN).text()) for r in range(table.rowCount())]
    vision = {name: said for name, said in rows if name.endswith(".gguf")}  # (not the bundled starter model)
    assert vision == {
        next(n for n in vision if "tiny-vision" in n): "vision (mmproj-tiny-vision.gguf)",
        next(n for n in vision if "lonely-vision" in n): "vision needs the projector file",
        next(n for n in vision if "tiny-text" in n): "—",
    }
    # shown where a Model Manager of 980 px still shows it (it was the last of ten columns: scrolled off)
    tab.resize(940, 500)
    tab.show()
    qtbot.waitExposed(tab)
    header = table.horizontalHeader()
    assert header.sectionViewportPosition(VISION_COLUMN) + header.sectionSize(VISION_COLUMN) <= table.viewport().width()
    tab.shutdown()
    tasks.shutdown()
    assert tab.join(10) and tasks.join(10)
