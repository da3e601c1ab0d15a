"""The transcript's text size (View ▸ Bigger text Ctrl+=, Smaller text Ctrl+-, Normal size Ctrl+0),
saved in the settings as `transcript_font_size` (points; 0: the system's size). It sizes the
messages, streamed text and code, and the typeset formulas with them (they follow the transcript's
font)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication

from ember_chat.app.context import AppContext
from ember_chat.app.transcript.view import TranscriptView

MIN_POINTS = 6
MAX_POINTS = 40


def system_points() -> int:
    """The application font's size in points (what "Normal size" shows)."""
    size = QApplication.font().pointSizeF()
    return round(size) if size > 0 else 10


class TranscriptFontSize(QObject):
    """The transcript's text size control, built from the context (the setting) and the transcript it
    sizes. `resized` asks for the thread to be written again at the new size (formulas too): the
    composition connects it to the conversation's refresh."""

    resized = Signal()

    def __init__(self, ctx: AppContext, transcript: TranscriptView) -> None:
        super().__init__(transcript)
        self.ctx = ctx
        self.transcript = transcript
        transcript.set_font_size(ctx.settings.transcript_font_size)

    @property
    def points(self) -> int:
        """The size the transcript shows now."""
        return self.ctx.settings.transcript_font_size or system_points()

    def bigger(self) -> None:
        self._set(min(MAX_POINTS, self.points + 1))

    def smaller(self) -> None:
        self._set(max(MIN_POINTS, self.points - 1))

    def normal(self) -> None:
        self._set(0)

    def _set(self, points: int) -> None:
        if points == system_points():
            points = 0  # the system's size: it follows the system if that changes
        if points == self.ctx.settings.transcript_font_size:
            return
        self.ctx.save_settings(self.ctx.settings.with_changes(transcript_font_size=points))
        self.transcript.set_font_size(points)
        self.resized.emit()  # the thread written again at the new size (formulas too)
