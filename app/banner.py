"""The message banner above the transcript: errors (red), notices (amber), and the countdown shown
while a remote server is asked again."""

from __future__ import annotations

import html
import time
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QWidget

ERROR_STYLE = "background:#fde2e1;color:#7f1d1d;padding:8px;"
NOTICE_STYLE = "background:#fef3c7;color:#78350f;padding:8px;"


class Banner(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.linkActivated.connect(lambda _: self.hide())
        self.setAccessibleName("Message banner")
        self.hide()
        self._countdown = QTimer(self)
        self._countdown.setInterval(1000)
        self._countdown.timeout.connect(self._tick)
        self._retry: tuple[str, float, int, int] | None = None
        self._still_waiting: Callable[[], bool] = lambda: False

    def show_error(self, message: str) -> None:
        self._show(message, ERROR_STYLE)

    def show_notice(self, message: str) -> None:
        self._show(message, NOTICE_STYLE)

    def _show(self, message: str, style: str) -> None:
        self.setStyleSheet(style)
        self.setText(f"{html.escape(message, quote=False)}&nbsp;&nbsp;<a href='#'>Dismiss</a>")
        self.show()

    def count_down(
        self, reason: str, delay_s: float, attempt: int, attempts: int, still_waiting: Callable[[], bool]
    ) -> None:
        """A visible countdown to the next try (a remote server is asked again before the first token)."""
        self._retry = (reason, time.monotonic() + delay_s, attempt, attempts)
        self._still_waiting = still_waiting
        self._tick()
        self._countdown.start()

    def stop_countdown(self) -> None:
        self._retry = None
        self._countdown.stop()

    def _tick(self) -> None:
        if self._retry is None or not self._still_waiting():
            self._countdown.stop()
            return
        reason, due, attempt, attempts = self._retry
        left = max(0, round(due - time.monotonic()))
        if left == 0:
            self._countdown.stop()
        self.show_notice(f"{reason} Trying again in {left} s (retry {attempt} of {attempts})…")
