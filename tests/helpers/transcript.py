"""Reading the window's transcript: its anchors and clicks on them, what it shows, its formulas and accent."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QImage, QTextBlock, QTextCursor, QTextImageFormat
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.transcript.render.math_write import MATH_SOURCE
from ember_chat.app.transcript.view import TranscriptView


@dataclass
class Anchor:
    position: int
    href: str
    text: str
    image: bool


def anchors(t: TranscriptView) -> list[Anchor]:
    out = []
    block = t.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            fmt = frag.charFormat()
            if fmt.isAnchor() and fmt.anchorHref():
                out.append(Anchor(frag.position(), fmt.anchorHref(), frag.text(), fmt.isImageFormat()))
            it += 1
        block = block.next()
    return out


def click(qtbot: QtBot, t: TranscriptView, anchor: Anchor) -> None:
    """A real left click on the anchor's first character (the middle of an icon)."""
    c = QTextCursor(t.document())
    c.setPosition(anchor.position)
    rect = t.cursorRect(c)
    t.verticalScrollBar().setValue(t.verticalScrollBar().value() + rect.top() - t.viewport().height() // 2)
    rect = t.cursorRect(c)
    point = QPoint(rect.left() + (8 if anchor.image else 3), rect.center().y())
    assert t.anchorAt(point) == anchor.href  # the click lands on this link
    qtbot.mouseClick(t.viewport(), Qt.MouseButton.LeftButton, pos=point)


def shown_transcript(w: MainWindow) -> TranscriptView:
    """The transcript on screen (with no model loaded the window shows its welcome panel instead,
    and a hidden document is not laid out), at 1280x800: wide enough that a streamed paragraph does
    not reach the scroll bar (a scroll bar that comes changes the text width, and the split lines are
    joined again, by design)."""
    w.resize(1280, 800)
    w.centre_stack.setCurrentWidget(w.transcript)
    QApplication.processEvents()
    return w.transcript


def accent_pixels(image: QImage, accent: QColor) -> int:
    """Pixels within a few levels of the accent colour (antialiased edges left out)."""
    near = 0
    for y in range(image.height()):
        for x in range(image.width()):
            c = image.pixelColor(x, y)
            if abs(c.red() - accent.red()) + abs(c.green() - accent.green()) + abs(c.blue() - accent.blue()) <= 24:
                near += 1
    return near


ANSWER = (
    "The roots of $ax^2 + bx + c = 0$ are\n\n"
    "$$x = \\frac{-b \\pm \\sqrt{b^2 - 4ac}}{2a}$$\n\n"
    "and \\(\\alpha_1 \\in \\mathbb{R}\\). It costs $5 and $10. Code: `$not math$`."
)


def formulas(t: TranscriptView) -> list[tuple[str, QTextImageFormat]]:
    """The typeset formulas in the transcript: source and image format, in order."""
    return [(source, fmt) for source, fmt, _ in placed(t)]


def placed(t: TranscriptView) -> list[tuple[str, QTextImageFormat, QTextBlock]]:
    """The typeset formulas with their paragraphs."""
    out = []
    block = t.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isImageFormat() and fmt.toImageFormat().name().startswith("math:"):
                out.append((fmt.property(MATH_SOURCE), fmt.toImageFormat(), block))
            it += 1
        block = block.next()
    return out


def open_chat(qtbot: QtBot, w: MainWindow, answer: str = ANSWER) -> TranscriptView:
    cid = w.store.create_conversation("Maths").id
    q = w.store.add_message(cid, "user", "What are the roots? $x$ here stays as typed.")
    w.store.add_message(cid, "assistant", answer, parent_id=q.id)
    t = shown_transcript(w)
    w.controller.open_conversation(cid)
    t.finish_rendering()
    typeset(qtbot, t)
    return t


def typeset(qtbot: QtBot, t: TranscriptView) -> None:
    """Wait for the formulas of what was written at once (they are typeset afterwards)."""
    qtbot.waitUntil(lambda: t.writer.math.pending == 0, timeout=10_000)
