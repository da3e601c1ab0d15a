"""Enter while an answer streams (issue 28, item 6): it was ignored, the text stayed in the box and the next
question typed was glued to it ("What do you eat?Tell me about the sea." sent as one). Now the message (and
its files) leaves the box, a notice says it goes when the answer ends, and it does, as its own message;
Esc, Stop or leaving the chat put it back in the box, unsent, and the notice says so. Real window, a fake
engine that streams slowly."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import ANSWER_TIMEOUT, load, set_max_tokens


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds a fake answer at its 6th token until set (set at the end whatever happened, before the
    window closes)."""
    event = threading.Event()
    yield event
    event.set()


def answering(
    qtbot: QtBot, make_window: Callable[..., MainWindow], gate: threading.Event | None = None
) -> tuple[MainWindow, FakeBackend]:
    """A window whose answer to "Hello" streams (a token every 10 ms): without end, or with `gate`, 10
    tokens, the 6th waiting for it (what the test does meanwhile cannot miss the answer's end)."""
    backend = FakeBackend(n_tokens=10 if gate else 100_000, delay_s=0.01)
    if gate is not None:
        backend.on_token = lambda i: gate.wait(ANSWER_TIMEOUT / 1000) if i == 5 else None
    w = make_window(lambda _ref: backend)
    load(qtbot, w)
    set_max_tokens(w, 100_000)
    w.composer.editor.setPlainText("Hello")
    with qtbot.waitSignal(w.controller.streamed, timeout=ANSWER_TIMEOUT):
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    return w, backend


def type_and_enter(qtbot: QtBot, w: MainWindow, text: str) -> None:
    w.composer.editor.setFocus()
    qtbot.keyClicks(w.composer.editor, text)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)


def questions(w: MainWindow) -> list[str]:
    return [m.content for m in w.store.thread(w.controller.conversation_id) if m.role == "user"]


def idle(qtbot: QtBot, w: MainWindow) -> None:
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=ANSWER_TIMEOUT)


def test_enter_while_an_answer_streams_sends_the_message_when_it_ends(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, gate: threading.Event
) -> None:
    w, backend = answering(qtbot, make_window, gate)
    notes = tmp_path / "sea.txt"
    notes.write_text("The sea is salty.\n", encoding="utf-8")
    w.composer.attach_paths([notes])
    bar = w.composer.attachments
    qtbot.waitUntil(lambda: bool(bar.items) and not bar.busy, timeout=ANSWER_TIMEOUT)
    type_and_enter(qtbot, w, "What do you eat?")
    assert w.controller.generating and w.composer.editor.toPlainText() == "" and not bar.items  # out of the box
    assert "Your message “What do you eat?” is sent when the answer ends" in w.banner.text() and w.banner.isVisible()
    qtbot.keyClicks(w.composer.editor, "Tell me about the sea.")  # the next question, typed meanwhile
    assert len(backend.requests) == 1
    gate.set()  # the answer goes on to its end
    qtbot.waitUntil(lambda: len(backend.requests) == 2, timeout=ANSWER_TIMEOUT)  # the answer ended: it went
    assert (
        backend.requests[-1][-1].content.endswith("What do you eat?") and "sea.txt" in backend.requests[-1][-1].content
    )
    assert w.composer.editor.toPlainText() == "Tell me about the sea."  # not sent, not glued
    idle(qtbot, w)
    assert questions(w) == ["Hello", "What do you eat?"]
    assert not w.banner.isVisible() or "sent when the answer ends" not in w.banner.text()


def test_two_messages_sent_while_answering_go_one_after_the_other(
    qtbot: QtBot, make_window: Callable[..., MainWindow], gate: threading.Event
) -> None:
    w, backend = answering(qtbot, make_window, gate)
    type_and_enter(qtbot, w, "What do you eat?")
    type_and_enter(qtbot, w, "Tell me about the sea.")
    assert "2 messages are sent one after another" in w.banner.text()
    gate.set()
    qtbot.waitUntil(lambda: len(backend.requests) == 3, timeout=ANSWER_TIMEOUT)
    idle(qtbot, w)
    assert questions(w) == ["Hello", "What do you eat?", "Tell me about the sea."]
    roles = [m.role for m in w.store.thread(w.controller.conversation_id)]
    assert roles == ["user", "assistant"] * 3


def test_esc_puts_the_waiting_message_back_in_the_box_unsent(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w, backend = answering(qtbot, make_window)
    type_and_enter(qtbot, w, "What do you eat?")
    qtbot.keyClicks(w.composer.editor, "And the sea?")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Escape)
    idle(qtbot, w)
    assert w.composer.editor.toPlainText() == "What do you eat?\n\nAnd the sea?"  # first, then what was typed
    assert "not sent; it is back in the box" in w.banner.text()
    qtbot.wait(100)  # (a send that would follow the answer's end has had its turn)
    assert len(backend.requests) == 1 and questions(w) == ["Hello"]


def test_stop_puts_it_back_too(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w, backend = answering(qtbot, make_window)
    type_and_enter(qtbot, w, "What do you eat?")
    qtbot.mouseClick(w.composer.button, Qt.MouseButton.LeftButton)  # Stop
    idle(qtbot, w)
    assert w.composer.editor.toPlainText() == "What do you eat?" and len(backend.requests) == 1


def test_leaving_the_chat_puts_the_waiting_message_back_in_the_box(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w, backend = answering(qtbot, make_window)
    first = w.controller.conversation_id
    other = w.store.create_conversation("Another chat").id
    w.chats.reload_conversations()
    type_and_enter(qtbot, w, "What do you eat?")
    w.chats.open_conversation(other)
    idle(qtbot, w)
    qtbot.wait(100)
    assert w.controller.conversation_id == other and w.composer.editor.toPlainText() == "What do you eat?"
    assert len(backend.requests) == 1 and w.store.thread(other) == []
    assert [m.content for m in w.store.thread(first) if m.role == "user"] == ["Hello"]
