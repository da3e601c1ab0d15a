"""Issue 28: a theme switch (View ▸ Theme) or a text size change (View ▸ Bigger text, Settings ▸ Appearance)
while an answer streams dropped the live answer: the transcript was written again from the store, where
the answer was a half-saved, unfinished message ("interrupted"), and its text never came back when it
ended. Now the live answer keeps streaming, in the new colours and size, and ends rendered and saved
whole. Real window, a fake engine held in the middle of its answer while the look changes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QPushButton, QRadioButton
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.transcript.font_size import system_points
from ember_chat.engine.storage.conversations import Message
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.settings_window import SECTIONS, _open
from tests.helpers.window import ANSWER_TIMEOUT, load, set_max_tokens, start_endless_answer, view_action

# A reasoning model's answer: its thinking, then Markdown over two paragraphs.
SCRIPT = ["<think>", "Weighing ", "the ", "question. ", "</think>", "The ", "**sea** ", "is ", "salty.\n\n"]
SCRIPT += ["Rivers ", "bring ", "minerals ", "and ", "the ", "sun ", "leaves ", "them ", "behind."]
ANSWER = "The **sea** is salty.\n\nRivers bring minerals and the sun leaves them behind."


@pytest.fixture
def gate(make_window: Callable[..., MainWindow]) -> Iterator[threading.Event]:
    """Holds the fake answer after a token until set (set at the end whatever happened, before the
    window closes: this fixture needs the window's)."""
    event = threading.Event()
    yield event
    event.set()


def held_answer(
    qtbot: QtBot, make_window: Callable[..., MainWindow], gate: threading.Event, at: int, shows: str
) -> MainWindow:
    """A window whose answer to a question streams SCRIPT and waits after piece `at` until `gate` is set;
    returns once the transcript `shows` the answer so far."""
    backend = FakeBackend(script=SCRIPT, delay_s=0.005)
    backend.on_token = lambda i: gate.wait(ANSWER_TIMEOUT / 1000) if i == at else None
    w = make_window(lambda _ref: backend)
    load(qtbot, w)
    w.composer.editor.setPlainText("Why is the sea salty?")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: shows in w.transcript.plain_text(), timeout=ANSWER_TIMEOUT)
    return w


def answer(w: MainWindow) -> Message:
    assert w.controller.conversation_id is not None
    return w.store.thread(w.controller.conversation_id)[-1]


def ended(qtbot: QtBot, w: MainWindow) -> str:
    """Wait for the answer's end and its rendering; the transcript's text then."""
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=ANSWER_TIMEOUT)
    w.transcript.finish_rendering()
    return w.transcript.plain_text()


def drawn_again(w: MainWindow) -> str:
    """The transcript as the stored thread draws it (what opening the chat again shows)."""
    w.controller.refresh()
    w.transcript.finish_rendering()
    return w.transcript.plain_text()


def test_a_theme_switch_keeps_the_streaming_answer(
    qtbot: QtBot, make_window: Callable[..., MainWindow], gate: threading.Event
) -> None:
    w = held_answer(qtbot, make_window, gate, at=2, shows="Weighing the")  # while it thinks
    view_action(w, "Theme").menu().actions()[1].trigger()  # View ▸ Theme ▸ Dark
    assert w.settings.theme == "dark"
    live = w.transcript.plain_text()
    assert w.transcript.streaming.active and "Thinking…" in live and "Weighing the" in live, live[-200:]
    assert "interrupted" not in live
    gate.set()
    text = ended(qtbot, w)
    saved = answer(w)
    assert saved.complete and saved.content.endswith(ANSWER) and "Weighing the question." in saved.content
    assert (saved.metrics or {}).get("stop_reason") == "stop"
    assert "interrupted" not in text and "The sea is salty." in text and "leaves them behind." in text, text[-300:]
    assert "▸ Thinking" in text and text.count("TTFT") == 1  # the thinking folded, one metrics line
    assert text == drawn_again(w)  # as the finished answer is drawn from the store


def test_a_text_size_change_keeps_the_streaming_answer_at_the_new_size(
    qtbot: QtBot, make_window: Callable[..., MainWindow], gate: threading.Event
) -> None:
    w = held_answer(qtbot, make_window, gate, at=7, shows="The **sea** is")  # in its first paragraph
    view_action(w, "Bigger text").trigger()
    size = system_points() + 1
    t = w.transcript
    live = t.plain_text()
    assert t.streaming.active and "The **sea** is" in live and "interrupted" not in live, live[-200:]
    assert t.document().find("The **sea** is").charFormat().font().pointSize() == size
    gate.set()
    text = ended(qtbot, w)
    saved = answer(w)
    assert saved.complete and saved.content.endswith(ANSWER)
    assert "interrupted" not in text and "leaves them behind." in text and text.count("TTFT") == 1
    assert t.document().find("leaves them behind.").charFormat().font().pointSize() == size
    assert text == drawn_again(w)


def test_the_settings_appearance_page_keeps_the_streaming_answer(
    qtbot: QtBot, make_window: Callable[..., MainWindow], gate: threading.Event
) -> None:
    w = held_answer(qtbot, make_window, gate, at=12, shows="Rivers bring minerals")  # in its second paragraph
    sw = _open(qtbot, w)
    sw.list.setCurrentRow(SECTIONS.index("Appearance"))
    page = sw.page("appearance")
    dark = next(r for r in page.findChildren(QRadioButton) if r.text() == "Dark")
    qtbot.mouseClick(dark, Qt.MouseButton.LeftButton, pos=QPoint(8, dark.height() // 2))
    smaller = next(b for b in page.findChildren(QPushButton) if b.text() == "Smaller")
    qtbot.mouseClick(smaller, Qt.MouseButton.LeftButton)
    assert w.settings.theme == "dark" and w.settings.transcript_font_size == system_points() - 1
    live = w.transcript.plain_text()
    assert w.transcript.streaming.active and "Rivers bring minerals" in live and "interrupted" not in live
    gate.set()
    text = ended(qtbot, w)
    assert answer(w).complete and answer(w).content.endswith(ANSWER)
    assert "The sea is salty." in text and "leaves them behind." in text and "interrupted" not in text
    assert text == drawn_again(w)


def test_a_theme_switch_keeps_a_continuation_streaming_in_place(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = start_endless_answer(qtbot, make_window)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.controller.stop()
    w.transcript.finish_rendering()
    first = answer(w)
    before = len(w.transcript.plain_text())
    w.transcript.action.emit("continue", first.id, 0)
    qtbot.waitUntil(lambda: len(w.transcript.plain_text()) > before + 100, timeout=ANSWER_TIMEOUT)
    view_action(w, "Theme").menu().actions()[1].trigger()
    live = w.transcript.plain_text()
    assert w.transcript.streaming.active and "stopped" not in live and "TTFT" not in live, live[-300:]
    grown = len(live)
    qtbot.waitUntil(lambda: len(w.transcript.plain_text()) > grown + 100, timeout=ANSWER_TIMEOUT)  # it goes on
    set_max_tokens(w, 1)  # (read at the next answer only: the stop ends this one)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.controller.stop()
    text = ended(qtbot, w)
    saved = answer(w)
    assert saved.id == first.id and saved.content.startswith(first.content) and len(saved.content) > len(first.content)
    assert text.count("TTFT") == 1 and text == drawn_again(w)
