"""A PDF made by LaTeX keeps its maths (issue 28): tests/documents/latex_maths.pdf, whose Computer Modern
fonts are CFF programs with only their built-in encoding and no ToUnicode map (tests/documents/README.md).
pypdf reads such an encoding with fontTools; without it the text was `max(jx1 \\x00 x2j; kxk) \\x14 \\x0f`
(the glyphs' codes read as Latin letters and control characters) and pypdf warned once per font and page."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments import read_attachment
from tests.helpers.paths import TESTS

LATEX_PDF = TESTS / "documents" / "latex_maths.pdf"
# latex_maths.tex's two sentences as pypdf lays them out: subscripts and limits follow on the line
MATHS = (
    "The distance is max(|x1 − x2|, ‖x‖) ≤ ϵ.",
    "The sum ∑n i=1 αi √yi < ∞ holds for β ≥ 0.",
)
WAIT_MS = 60_000


def test_the_maths_of_a_latex_pdf_comes_through_its_symbols_whole() -> None:
    text = read_attachment(LATEX_PDF).text
    assert text.splitlines() == list(MATHS)


def test_the_big_operators_of_a_pdflatex_pdf_read_as_the_letters_of_their_codes() -> None:
    """A known limit, pinned: pdfLaTeX's ToUnicode map for CMEX10 leaves out ∑, ∏ and ∫ (its glyph list
    has no `summationtext`, `producttext`, `integraltext`), and pypdf reads a code the map leaves out
    as a Latin letter, not through the font's own encoding (tests/documents/README.md, README's Attach)."""
    text = read_attachment(TESTS / "documents" / "pdflatex_operators.pdf").text
    assert text == "P Q R"  # for ∑ ∏ ∫


def test_a_latex_pdf_attached_in_the_window_keeps_its_maths_and_logs_no_font_warning(
    qtbot: QtBot, make_window: Callable[..., MainWindow], caplog: pytest.LogCaptureFixture
) -> None:
    """The window reads the file in a child process (engine/attachments/isolated.py): the same text,
    and no "fontTools is required…" line in Ember's log."""
    caplog.set_level(logging.INFO)
    w = make_window()
    w.composer.attach_paths([LATEX_PDF])
    bar = w.composer.attachments
    qtbot.waitUntil(lambda: bool(bar.items) and not bar.busy, timeout=WAIT_MS)
    extracted = bar.items[0].extracted
    assert extracted is not None and extracted.text.splitlines() == list(MATHS)
    assert not [r for r in caplog.records if "latex_maths.pdf" in r.getMessage()]
