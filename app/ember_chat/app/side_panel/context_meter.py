"""The side panel's context row: how much of the model's context the chat uses, as a number over a slim
bar. The number was drawn inside a QProgressBar, where the fill ran through it: Fusion paints the part
of each glyph over the fill in another colour, so at some ratios a figure was half one colour, half the
other ("1,0|00"), and over the dark theme's lighter fill gradient the white text fell short of AA
contrast. Beside the fill, never over it, the number is ordinary text in the window's colours at every
ratio and in both themes."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QVBoxLayout, QWidget

BAR_HEIGHT_FRACTION = 0.4  # the bar's height, of a line of text: a meter under the number, not a field


class ContextMeter(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.label = QLabel()
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(max(4, round(self.fontMetrics().height() * BAR_HEIGHT_FRACTION)))
        layout.addWidget(self.label)
        layout.addWidget(self.bar)

    def text(self) -> str:
        return self.label.text()

    def maximum(self) -> int:
        return self.bar.maximum()

    def value(self) -> int:
        return self.bar.value()

    def show_text(self, text: str) -> None:
        """No figures (before the first answer): the text, and an empty bar."""
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self._say(text)

    def show_used(self, used: int, n_ctx: int, text: str) -> None:
        """`used` of `n_ctx` tokens, in `text`. The bar's range is set only when it changes (each
        change repaints the bar at once)."""
        if self.bar.maximum() != n_ctx:
            self.bar.setRange(0, n_ctx)
        self.bar.setValue(min(used, n_ctx))
        self._say(text)

    def reserve(self, widest: str) -> None:
        """Room for `widest` on one line, so the panel does not re-lay out as the number grows."""
        self.label.setMinimumWidth(self.label.fontMetrics().horizontalAdvance(widest))

    def _say(self, text: str) -> None:
        self.label.setText(text)
        self.bar.setAccessibleDescription(text)  # (a screen reader reads the bar with its figures)
