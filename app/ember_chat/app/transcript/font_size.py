"""The transcript's text size (View ▸ Bigger text Ctrl+=, Smaller text Ctrl+-, Normal size Ctrl+0),
saved in the settings as `transcript_font_size` (points; 0: the system's size). It sizes the
messages, streamed text and code, and the typeset formulas with them (they follow the transcript's
font)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QApplication

MIN_POINTS = 6
MAX_POINTS = 40


def system_points() -> int:
    """The application font's size in points (what "Normal size" shows)."""
    size = QApplication.font().pointSizeF()
    return round(size) if size > 0 else 10


class TranscriptFontSize:
    """The window's text size control: `window` has `settings`, `settings_file`, `transcript` and
    `controller` (the last only by the time an action runs)."""

    def __init__(self, window: Any) -> None:
        self.window = window
        window.transcript.set_font_size(window.settings.transcript_font_size)

    @property
    def points(self) -> int:
        """The size the transcript shows now."""
        return self.window.settings.transcript_font_size or system_points()

    def bigger(self) -> None:
        self._set(min(MAX_POINTS, self.points + 1))

    def smaller(self) -> None:
        self._set(max(MIN_POINTS, self.points - 1))

    def normal(self) -> None:
        self._set(0)

    def _set(self, points: int) -> None:
        if points == system_points():
            points = 0  # the system's size: it follows the system if that changes
        w = self.window
        if points == w.settings.transcript_font_size:
            return
        w.settings = w.settings.with_changes(transcript_font_size=points)
        w.settings_file.save(w.settings)
        w.transcript.set_font_size(points)
        w.controller.refresh()  # the thread written again at the new size (formulas too)
