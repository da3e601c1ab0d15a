"""A message sent while a model loads goes as soon as the model is ready (as the loading page says):
Enter keeps it in the box and says so, the load's end sends what the box holds then. A load that fails
or is cancelled sends nothing and the text stays. Real window, a fake engine whose load waits on an
event."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.inference.backend import ModelDescription
from tests.fake_backend import FakeBackend
from tests.test_app import ANSWER_TIMEOUT, make_window, paths

__all__ = ["make_window", "paths"]  # fixtures


class SlowLoad(FakeBackend):
    """Its load waits until `go` is set (then fails when `fail` is)."""

    def __init__(self) -> None:
        super().__init__(n_tokens=3)
        self.go = threading.Event()
        self.fail = False

    def load(self, ref: ModelRef, progress=None, cancel=None) -> ModelDescription:
        self.go.wait(30)
        if self.fail:
            raise ValueError("not a GGUF file")
        return super().load(ref, progress, cancel)


@pytest.fixture
def slow() -> Iterator[SlowLoad]:
    backend = SlowLoad()
    yield backend
    backend.go.set()  # (a load still waiting ends)


def press_enter(qtbot: QtBot, w: MainWindow, text: str) -> None:
    w.composer.editor.setPlainText(text)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)


def test_a_message_sent_while_the_model_loads_goes_when_it_is_ready(
    qtbot: QtBot, make_window: Callable[..., MainWindow], slow: SlowLoad
) -> None:
    w = make_window(lambda _ref: slow)
    w.models.load_model("tiny.gguf")
    press_enter(qtbot, w, "hello while loading")
    assert w.composer.editor.toPlainText() == "hello while loading"  # kept, not sent yet
    assert "sent as soon as the model is loaded" in w.banner.text() and w.banner.isVisible()
    assert slow.requests == []
    w.composer.editor.setPlainText("hello, edited while loading")  # the box's text when the load ends goes
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        slow.go.set()
    assert slow.requests[-1][-1].content == "hello, edited while loading"
    assert w.composer.editor.toPlainText() == ""
    assert [m.role for m in w.store.thread(w.controller.conversation_id)] == ["user", "assistant"]


def test_a_load_that_fails_sends_nothing_and_keeps_the_text(
    qtbot: QtBot, make_window: Callable[..., MainWindow], slow: SlowLoad
) -> None:
    w = make_window(lambda _ref: slow)
    w.models.load_model("tiny.gguf")
    press_enter(qtbot, w, "hello while loading")
    slow.fail = True
    none = ModelState.NONE
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == none, timeout=ANSWER_TIMEOUT):
        slow.go.set()
    assert w.composer.editor.toPlainText() == "hello while loading"
    assert "not a GGUF file" in w.banner.text() and slow.requests == []
    assert w.controller.conversation_id is None
