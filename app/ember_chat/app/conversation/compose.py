"""The message box's actions (`window.compose`): sending (a message sent while a model loads goes once
it is ready; one sent while an answer streams goes when it ends), editing an earlier message (the box's
own text and files come back whenever the edit ends).

Built from the context (its notifier says what happens to a message) and what it drives: the message
box, the chat's controller, the chat's attachments (what refuses a send, the files of a message edited),
the window's banner (its send-later notice ends when the message goes), and whether a model loads;
the composition (shell/compose.py) connects the box's, the controller's and the window's model
signals to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QTextCursor

from ember_chat.app.context import AppContext
from ember_chat.app.conversation.attach import WindowAttachments
from ember_chat.app.conversation.composer import Composer
from ember_chat.app.conversation.controller import ChatController
from ember_chat.engine.core.states import ModelState

if TYPE_CHECKING:
    from ember_chat.engine.attachments import StoredAttachment


class EndingBanner(Protocol):
    """The window's banner: hidden when a message is sent, its notice of a message waiting ended."""

    def hide(self) -> None: ...

    def end(self, cause: str) -> None: ...


class ComposerActions(QObject):
    def __init__(
        self,
        ctx: AppContext,
        composer: Composer,
        controller: ChatController,
        attach: WindowAttachments,
        banner: EndingBanner,
        *,
        loading: Callable[[], bool],
        parent: QObject,
    ) -> None:
        """`attach`: the chat's attachments (why the box's files cannot be sent now; a message's files);
        `loading`: whether a model is being loaded (a message sent meanwhile waits for it)."""
        super().__init__(parent)
        self.notifier = ctx.notifier
        self.composer = composer
        self.controller = controller
        self.attach = attach
        self.banner = banner
        self._loading = loading
        self._draft: tuple[str, list[StoredAttachment]] | None = None  # the box's own, while editing a message
        self._queued = ""  # a message sent while a model loads: "load" (waiting for it), "files" (for its chips)
        # Messages sent while an answer streams (Enter), with their files, and the chat they were sent in:
        # out of the box (the next one typed is not glued to them), each sent when the answer before ends.
        self._after_answer: list[tuple[str, list[StoredAttachment]]] = []
        self._after_answer_chat: int | None = None

    def send(self, text: str) -> None:
        self.banner.hide()
        if self.controller.generating and not self.controller.editing:
            self._wait_for_answer(text)
            return
        if self._loading() and not self.controller.model_ready:
            # a model loads: the message stays in the box and goes when it is ready (load_ended)
            self._put_back(text)
            self._queued = "load"
            self.notifier.show_notice(
                self.tr("Your message is sent as soon as the model is loaded."), cause="send-later"
            )
            return
        refused = self.attach.refused()  # (still reading; an image for a model that cannot see it)
        if refused:
            self._put_back(text)
            self.notifier.show_error(refused)
            return
        editing = self.controller.editing
        self.composer.set_editing(False)
        attachments = self.composer.attachments.attachments()
        if not self.controller.send(text, attachments):  # not sent: the text goes back into the box
            self._put_back(text)
            self.composer.set_editing(editing)
        else:
            self.composer.attachments.clear()
            if editing:
                self.end_edit()  # (the box gets its draft back)

    def load_ended(self, state: str) -> None:
        """A model state came (a ModelState, as its str): a message sent while the model loaded goes once
        it is ready and the message's files are counted again with its tokenizer — what the box holds
        then; a load that failed or was unloaded leaves it in the box."""
        if self._queued != "load" or state == ModelState.LOADING:
            return
        if state != ModelState.READY:
            self.drop_queued()
            return
        self._queued = "files"
        self.attachments_settled()

    def attachments_settled(self) -> None:
        """The message box's files are read and counted: a message waiting for them goes."""
        if self._queued == "files" and not self.composer.attachments.busy:
            self._queued = ""
            self.banner.end("send-later")
            self.composer.submit()

    def drop_queued(self) -> None:
        """A message waiting for a load stays in the box, unsent (the load was cancelled or refused, an
        edit started or ended, another chat was opened), and the notice says so; messages waiting for
        the answer's end (Stop, Esc, another chat) come back into it, before what was typed since."""
        if self._queued:
            self._queued = ""
            self.notifier.show_notice(self.tr("Your message was not sent; it is still in the box."), cause="send-later")
        waiting, self._after_answer = self._after_answer, []
        if waiting:
            typed = self.composer.editor.toPlainText().strip()
            self._put_back("\n\n".join([*(text for text, _ in waiting if text), *([typed] if typed else [])]))
            for _, files in waiting:
                self.composer.attachments.attach_stored(files)
            self.notifier.show_notice(
                self.tr("Your message was not sent; it is back in the box.")
                if len(waiting) == 1
                else self.tr("Your {n} messages were not sent; they are back in the box.").format(n=len(waiting)),
                cause="send-later",
            )

    def _wait_for_answer(self, text: str) -> None:
        """Enter while an answer streams (or its tool calls wait): the message (and its files) leaves the
        box and goes when the answer ends; Stop, Esc or leaving the chat put it back."""
        refused = self.attach.refused()  # (still reading; an image for a model that cannot see it)
        if refused:
            self._put_back(text)
            self.notifier.show_error(refused)
            return
        bar = self.composer.attachments
        self._after_answer.append((text, bar.attachments()))
        self._after_answer_chat = self.controller.conversation_id
        bar.clear()
        self._say_waiting()

    def _say_waiting(self) -> None:
        n = len(self._after_answer)
        first = " ".join(self._after_answer[0][0].split())  # (which message waits: the box no longer shows it)
        if n > 1:
            said = self.tr(
                "Your {n} messages are sent one after another when the answer ends. Esc or Stop puts them back "
                "in the box."
            ).format(n=n)
        elif first:
            said = self.tr("Your message “{text}” is sent when the answer ends. Esc or Stop puts it back in the box.")
            said = said.format(text=first if len(first) <= 60 else first[:59].rstrip() + "…")
        else:  # (files alone)
            said = self.tr("Your message is sent when the answer ends. Esc or Stop puts it back in the box.")
        self.notifier.show_notice(said, cause="send-later")

    def answer_ended(self, generating: bool) -> None:
        """The controller's generating_changed: a message waiting for the answer goes once it has ended,
        after what waited for that end (another chat opened puts it back in the box instead)."""
        if not generating and self._after_answer:
            QTimer.singleShot(0, self, self._send_waiting)

    def _send_waiting(self) -> None:
        controller = self.controller
        if not self._after_answer or controller.generating:
            return
        if controller.conversation_id != self._after_answer_chat or controller.editing:
            self.drop_queued()
            return
        text, files = self._after_answer.pop(0)
        if not controller.send(text, files):  # (no model, a write that failed: it says why)
            self._after_answer.insert(0, (text, files))
            self.drop_queued()
        elif self._after_answer:
            self._say_waiting()
        else:
            self.banner.end("send-later")

    def _put_back(self, text: str) -> None:
        """Text into the box with the cursor at its end, where typing goes on."""
        editor = self.composer.editor
        editor.setPlainText(text)
        editor.moveCursor(QTextCursor.MoveOperation.End)

    def edit_message(self, message_id: int) -> None:
        def act() -> None:
            composer = self.composer
            self.drop_queued()  # (the box's text is the message edited now)
            if not self.controller.editing:  # what the box held: it comes back when the edit ends
                self._draft = (composer.editor.toPlainText(), composer.attachments.attachments())
            self._put_back(self.controller.start_edit(message_id))
            composer.attachments.clear()  # the edited message's files come back with its text
            composer.attachments.attach_stored(self.attach.store.of_message(message_id))
            composer.set_editing(True)
            composer.editor.setFocus()

        self.controller.after_stop(act)

    def end_edit(self) -> None:
        """Editing ends (cancelled, sent, another chat opened, a new chat): the message box gets back what
        it held before the edit, never the edited text and files (they belong to that message)."""
        draft, self._draft = self._draft, None
        self.drop_queued()
        self.controller.cancel_edit()
        self.composer.set_editing(False)
        if draft is not None:
            text, files = draft
            self._put_back(text)
            self.composer.attachments.clear()
            self.composer.attachments.attach_stored(files)
