"""The message banner above the transcript: errors, notices, and the countdown shown while a remote
server is asked again. Colours come from the theme (#banner[kind=...]); the message is announced to
screen readers, and the close button is reachable with Tab.

A message may name its cause ("model": none is loaded or one failed to load; "answer": an answer
failed; "retry": the countdown): `end(cause)` takes it down when that cause has ended, so no banner
outlives its problem.

A message belongs to the chat it was raised in, or to the app. The chat's (CHAT_CAUSES: an answer's
error and its retries, what was just done there and its Undo, a file that could not be attached, what
an import, a restore or an export just did, its saved settings that could not be used) goes when
another chat opens (`leave_chat`); the app's (no model loaded, a model's load error, the API server, a
damaged database, a message waiting for a load: true whatever chat is open) stays until its cause ends
or it is dismissed. A message may carry one action, a button beside it (`set_action`: an import's
*Open*), which goes with the message."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAccessible, QAccessibleAnnouncementEvent, QHideEvent, QPixmap
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from ember_chat.app.qt.plain_text import plain_tooltip
from ember_chat.app.style.icons import icon_image, themed_icon
from ember_chat.app.style.theme import Colors

# The causes whose messages are about the chat on screen: they go when another chat opens.
CHAT_CAUSES = frozenset({"answer", "retry", "undo", "attachment", "import", "restore", "export", "settings"})


class Banner(QFrame):
    def __init__(self, colors: Colors, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setProperty("kind", "notice")
        self.setAccessibleName(self.tr("Message banner"))
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 8, 8, 8)
        row.setSpacing(10)
        self.icon = QLabel()
        self.icon.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = QToolButton()
        self.close_button.setAutoRaise(True)
        self.close_button.setAccessibleName(self.tr("Dismiss message"))
        self.close_button.setToolTip(self.tr("Dismiss"))
        self.close_button.clicked.connect(self.hide)
        self.action_button = QPushButton()  # the message's action, while it has one (an import's Open)
        self.action_button.setAccessibleName(self.tr("Message action"))  # (named by each action: set_action)
        self.action_button.setAccessibleDescription(self.tr("Does what the message offers"))
        self.action_button.clicked.connect(self._act)
        self.action_button.hide()
        self._action: Callable[[], None] | None = None
        row.addWidget(self.icon)
        row.addWidget(self.label, 1)
        row.addWidget(self.action_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()
        self._countdown = QTimer(self)
        self._countdown.setInterval(1000)
        self._countdown.timeout.connect(self._tick)
        self.cause = ""  # of the message shown ("" when it has none)
        self._retry: tuple[str, float, int, int] | None = None
        self._still_waiting: Callable[[], bool] = lambda: False
        self.set_colors(colors)

    def set_colors(self, colors: Colors) -> None:
        self.colors = colors
        self.close_button.setIcon(themed_icon("close", colors))
        self._set_icon()

    def _set_icon(self) -> None:
        error = self.property("kind") == "error"
        colour = self.colors.error_text if error else self.colors.text
        ratio = self.devicePixelRatioF()
        self.icon.setPixmap(QPixmap.fromImage(icon_image("warning" if error else "info", colour, 18, ratio)))

    def text(self) -> str:
        return self.label.text()

    def show_error(self, message: str, cause: str = "") -> None:
        self._show(message, "error", cause)

    def show_notice(self, message: str, cause: str = "") -> None:
        self._show(message, "notice", cause)

    def set_action(self, text: str, action: Callable[[], None], description: str = "") -> None:
        """A button beside the message shown (it goes with the message): `text` on it, `action` on a click."""
        self._action = action
        self.action_button.setText(text)
        self.action_button.setAccessibleName(text)
        self.action_button.setToolTip(plain_tooltip(description))  # (a name from a file in it: never markup)
        self.action_button.setAccessibleDescription(description or text)
        self.action_button.show()

    def _act(self) -> None:
        action = self._action
        if action is not None:
            action()

    def _drop_action(self) -> None:
        self._action = None
        self.action_button.hide()

    def hideEvent(self, event: QHideEvent) -> None:  # Qt override: dismissed or ended, its action goes too
        if not event.spontaneous():  # (not the window minimized)
            self._drop_action()
        super().hideEvent(event)

    @property
    def chat_scoped(self) -> bool:
        """The message shown is about the chat on screen (see CHAT_CAUSES)."""
        return self.cause in CHAT_CAUSES

    def leave_chat(self) -> None:
        """Another chat opens (or a new one): the message about the chat left behind goes; the app's stays."""
        if self.isVisible() and self.chat_scoped:
            self._retry = None
            self._countdown.stop()
            self.hide()

    def end(self, cause: str) -> None:
        """The message of this cause is no longer true: take it down (a message of another cause stays)."""
        if self.cause == cause and self.isVisible():
            if cause == "retry":
                self._retry = None
                self._countdown.stop()
            self.hide()

    def _show(self, message: str, kind: str, cause: str) -> None:
        self.cause = cause
        self._drop_action()  # (an action belongs to the message it came with)
        if cause != "retry":  # another message replaces the countdown
            self._retry = None
            self._countdown.stop()
        if self.property("kind") != kind:
            self.setProperty("kind", kind)
            self.style().unpolish(self)  # the style sheet picks its colours by the property
            self.style().polish(self)
            self._set_icon()
        changed = message != self.label.text() or not self.isVisible()
        self.label.setText(message)
        self.label.setAccessibleName(message)
        self.show()
        if changed and not self._countdown.isActive():
            event = QAccessibleAnnouncementEvent(self, message)
            if kind == "error":
                event.setPoliteness(QAccessible.AnnouncementPoliteness.Assertive)
            QAccessible.updateAccessibility(event)

    def count_down(
        self, reason: str, delay_s: float, attempt: int, attempts: int, still_waiting: Callable[[], bool]
    ) -> None:
        """A visible countdown to the next try (a remote server is asked again before the first token)."""
        self._retry = (reason, time.monotonic() + delay_s, attempt, attempts)
        self._still_waiting = still_waiting
        self._tick()
        self._countdown.start()

    def stop_countdown(self) -> None:
        """The request being retried has ended: the countdown goes (an error that ended it stays)."""
        self.end("retry")
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
            message = self.tr("{reason} Trying again now (retry {attempt} of {attempts})…")
        else:
            message = self.tr("{reason} Trying again in {left} s (retry {attempt} of {attempts})…")
        self.show_notice(message.format(reason=reason, left=left, attempt=attempt, attempts=attempts), cause="retry")
