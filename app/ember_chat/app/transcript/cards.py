"""The cards behind the transcript's messages: each message is drawn on a rounded card, painted behind
its text, so cards cost no layout. `TranscriptCards` is a part of TranscriptView (`view.cards`),
which it reads through `CardsHost` (what it uses of the view): it finds where each shown message's
text is (asking the layout only about the few it needs) and paints the cards in a strip of the
viewport, with colours made once per set of colours."""

from __future__ import annotations

import bisect
from typing import Protocol, runtime_checkable

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QAbstractTextDocumentLayout, QColor, QPainter, QPaintEvent, QTextDocument
from PySide6.QtWidgets import QScrollBar, QWidget

from ember_chat.app.style.theme import Colors
from ember_chat.app.transcript.render.message import MessageWriter
from ember_chat.app.transcript.shown import Shown

CARD_PAD_X = 14
CARD_PAD_Y = 10
CARD_RADIUS = 10


@runtime_checkable
class CardsHost(Protocol):
    """What the cards use of the transcript they are painted in (TranscriptView meets it)."""

    @property
    def writer(self) -> MessageWriter: ...  # its colours
    def document(self) -> QTextDocument: ...
    def viewport(self) -> QWidget: ...
    def verticalScrollBar(self) -> QScrollBar: ...
    def horizontalScrollBar(self) -> QScrollBar: ...
    def side_margin(self) -> float: ...


class TranscriptCards:
    def __init__(self, view: CardsHost) -> None:
        self.view = view
        self._colours_for: Colors | None = None
        self._colours: dict[bool, tuple[QColor | None, QColor]] = {}

    def paint(self, event: QPaintEvent, shown: list[Shown]) -> None:
        """Cards behind the messages on screen (before the view paints the text over them). While an
        answer streams this runs for every batch, over the few lines that changed: it asks the layout
        only about the cards in that strip, once each, and draws only the part of a card that can
        show in it."""
        view = self.view
        area = event.rect()
        doc = view.document()
        layout = doc.documentLayout()
        dy = view.verticalScrollBar().value()
        top, bottom = dy + area.top(), dy + area.bottom()
        tops = _LazyTops(shown, layout)
        first = _index_in(tops, top)
        if first > 0 and top < tops[first]:
            first -= 1  # (the strip starts above this card's text: the card above may reach into it)
        painter = QPainter(view.viewport())
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        margin = view.side_margin()
        left = margin - CARD_PAD_X - view.horizontalScrollBar().value()
        width = doc.textWidth() - 2 * margin + 2 * CARD_PAD_X
        colours = self._card_colours()
        painter.setPen(Qt.PenStyle.NoPen)
        # A card taller than the strip is cut a corner's height beyond it: what shows is the same,
        # and the painter has a short shape to fill and stroke, not a message's whole height.
        clip_top, clip_bottom = area.top() - CARD_RADIUS - 2, area.bottom() + CARD_RADIUS + 2
        for i in range(first, len(shown)):
            y0 = tops[i]
            if y0 > bottom:
                break
            y1 = self._bottom_of(shown, i, layout)
            if y1 < top:
                continue
            edge, fill = colours[shown[i].role == "user"]
            card_top = max(y0 - CARD_PAD_Y - dy, clip_top)
            card_bottom = min(y1 + CARD_PAD_Y - dy, clip_bottom)
            rect = QRectF(left, card_top, width, card_bottom - card_top)
            # The one-pixel edge is the card filled in its colour, then the inside a pixel in, filled
            # in the card's: what a pen would stroke, at a twentieth of the cost (an antialiased pen's
            # stroke took 0.3-0.4 ms whatever the card's size, at every streamed batch).
            if edge is not None:
                painter.setBrush(edge)
                painter.drawRoundedRect(rect, CARD_RADIUS + 0.5, CARD_RADIUS + 0.5)
                rect.adjust(1, 1, -1, -1)
                painter.setBrush(fill)
                painter.drawRoundedRect(rect, CARD_RADIUS - 0.5, CARD_RADIUS - 0.5)
            else:
                painter.setBrush(fill)
                painter.drawRoundedRect(rect.adjusted(0.5, 0.5, -0.5, -0.5), CARD_RADIUS, CARD_RADIUS)
        painter.end()

    def _card_colours(self) -> dict[bool, tuple[QColor | None, QColor]]:
        """Edge (None: none) and fill of a card, by 'is the user's', for the current colours (made once)."""
        c = self.view.writer.colors
        if self._colours_for is not c:
            self._colours = {
                False: (QColor(c.border), QColor(c.assistant_card)),
                True: (None, QColor(c.user_card)),
            }
            self._colours_for = c
        return self._colours

    def extent(self, shown: list[Shown], i: int) -> tuple[float, float]:
        """Top and bottom (document coordinates) of message i's text."""
        layout = self.view.document().documentLayout()
        return _LazyTops(shown, layout)[i], self._bottom_of(shown, i, layout)

    def _bottom_of(self, shown: list[Shown], i: int, layout: QAbstractTextDocumentLayout) -> float:
        following = shown[i + 1].start.block() if i + 1 < len(shown) else None
        last = following.previous() if following is not None else self.view.document().lastBlock()
        return layout.blockBoundingRect(last).bottom()

    def index_at(self, shown: list[Shown], y: float) -> int:
        """The last message whose text starts at or above y (document coordinates)."""
        return _index_in(_LazyTops(shown, self.view.document().documentLayout()), y)


def _index_in(tops: _LazyTops, y: float) -> int:
    """The last message whose text starts at or above y."""
    if tops[len(tops) - 1] <= y:  # below the top of the last message: a streaming answer's paint
        return len(tops) - 1
    return max(0, bisect.bisect_right(tops, y) - 1)


class _LazyTops:
    """The shown messages' text top y (below the header's top margin), computed only for the few
    entries a binary search or a paint looks at, each once."""

    def __init__(self, shown: list[Shown], layout: QAbstractTextDocumentLayout) -> None:
        self.shown = shown
        self.layout = layout
        self._known: dict[int, float] = {}

    def __len__(self) -> int:
        return len(self.shown)

    def __getitem__(self, i: int) -> float:
        top = self._known.get(i)
        if top is None:
            top = self._known[i] = self.layout.blockBoundingRect(self.shown[i].start.block()).top()
        return top
