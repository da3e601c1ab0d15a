"""A message sent while a model loads goes as soon as the model is ready (as the loading page says):
Enter keeps it in the box and says so, the load's end sends what the box holds then. A load that fails
or is cancelled sends nothing and the text stays. Real window, a fake engine whose load waits on an
event."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.inference.backend import ModelDescription
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import ANSWER_TIMEOUT, load, send


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


def sent_while_loading(qtbot: QtBot, make_window: Callable[..., MainWindow], slow: SlowLoad) -> MainWindow:
    """A window whose model load waits on `slow.go`, "hello while loading" sent meanwhile."""
    w = make_window(lambda _ref: slow)
    w.models.load_model("tiny.gguf")
    press_enter(qtbot, w, "hello while loading")
    return w


def test_a_message_sent_while_the_model_loads_goes_when_it_is_ready(
    qtbot: QtBot, make_window: Callable[..., MainWindow], slow: SlowLoad
) -> None:
    w = sent_while_loading(qtbot, make_window, slow)
    assert w.composer.editor.toPlainText() == "hello while loading"  # kept, not sent yet
    assert w.composer.editor.textCursor().position() == len("hello while loading")  # typing goes on at its end
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
    w = sent_while_loading(qtbot, make_window, slow)
    slow.fail = True
    none = ModelState.NONE
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == none, timeout=ANSWER_TIMEOUT):
        slow.go.set()
    assert w.composer.editor.toPlainText() == "hello while loading"
    assert "not a GGUF file" in w.banner.text() and slow.requests == []
    assert w.controller.conversation_id is None


def test_esc_during_the_load_keeps_the_message_unsent_for_good(
    qtbot: QtBot, make_window: Callable[..., MainWindow], slow: SlowLoad
) -> None:
    w = sent_while_loading(qtbot, make_window, slow)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Escape)  # Esc: the load is cancelled
    assert not (w.banner.isVisible() and "sent as soon as" in w.banner.text())
    slow.go.set()
    slow.go = threading.Event()
    slow.go.set()
    load(qtbot, w)  # a later load, asked for again: the message is not sent by it
    assert slow.requests == [] and w.composer.editor.toPlainText() == "hello while loading"


def test_a_queued_message_waits_for_its_file_to_be_counted_again(
    qtbot: QtBot, make_window: Callable[..., MainWindow], slow: SlowLoad, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("The keeper's cat is named Biscuit.", encoding="utf-8")
    w = make_window(lambda _ref: slow)
    w.composer.attach_paths([notes])
    qtbot.waitUntil(lambda: bool(w.composer.attachments.items) and not w.composer.attachments.busy)
    w.models.load_model("tiny.gguf")
    press_enter(qtbot, w, "What is the cat called?")
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        slow.go.set()  # (the model's tokenizer counts the file again first)
    assert "Biscuit" in slow.requests[-1][-1].content and "still being read" not in w.banner.text()


def test_starting_an_edit_while_a_message_waits_for_the_load_drops_the_wait(
    qtbot: QtBot, make_window: Callable[..., MainWindow], slow: SlowLoad
) -> None:
    slow.go.set()
    w = make_window(lambda _ref: slow)
    load(qtbot, w)
    send(qtbot, w, "first question")
    question = w.store.thread(w.controller.conversation_id)[-2].id
    slow.go = threading.Event()
    w.models.load_model("tiny.gguf")  # loaded again (say, other settings): a load in progress
    qtbot.waitUntil(lambda: w.models.loading_name is not None)
    press_enter(qtbot, w, "queued")
    w.compose.edit_message(question)
    assert not (w.banner.isVisible() and "sent as soon as" in w.banner.text())
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=ANSWER_TIMEOUT):
        slow.go.set()
    assert len(slow.requests) == 1 and w.composer.editor.toPlainText() == "first question"  # the edit, unsent
