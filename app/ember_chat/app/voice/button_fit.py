"""The microphone and voice-conversation buttons give way to the message box in a narrow window (issue 33).

The Tools button gives way by showing its count alone (tools/choices.py); these two are icons already, so
they hide instead, both together, first: while the box would keep less than `box_room` beside them and the
Tools button's whole text (`widest` says a widget's widest form) — but not while one is in use (the microphone
open, a conversation on: the button is then the way to stop it). Hidden, they
still work: Ctrl+Shift+Space dictates (an event filter on the box, voice/dictation.py) and the Voice
conversation menu entry and Ctrl+Shift+V start a conversation (voice/conversation.py)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QAbstractButton, QBoxLayout, QWidget


class VoiceButtonsFit(QObject):
    """Shows `buttons` in `row` only while `editor` keeps `box_room` beside them and the row's other widgets
    at their widest (checked on each resize of `box`)."""

    def __init__(
        self,
        box: QWidget,
        row: QBoxLayout,
        editor: QWidget,
        buttons: tuple[QWidget, ...],
        widest: Callable[[QWidget], int],
        box_room: int,
    ) -> None:
        super().__init__(box)  # (kept alive by the box: the composition holds no reference)
        self._box, self._row, self._editor, self._buttons = box, row, editor, buttons
        self._widest, self._box_room = widest, box_room
        # (installed after the Tools button's filter, so Qt runs this one first: the Tools button then
        # decides its text with these buttons already shown or hidden)
        box.installEventFilter(self)
        for button in buttons:  # (one in use stays: the microphone open, a conversation on — its way to stop)
            if isinstance(button, QAbstractButton):
                button.toggled.connect(self.fit)
        self.fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self._box and event.type() == QEvent.Type.Resize:
            self.fit()
        return False

    def fit(self, *_: object) -> None:
        row = self._row
        spacing = max(0, row.spacing())
        margins = row.contentsMargins()
        used = 0
        for i in range(row.count()):
            item = row.itemAt(i)
            widget = item.widget()
            if widget is self._editor:
                continue
            if widget is not None and widget in self._buttons:  # (hidden, its item's hint is 0)
                used += widget.sizeHint().width() + spacing
            elif not item.isEmpty():
                used += max(item.sizeHint().width(), self._widest(widget) if widget else 0) + spacing
        room = self._box.contentsRect().width() - margins.left() - margins.right() - used
        in_use = any(isinstance(b, QAbstractButton) and b.isChecked() for b in self._buttons)
        show = room >= self._box_room or in_use
        for button in self._buttons:
            if button.isHidden() == show:
                button.setVisible(show)


__all__ = ["VoiceButtonsFit"]
