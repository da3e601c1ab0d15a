"""The transcript's parts, each with its own state: `streaming` (the answer being streamed) and `focus`
(where a Tab walk starts, the focus ring). A bare view is enough to test them, with no window, engine
or model."""

from __future__ import annotations

import ast

from PySide6.QtCore import Qt
from PySide6.QtGui import QFocusEvent
from PySide6.QtWidgets import QApplication, QTextBrowser
from pytestqt.qtbot import QtBot

from ember_chat.app.style.theme import active_colors
from ember_chat.app.transcript.attachments import AttachmentsHost
from ember_chat.app.transcript.cards import CardsHost
from ember_chat.app.transcript.focus import TranscriptFocus
from ember_chat.app.transcript.stream import StreamHost
from ember_chat.app.transcript.tool_cards import ToolCardsHost
from ember_chat.app.transcript.view import TranscriptView
from tests.helpers.paths import REPO


def bare_view(qtbot: QtBot) -> TranscriptView:
    t = TranscriptView(active_colors())
    qtbot.addWidget(t)
    t.resize(700, 500)
    t.show()
    QApplication.processEvents()
    return t


def test_a_batch_goes_straight_to_the_streaming_part(qtbot: QtBot) -> None:
    t = bare_view(qtbot)
    assert t.append_stream == t.streaming.append  # (the per-batch path: no call in between)
    assert not t.streaming.active
    t.append_stream("ignored")  # no answer streams: nothing is written
    assert "ignored" not in t.plain_text()


def test_the_streaming_part_owns_the_stream_from_begin_to_end(qtbot: QtBot) -> None:
    t = bare_view(qtbot)
    t.begin_stream(7, "tiny")
    assert t.streaming.active and t.shown_ids() == [7]
    t.append_stream("<think>weighing it</think>The answer")
    assert "The answer" in t.plain_text() and "Thinking" in t.plain_text()
    rendered: list[bool] = []
    t.rendered.connect(lambda: rendered.append(True))
    t.end_stream("The **answer**", "3 tokens", "stop")
    assert not t.streaming.active and t.rendering  # the rendering runs on the view's slicer
    t.finish_rendering()
    assert rendered == [True] and not t.rendering
    assert t.streaming.end("again", None) is None  # ended once: nothing more to render
    t.end_stream("again", None)
    assert not t.rendering


def test_showing_a_thread_drops_the_stream(qtbot: QtBot) -> None:
    t = bare_view(qtbot)
    t.begin_stream(7)
    t.show_thread([], {})
    assert not t.streaming.active
    t.append_stream("late batch")
    assert "late batch" not in t.plain_text()


def _stream_a_bit_of_everything(t: TranscriptView) -> None:
    t.begin_stream(7, "tiny", began_at=0.0)
    t.streaming.show_prefill(5, 10)
    t.append_stream("<think>weighing it</think>The answer")
    t.streaming.show_call(0, "clock", '{"zo', done=False)
    t.streaming.show_call(0, "clock", '{"zone": "UTC"}', done=True)
    t.append_stream(" and more")
    t.streaming.show_call(1, "git", '{"pa', done=False)
    t.streaming.show_call(1, "git", '{"path": "."', done=False)
    t.streaming.show_prefill(3, 10)


def test_a_dropped_stream_is_drawn_again_as_it_was_and_goes_on(qtbot: QtBot) -> None:
    """A re-written transcript (a theme or text size change) draws the live answer again from its record:
    its thinking, text, a call being written (its last state only) and the prompt's progress, in order;
    the next batches go on as if nothing had happened."""
    t, untouched = bare_view(qtbot), bare_view(qtbot)
    for view in (t, untouched):
        _stream_a_bit_of_everything(view)
    before = t.plain_text()
    assert "Writing a call to git" in before and "Reading your message… 30%" in before
    t.set_colors(active_colors())  # emptied
    assert not t.streaming.active and t.plain_text() == ""
    assert t.streaming.kept(8) is None  # (another message: not this stream)
    t.rejoin_stream(7)
    assert t.streaming.active and t.plain_text() == before and t.shown_ids() == [7]
    for view in (t, untouched):
        view.append_stream(" then the end")
    assert t.plain_text() == untouched.plain_text() and "Writing a call" not in t.plain_text()
    t.end_stream("The answer and more then the end", None, "stop")
    t.finish_rendering()
    assert t.streaming.record is None and t.streaming.kept(7) is None  # ended: nothing left to draw again


def test_the_focus_part_works_on_any_text_browser(qtbot: QtBot) -> None:
    browser = QTextBrowser()
    qtbot.addWidget(browser)
    focus = TranscriptFocus(browser)
    assert not focus.ring_shown
    focus.focus_in(QFocusEvent(QFocusEvent.Type.FocusIn, Qt.FocusReason.MouseFocusReason))
    assert not focus.ring_shown  # a click shows no ring
    focus.focus_in(QFocusEvent(QFocusEvent.Type.FocusIn, Qt.FocusReason.TabFocusReason))
    assert focus.ring_shown
    focus.focus_out()
    assert not focus.ring_shown


def test_the_view_hands_its_focus_events_to_the_focus_part(qtbot: QtBot) -> None:
    t = bare_view(qtbot)
    QApplication.sendEvent(t, QFocusEvent(QFocusEvent.Type.FocusIn, Qt.FocusReason.TabFocusReason))
    assert t.focus.ring_shown
    QApplication.sendEvent(t, QFocusEvent(QFocusEvent.Type.FocusOut, Qt.FocusReason.TabFocusReason))
    assert not t.focus.ring_shown


def test_the_parts_read_the_view_through_what_they_use_of_it(qtbot: QtBot) -> None:
    """Each part takes a Protocol of what it uses of the view (or the bare text browser), never
    TranscriptView: the view builds them, so an import of view.py from a part is a cycle (issue 29);
    the view meets every one of them."""
    t = bare_view(qtbot)
    for host in (AttachmentsHost, CardsHost, StreamHost, ToolCardsHost):
        assert isinstance(t, host), host.__name__
    folder = REPO / "app" / "ember_chat" / "app" / "transcript"
    importing_the_view = [
        path.name
        for path in folder.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "ember_chat.app.transcript.view"
    ]
    assert importing_the_view == ["font_size.py"]  # (built by the composition from the view, not by it)
