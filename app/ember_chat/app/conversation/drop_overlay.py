"""What the chat area shows while files are dragged over the window: "Drop files to attach" and the
kinds Ember reads, over the transcript, so it is clear before letting go that a drop attaches (and
does not, say, open the file). Shown and hidden by `FileDrops` (attachments_bar.py); drawn in the
palette's colours (the theme's), and transparent to the mouse, so the drag goes on to the widgets
under it as before."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

MARGIN = 12  # between the chat area's edge and the dashed frame


class DropOverlay(QWidget):
    """Covers `area` (the chat area) while shown; follows its size."""

    def __init__(self, area: QWidget) -> None:
        super().__init__(area)
        self.setObjectName("dropOverlay")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)  # (drags reach what is under it)
        self.title = QLabel(self.tr("Drop files to attach"))
        self.title.setObjectName("dropOverlayTitle")
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.4)
        font.setBold(True)
        self.title.setFont(font)
        self.kinds = QLabel(  # (what the readers read: engine attachments/extract.py)
            self.tr("Text, Markdown, source code, CSV, JSON, HTML, PDF, DOCX and images (PNG, JPEG, WebP, GIF)")
        )
        self.kinds.setWordWrap(True)
        self.setAccessibleName(self.title.text())
        self.setAccessibleDescription(self.kinds.text())
        column = QVBoxLayout(self)
        column.setContentsMargins(3 * MARGIN, 3 * MARGIN, 3 * MARGIN, 3 * MARGIN)
        column.addStretch(1)
        for label in (self.title, self.kinds):
            label.setAlignment(Qt.AlignmentFlag.AlignCenter)
            column.addWidget(label)
        column.addStretch(1)
        self.hide()
        area.installEventFilter(self)

    def show_over(self) -> None:
        self.setGeometry(self.parentWidget().rect())
        self.raise_()
        self.show()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if event.type() == QEvent.Type.Resize and self.isVisible():
            self.setGeometry(self.parentWidget().rect())
        return False

    def paintEvent(self, event: QPaintEvent) -> None:  # Qt override
        palette = self.palette()
        accent = palette.color(QPalette.ColorRole.Accent)
        veil = palette.color(QPalette.ColorRole.Base)  # (opaque: the chat's text under it would mix with its own)
        tint = QColor(accent)
        tint.setAlpha(28)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), veil)
        frame = QRectF(self.rect()).adjusted(MARGIN, MARGIN, -MARGIN, -MARGIN)
        pen = QPen(accent, 2, Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.setBrush(tint)
        painter.drawRoundedRect(frame, 12, 12)
        painter.end()
