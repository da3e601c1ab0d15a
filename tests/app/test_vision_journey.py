"""Issue 17, the journey in the real window with the real llama.cpp runtime: a vision model (the tiny
LLM with its tiny projector, found beside it in the models folder) is loaded, a screenshot is attached
and asked about; the image goes through mtmd (why this speed: "images encoded in … ms"), a follow-up
reuses the image from the KV cache and its embedding from the cache, and in a new window the next day
the reopened chat still sends its stored image to the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.main import build_window
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.vision_factory import write_tiny_vision_model

WAIT_MS = 60_000
NAME = "acme/tiny-vision-GGUF/tiny-vision.gguf"


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    p = AppPaths(tmp_path / "data", tmp_path / "config")
    write_tiny_vision_model(p.default_models_dir / "acme" / "tiny-vision-GGUF")
    return p


@pytest.fixture
def open_window(qtbot: QtBot, paths: AppPaths) -> Iterator[object]:
    windows: list[MainWindow] = []

    def make() -> MainWindow:
        w = build_window(paths)
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        with qtbot.waitSignal(w.models_listed, timeout=WAIT_MS):
            pass
        with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=WAIT_MS):
            w.models.load_model(NAME)
        w.side.params.max_tokens.setValue(4)
        w.side.params.temperature.setValue(0)
        return w

    yield make
    for w in windows:
        close(w)


def close(w: MainWindow) -> None:
    if w.isVisible():
        w.close()
        assert w.join_background(30)
        w.store.close()


def send(qtbot: QtBot, w: MainWindow, text: str) -> None:
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=WAIT_MS):
        w.composer.editor.setPlainText(text)
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not w.transcript.rendering, timeout=WAIT_MS)


def test_ask_about_a_screenshot_follow_up_and_reopen(qtbot: QtBot, open_window: object, tmp_path: Path) -> None:
    w = open_window()  # type: ignore[operator]
    assert w.model is not None and w.model.vision
    shot = tmp_path / "screenshot.png"
    Image.new("RGB", (320, 200), (220, 60, 40)).save(shot)
    w.composer.attach_paths([shot])
    bar = w.composer.attachments
    qtbot.waitUntil(lambda: bool(bar.items) and not bar.busy, timeout=WAIT_MS)
    assert not bar.items[0].chip.warning.isVisible()  # a model that sees images: nothing to warn about

    send(qtbot, w, "What colour is it?")
    why = w.side.metrics.why.text()
    assert "images encoded in" in why and "0 reused from the cache" in why

    send(qtbot, w, "Are you sure?")
    why = w.side.metrics.why.text()
    assert "images from the cache (not encoded again)" in why
    reused = int(why.split(" reused")[0].rsplit(", ", 1)[1].replace(",", ""))
    assert reused > 4  # the first turn with its image's positions came from the KV cache

    # the next day: a new window (a new model load, nothing cached), the chat reopened
    chat = w.controller.conversation_id
    close(w)
    w = open_window()  # type: ignore[operator]
    w.chats.open_conversation(chat)
    qtbot.waitUntil(lambda: w.controller.conversation_id == chat and not w.transcript.rendering, timeout=WAIT_MS)
    send(qtbot, w, "And now?")
    assert "images encoded in" in w.side.metrics.why.text()  # the stored image went to the model again
