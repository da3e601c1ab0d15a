"""An answer whose writes fail (disk full, a read-only folder) never stops: `AnswerSaving` says so
once, says when saving works again, and keeps finished answers that could not be written yet, trying
them again every few seconds. A part of ChatController (`controller.saving`); its sentences go out
through the controller's `error` and `notice` signals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer

from ember_chat.engine.storage.streaming import StreamingMessage

UNSAVED_RETRY_MS = 2000


class AnswerSaving(QObject):
    def __init__(self, error: Callable[[str], None], notice: Callable[[str], None], parent: QObject) -> None:
        super().__init__(parent)
        self._error = error
        self._notice = notice
        self._failing = False
        self._unsaved: list[tuple[StreamingMessage, dict[str, Any] | None]] = []
        self._timer = QTimer(self)
        self._timer.setInterval(UNSAVED_RETRY_MS)
        self._timer.timeout.connect(self._retry)

    def report(self, stream: StreamingMessage) -> None:
        """A failing write never stops the answer: say so once, and say when saving works again."""
        if stream.save_error and not self._failing:
            self._failing = True
            self._error(
                self.tr(
                    "Ember cannot save this answer right now ({reason}). It keeps streaming and is "
                    "saved as soon as writing works again; nothing already saved is lost."
                ).format(reason=stream.save_error)
            )
        elif not stream.save_error and self._failing:
            self._failing = False
            self._notice(self.tr("Saving works again: the answer is saved."))

    def keep(self, stream: StreamingMessage, metrics: dict[str, Any] | None) -> None:
        """A finished answer that could not be written: shown from memory, written when the disk lets it."""
        self._unsaved.append((stream, metrics))
        self._timer.start()
        self.report(stream)

    def _retry(self) -> None:
        """Finished answers that could not be written yet, tried again every few seconds."""
        still = [(stream, metrics) for stream, metrics in self._unsaved if not stream.finish(metrics)]
        self._unsaved = still
        if not still:
            self._timer.stop()
            if self._failing:
                self._failing = False
                self._notice(self.tr("Saving works again: every answer is saved."))
