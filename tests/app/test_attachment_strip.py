"""The attachment chips are a compact strip (issue 28, gaps: "chips as a compact strip"): each chip was
a large box of its own (kind, size, tokens and the whole sentence of how it is read, ~37 px tall), so
four files took four rows at 800×600 and the transcript was a sliver. Now a chip is one line — its kind
in a few letters, its name elided, its tokens (and how it is read when not whole), ✕ — with the
whole sentence in its tooltip and for a screen reader; the strip wraps onto two rows, then scrolls.
The real window, real files, the fake engine answering."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.conversation.attachment_chips import chip_words
from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.attachment_files import write_pdf
from tests.helpers.attachments_window import settle
from tests.helpers.fake_backend import FakeBackend


@pytest.fixture
def make_window(make_loaded_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window with the tiny model loaded: tests/app/conftest.py's make_loaded_window."""
    return make_loaded_window


def files(tmp_path: Path, n: int) -> list[Path]:
    out = [write_pdf(tmp_path / "Quarterly financial report for the board, final version.pdf", ["Figures. " * 60] * 3)]
    for i in range(1, n):
        path = tmp_path / f"notes from the meeting number {i}.txt"
        path.write_text("".join(f"Note {j}: feed the cat at {j}.\n" for j in range(12)), encoding="utf-8")
        out.append(path)
    return out


def test_eight_files_at_800x600_are_a_strip_of_two_rows_that_scrolls_and_the_box_keeps_three_lines(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    w.resize(800, 600)
    w.composer.attach_paths(files(tmp_path, 8))
    settle(qtbot, w)
    QApplication.processEvents()
    bar, editor = w.composer.attachments, w.composer.editor
    chips = [i.chip for i in bar.items]
    line = editor.fontMetrics().lineSpacing()
    for chip in chips:  # one line of text each, and narrow
        assert chip.height() <= editor.fontMetrics().height() + 12, chip.height()
        assert chip.width() <= 360, (chip.name_label.text(), chip.width())
    rows = sorted({chip.y() for chip in chips})
    assert len(rows) > 2  # (eight chips need more than two rows at this width…)
    assert bar.height() <= 2 * chips[0].height() + 12  # (…and two show: the rest scroll)
    assert bar.scroll.verticalScrollBar().maximum() > 0
    assert editor.height() >= 3 * line  # the message box keeps three lines of text
    assert w.centre_stack.height() >= 250  # and the transcript most of the window
    # the last chip's ✕ is reached by Tab and scrolled into view
    last = chips[-1].close_button
    editor.setFocus()
    for _ in chips:
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is last
    top_left = last.mapTo(bar.scroll.viewport(), last.rect().topLeft())
    assert top_left.y() >= 0 and top_left.y() + last.height() <= bar.scroll.viewport().height()


def test_a_chip_shows_its_kind_name_and_tokens_and_says_the_whole_sentence_on_hover(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    w.resize(1280, 800)
    w.composer.attach_paths(files(tmp_path, 2))
    settle(qtbot, w)
    pdf, txt = w.composer.attachments.items
    assert pdf.chip.kind.text() == "PDF" and txt.chip.kind.text() == "TXT"
    tokens = pdf.state.planned
    # (the fake engine has no tokenizer: the counts are estimates, marked ≈)
    assert tokens is not None and pdf.chip.details.text() == f"≈{tokens:,} tokens"  # whole: no more words
    words = chip_words(pdf.state)  # "PDF · 2 KB · ≈N tokens (estimated) · whole": the Read line's words
    assert words.startswith("PDF · ") and words.endswith(f"≈{tokens:,} tokens (estimated) · whole")
    for part in (pdf.chip, pdf.chip.name_label, pdf.chip.details):  # hover anywhere on the chip
        assert part.toolTip().splitlines()[:2] == [pdf.state.name, words]
    assert pdf.chip.accessibleDescription() == words and pdf.chip.words == words
    # the name is elided, whole in the tooltip; the bar is one row for two chips at this width
    assert pdf.chip.name_label.displayed_text().endswith("…")
    assert len({i.chip.y() for i in w.composer.attachments.items}) == 1
