"""A layout that places its items left to right and wraps them onto the next line when the width runs
out (the attachment chips above the message box: a small window shows them on two lines instead of
cutting them off)."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QWidget


class FlowLayout(QLayout):
    def __init__(self, parent: QWidget | None = None, spacing: int = 6) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:  # Qt override
        self._items.append(item)

    def count(self) -> int:  # Qt override
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # Qt override
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # Qt override
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:  # Qt override
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # Qt override
        return True

    def heightForWidth(self, width: int) -> int:  # Qt override
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:  # Qt override
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:  # Qt override
        return self.minimumSize()

    def minimumSize(self) -> QSize:  # Qt override
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        m: QMargins = self.contentsMargins()
        return size + QSize(m.left() + m.right(), m.top() + m.bottom())

    def _place(self, rect: QRect, move: bool) -> int:
        """Lay the items out in rows within `rect` (moving them when `move`); the height they take."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        x, y, row_height = area.x(), area.y(), 0
        for item in self._items:
            if item.isEmpty():
                continue
            hint = item.sizeHint()
            width = min(hint.width(), max(area.width(), 1))  # a chip wider than the row is narrowed
            if x > area.x() and x + width > area.right() + 1:
                x, y = area.x(), y + row_height + self._spacing
                row_height = 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), QSize(width, hint.height())))
            x += width + self._spacing
            row_height = max(row_height, hint.height())
        return y + row_height - rect.y() + m.bottom()
