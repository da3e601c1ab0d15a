"""A streaming answer in the transcript costs a line, not a paragraph, per batch: the lines of the
paragraph being appended to are split off where Qt wrapped them, so a batch lays out and repaints
only the last, unfinished line (and the one it starts). Nothing on screen shows it, and a new width joins them again."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QImage, QTextCursor
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.transcript.stream import CUT_STATE
from ember_chat.app.transcript.view import TranscriptView
from tests.helpers.transcript import shown_transcript

PARAGRAPH = " ".join(f"The keeper climbed the {i}th stair and the light turned slowly over the sea." for i in range(40))


def stream(t: TranscriptView, text: str, piece: int = 9) -> None:
    t.begin_stream(10_000, "model")
    for i in range(0, len(text), piece):
        t.append_stream(text[i : i + piece])
        QApplication.processEvents()


def streamed_blocks(t: TranscriptView) -> list[tuple[str, int]]:
    """The stream's paragraphs: text and user state."""
    assert t.streaming._stream is not None
    block = t.streaming._stream[1].block()
    out = []
    while block.isValid():
        out.append((block.text(), block.userState()))
        block = block.next()
    return out


def viewport_image(t: TranscriptView) -> QImage:
    return t.viewport().grab().toImage()


def test_each_batch_is_appended_to_a_one_line_paragraph(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    t = shown_transcript(w)
    t.begin_stream(10_000, "model")
    for i in range(0, len(PARAGRAPH), 9):
        t.append_stream(PARAGRAPH[i : i + 9])
        # what the next batch lays out again: the last line, and the line this batch started if it wrapped
        assert t.document().lastBlock().layout().lineCount() <= 2
    blocks = streamed_blocks(t)
    assert len(blocks) > 10  # the paragraph wraps on many lines: each was split off
    assert all(state == CUT_STATE for _text, state in blocks[:-1]) and blocks[-1][1] != CUT_STATE
    assert "".join(text for text, _state in blocks) == PARAGRAPH  # split where Qt wrapped, nothing lost


def test_the_split_paragraph_looks_the_same_as_one_paragraph(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    t = shown_transcript(w)
    text = PARAGRAPH[:1500] + "\n\n" + PARAGRAPH[:700]
    stream(t, text)
    assert len(streamed_blocks(t)) > 5
    split = viewport_image(t)
    t.show_thread([], {})
    t.begin_stream(10_000, "model")
    c = QTextCursor(t.document())
    c.movePosition(QTextCursor.MoveOperation.End)
    c.insertText(text)  # the same text as whole paragraphs
    assert len(streamed_blocks(t)) == 3
    QApplication.processEvents()
    assert viewport_image(t) == split


def test_a_new_width_joins_the_split_lines(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    t = shown_transcript(w)
    stream(t, PARAGRAPH[:2000])
    assert len(streamed_blocks(t)) > 5
    w.resize(w.width() - 200, w.height())
    QApplication.processEvents()
    blocks = streamed_blocks(t)
    assert blocks == [(PARAGRAPH[:2000], -1)]  # one paragraph again, wrapped at the new width
    t.append_stream(" And on.")  # the next batch splits it anew
    assert t.document().lastBlock().layout().lineCount() <= 2
    assert "".join(text for text, _ in streamed_blocks(t)) == PARAGRAPH[:2000] + " And on."
    c = QTextCursor(t.document())
    c.movePosition(QTextCursor.MoveOperation.End)
    assert c.block().userState() != CUT_STATE
