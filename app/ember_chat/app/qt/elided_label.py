"""A one-line label that shortens its text with "…" when it has less room than the text needs,
instead of making its layout (and the window) wider; the whole text stays in text(), in its
accessible value and in its tooltip. `elided` shortens a name the same way for a place that cannot
(a group box's title, a window title, a menu entry, a placeholder): the caller keeps the whole on hover."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QWidget

from ember_chat.app.qt.plain_text import plain_tooltip

MIN_CHARS = "MMM"  # the narrowest it gets: a few characters and the ellipsis
NAME_CHARS = 32  # about how many characters of a name `elided` keeps


def elided(text: str, widget: QWidget, chars: int = NAME_CHARS) -> str:
    """`text` shortened with "…" to about `chars` average characters of `widget`'s font (a project's name
    in a title: a title never wraps, so a long one made its panel or dialog as wide as itself)."""
    metrics = widget.fontMetrics()
    return metrics.elidedText(text, Qt.TextElideMode.ElideRight, metrics.averageCharWidth() * chars)


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None, description: str = "") -> None:
        """`description`: what the label shows, added below the full text in the tooltip."""
        super().__init__(parent)
        self._description = description
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:  # Qt override (the full text; painted elided)
        super().setText(text)
        tip = "\n".join(part for part in (text, self._description) if part)
        self.setToolTip(plain_tooltip(tip))  # (a chat's title or a file's name: shown as written)

    def set_description(self, description: str) -> None:
        self._description = description
        self.setText(self.text())

    def minimumSizeHint(self) -> QSize:  # Qt override
        """The same whatever the text: a new text never changes how narrow the layout can be."""
        m = self.contentsMargins()
        narrow = self.fontMetrics().horizontalAdvance(MIN_CHARS + "…") + m.left() + m.right()
        return QSize(narrow, super().minimumSizeHint().height())

    def displayed_text(self) -> str:
        """What is painted at the label's present width."""
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, self.contentsRect().width())

    def paintEvent(self, event: QPaintEvent) -> None:  # Qt override
        QFrame.paintEvent(self, event)  # a style sheet's background and border
        painter = QPainter(self)
        self.style().drawItemText(
            painter, self.contentsRect(), int(self.alignment()), self.palette(), self.isEnabled(),
            self.displayed_text(), self.foregroundRole(),
        )  # fmt: skip
        painter.end()
