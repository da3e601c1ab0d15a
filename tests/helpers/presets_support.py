"""Shared by the presets tests: loading a model and sending a message as a user does (their window over
a data folder with two copies of the tiny model, "tiny.gguf" and "other.gguf", closed and joined at teardown,
is tests/app/conftest.py's make_presets_window and two_models_paths)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow

LOAD_TIMEOUT = 60_000
ANSWER_TIMEOUT = 120_000


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
