"""A widget that keeps its content's re-layouts inside it (the side panel's live figures)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QWidget


class LayoutBoundary(QWidget):
    """Holds one widget and keeps its re-layouts inside it. Qt passes every layout change up to the
    window whatever it changed (each QLayout.activate ends with updateGeometry() on its widget, and a
    QTabWidget repaints itself whole on a layout request), so each new live figure in a label re-laid
    out the window and repainted the whole side panel: about 4 ms of the GUI thread, five times a
    second while an answer streams. Here a change goes further up only when the held widget's size
    hints changed."""

    def __init__(self, inner: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.inner = inner
        inner.setParent(self)
        self.setSizePolicy(inner.sizePolicy())
        self._hints = self._current_hints()

    def _current_hints(self) -> tuple[QSize, QSize, int]:
        """Its size hints, and the height it needs at its present width (rows that wrap)."""
        inner = self.inner
        height = inner.heightForWidth(self.width()) if inner.hasHeightForWidth() else -1
        return inner.sizeHint(), inner.minimumSizeHint(), height

    def hasHeightForWidth(self) -> bool:  # Qt override
        return self.inner.hasHeightForWidth()

    def heightForWidth(self, width: int) -> int:  # Qt override
        return self.inner.heightForWidth(width)

    def sizeHint(self) -> QSize:  # Qt override
        return self.inner.sizeHint()

    def minimumSizeHint(self) -> QSize:  # Qt override
        return self.inner.minimumSizeHint()

    def resizeEvent(self, event: QResizeEvent) -> None:  # Qt override
        self.inner.setGeometry(self.rect())
        super().resizeEvent(event)

    def event(self, event: QEvent) -> bool:  # Qt override
        if event.type() == QEvent.Type.LayoutRequest:  # the held widget was re-laid out
            hints = self._current_hints()
            if hints != self._hints:
                self._hints = hints
                self.updateGeometry()
            return True
        return super().event(event)
