"""What a finished answer looks like (issue 16, items 5 and 6): single newlines stay line breaks once
the Markdown renders (a poem, an address), code and tables unchanged, and the card does not jump in
height at the end of streaming; Continue is offered after Stop and after the max-tokens limit."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.transcript.view import TranscriptView
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import ANSWER_TIMEOUT, load, send, set_max_tokens, start_endless_answer

POEM = [
    "Roses are **red,**\n",
    "violets are *blue,*\n",
    "sugar is sweet\n",
    "and so are you.\n",
    "\n",
    "Second stanza, one line\n",
    "and its last line.",
]


def _lines_of(t: TranscriptView, needle: str) -> tuple[int, int]:
    """(paragraph number, visual line count) of the paragraph holding `needle`."""
    c = t.document().find(needle)
    assert not c.isNull(), needle
    return c.blockNumber(), c.block().layout().lineCount()


def _body_height(t: TranscriptView, first: str, last: str) -> float:
    """From the top of the paragraph holding `first` to the bottom of the one holding `last`."""
    layout = t.document().documentLayout()
    top = layout.blockBoundingRect(t.document().find(first).block()).top()
    return layout.blockBoundingRect(t.document().find(last).block()).bottom() - top


def _y_of(t: TranscriptView, needle: str) -> float:
    """The document y of the line that holds `needle`."""
    c = t.document().find(needle)
    c.setPosition(c.selectionStart())
    block = c.block()
    line = block.layout().lineForTextPosition(c.position() - block.position())
    return t.document().documentLayout().blockBoundingRect(block).top() + line.y()


def test_single_newlines_stay_line_breaks_and_the_card_keeps_its_height(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window(lambda _ref: FakeBackend(script=POEM, rate=200))
    load(qtbot, w, "tiny.gguf")
    t = w.transcript
    before: dict[str, float] = {}

    def at_end_of_stream(on: bool) -> bool:
        if not on:  # the answer is complete; its plain streamed text is still what shows
            before["height"] = _body_height(t, "Roses are", "its last line")
            before["lines"] = [_y_of(t, s) for s in ("Roses", "violets", "sugar", "and so", "Second", "and its")]
        return not on

    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=at_end_of_stream, timeout=ANSWER_TIMEOUT):
        w.composer.editor.setPlainText("a poem, please")
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not t.rendering, timeout=ANSWER_TIMEOUT)
    text = t.plain_text()
    assert "**" not in text and "red," in text  # rendered Markdown
    # Each source line is a line of its own, in one paragraph per stanza, bold and italic kept.
    para, lines = _lines_of(t, "Roses are")
    assert lines == 4 and _lines_of(t, "and so are you")[0] == para
    assert _lines_of(t, "Second stanza")[1] == 2
    bold = t.document().find("red,")
    assert bold.charFormat().fontWeight() >= 600
    assert t.document().find("blue,").charFormat().fontItalic()
    # The card does not jump: each line stays where it streamed, within a few pixels.
    after = [_y_of(t, s) for s in ("Roses", "violets", "sugar", "and so", "Second", "and its")]
    assert all(abs(a - b) <= 3 for a, b in zip(after, before["lines"], strict=True)), (before["lines"], after)
    assert abs(_body_height(t, "Roses are", "its last line") - before["height"]) <= 3


def test_line_breaks_leave_lists_tables_headings_and_code_as_they_were(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    answer = (
        "# A heading\n"
        "Under the heading, **bold.**\n"
        "Next line\n"
        "- item one\n"
        "  continued\n"
        "- item two\n"
        "\n"
        "| alpha | beta |\n"
        "|---|---|\n"
        "| gamma | delta |\n"
        "\n"
        "Title\n"
        "=====\n"
        "\n"
        "```python\n"
        "x = 1\n"
        "y = 2\n"
        "```\n"
        "Ends with a `code\nspan` and a hard break\\\n"
        "here."
    )
    conv = w.store.create_conversation("shapes")
    q = w.store.add_message(conv.id, "user", "shapes")
    w.store.add_message(conv.id, "assistant", answer, parent_id=q.id)
    w.chats.open_conversation(conv.id)
    t = w.transcript
    doc = t.document()
    text = t.plain_text()
    assert "\u2042" not in text and "**" not in text and "\\" not in text and "=====" not in text
    heading = doc.find("A heading").block()
    assert heading.text() == "A heading" and doc.find("A heading").charFormat().fontWeight() >= 600
    assert doc.find("Title").block().blockFormat().headingLevel() == 1
    under = doc.find("Under the heading").block()
    assert under.text() == "Under the heading, bold.\u2028Next line"
    assert doc.find("bold.").charFormat().fontWeight() >= 600
    item = doc.find("item one").block()
    assert item.textList() is not None and item.text() == "item one\u2028continued"
    assert doc.find("item two").block().textList() is item.textList()
    cell = QTextCursor(doc.find("gamma"))
    assert cell.currentTable() is not None and cell.currentTable().columns() == 2
    assert cell.block().text() == "gamma"
    assert "x = 1\ny = 2" in text.replace("\u2029", "\n")
    span = doc.find("code span")
    assert not span.isNull() and span.charFormat().fontFixedPitch()  # a code span's newline is a space
    assert doc.find("hard break").block().text().endswith("hard break\u2028here.")


def _continue(qtbot: QtBot, w: MainWindow, answer_id: int) -> None:
    """Run the answer's Continue link and wait for the continued answer to be shown."""
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.transcript.action.emit("continue", answer_id, 0)
    qtbot.waitUntil(lambda: not w.transcript.rendering, timeout=ANSWER_TIMEOUT)


def test_continue_is_offered_after_the_max_tokens_limit_and_continues_the_same_answer(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    fake = FakeBackend(n_tokens=100)
    w = make_window(lambda _ref: fake)
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 6)
    send(qtbot, w, "go on")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.metrics["stop_reason"] == "length"
    continue_link = (f"ember:continue/{answer.id}", "Continue this answer where it stopped")
    assert continue_link in w.transcript.links()
    first = answer.content
    _continue(qtbot, w, answer.id)
    thread = w.store.thread(w.controller.conversation_id)
    assert len(thread) == 2 and thread[-1].id == answer.id  # the same answer, continued
    assert thread[-1].content.startswith(first) and len(thread[-1].content) > len(first)
    assert fake.requests[-1][-1].role == "assistant" and fake.requests[-1][-1].content == first
    assert continue_link in w.transcript.links()  # the limit was reached again: still offered


def test_continue_is_offered_after_stop_and_not_after_a_finished_answer(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = start_endless_answer(qtbot, make_window)
    with qtbot.waitSignal(w.controller.generating_changed, timeout=ANSWER_TIMEOUT):
        w.controller.stop()
    qtbot.waitUntil(lambda: not w.transcript.rendering, timeout=ANSWER_TIMEOUT)
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.metrics["stop_reason"] == "cancelled"
    assert (f"ember:continue/{answer.id}", "Continue this answer where it stopped") in w.transcript.links()
    # an answer the model ended itself has no Continue
    w2 = make_window(lambda _ref: FakeBackend(script=["Done", "."]))
    load(qtbot, w2, "tiny.gguf")
    send(qtbot, w2, "short")
    done = w2.store.thread(w2.controller.conversation_id)[-1]
    assert done.metrics["stop_reason"] == "stop"
    assert not any(href.startswith("ember:continue/") for href, _tip in w2.transcript.links())


def test_adding_continue_does_not_lay_out_the_whole_answer_again(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Continue goes into the answer's header when the rendering ends. The rendering's steps are edit
    blocks, each laid out once at its end over the range it changed: a step that changed the header and
    the text below it would lay out the whole answer again (29 ms for a 20,000-token answer, the
    longest stall of a long chat). No change to the header may reach into the answer's text."""
    w = make_window(lambda _ref: FakeBackend(n_tokens=3000, rate=0))
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 3000)
    changes: list[tuple[int, int]] = []  # the document's changes while the finished answer renders

    def record(at: int, _removed: int, added: int) -> None:
        changes.append((at, added))

    w.controller.stream_ended.connect(lambda *_: w.transcript.document().contentsChange.connect(record))
    send(qtbot, w, "go on")
    qtbot.waitUntil(lambda: not w.transcript.rendering, timeout=ANSWER_TIMEOUT)
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.metrics["stop_reason"] == "length"
    assert (f"ember:continue/{answer.id}", "Continue this answer where it stopped") in w.transcript.links()
    shown = w.transcript.last_shown(answer.id)
    assert shown is not None
    header = shown.start.block()
    header_end = header.position() + header.length()
    touching = [(at, added) for at, added in changes if header.position() <= at < header_end]
    assert touching  # the Continue icon went in
    assert all(at + added <= header_end for at, added in touching), (touching, header_end)
