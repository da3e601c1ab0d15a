"""Shared by the presets tests: a window over a data folder with two copies of the tiny model
("tiny.gguf", "other.gguf"), closed and joined at teardown; loading a model and sending a message as a
user does."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.main import build_window
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths

LOAD_TIMEOUT = 60_000
ANSWER_TIMEOUT = 120_000


@pytest.fixture
def paths(tmp_path: Path, tiny_model: Path) -> AppPaths:
    p = AppPaths(tmp_path / "data", tmp_path / "config")
    p.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, p.default_models_dir / "tiny.gguf")
    shutil.copy(tiny_model, p.default_models_dir / "other.gguf")
    return p


@pytest.fixture
def make_window(qtbot: QtBot, paths: AppPaths) -> Iterator[Callable[[], MainWindow]]:
    windows: list[MainWindow] = []

    def make() -> MainWindow:
        w = build_window(paths)
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        with qtbot.waitSignal(w.models_listed, timeout=LOAD_TIMEOUT):
            pass
        return w

    yield make
    for w in windows:
        w.close()
        if w.api.quit_question is not None:
            w.api.quit_button.click()
        assert w.join_background(30)
        w.store.close()


def load(qtbot: QtBot, w: MainWindow, name: str) -> None:
    with qtbot.waitSignal(
        w.model_state_changed, check_params_cb=lambda s: s in ("ready", "none"), timeout=LOAD_TIMEOUT
    ):
        w.models.load_model(name)
    assert w.controller.model_ready


def send(qtbot: QtBot, w: MainWindow, text: str) -> None:
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.composer.editor.setPlainText(text)
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    if w.transcript.rendering:
        with qtbot.waitSignal(w.transcript.rendered, timeout=ANSWER_TIMEOUT):
            pass
