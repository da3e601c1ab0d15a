"""Sending the next message shows the thread again (the question joins it): the answer just streamed is
not written again — its look, recorded when its stream ended, is the one the thread has. Real window,
a fake engine's streamed answer with Markdown."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.app import test_tool_turns as turns
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load


def test_the_next_question_leaves_the_streamed_answer_as_it_is(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    backend = FakeBackend(script=["Some ", "**bold** ", "text ", "and `code` ", "too."])
    w = make_window(lambda _ref: backend)
    load(qtbot, w, "tiny.gguf")
    turns.send(qtbot, w, "First question")
    turns.idle(qtbot, w)
    text = turns.text_of(w)  # (the answer's rendering finished)
    assert "bold" in text
    doc = w.transcript.document()
    answer_at = doc.find("Some").position()
    end = doc.characterCount()
    changed: list[int] = []
    doc.contentsChange.connect(lambda position, _removed, _added: changed.append(position))
    turns.send(qtbot, w, "Second question")
    qtbot.waitUntil(lambda: "Second question" in w.transcript.plain_text(), timeout=turns.WAIT_MS)
    assert changed and answer_at < end - 1
    assert min(changed) >= end - 1, (min(changed), answer_at, end)  # only after the answer: it stayed
    turns.idle(qtbot, w)


def test_closing_the_window_ends_the_background_rendering(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """The chat store is closed after the window: an answer's rendering still pending then must not run
    (it reads the message's attachments from the store; CI once failed on a closed database)."""
    w = make_window(lambda _ref: FakeBackend(script=["Hello"]))
    load(qtbot, w, "tiny.gguf")
    ran: list[int] = []

    def steps() -> Iterator[None]:
        ran.append(1)
        yield

    w.transcript.slices.render(steps())
    w.close()
    w.store.close()
    qtbot.wait(50)  # the event loop runs: the slicer's timer had been started
    assert ran == []
