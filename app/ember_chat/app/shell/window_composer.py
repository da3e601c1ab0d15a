"""The main window's message box actions: sending (a message sent while a model loads goes once it is
ready), editing an earlier message (the box's own text and files come back whenever the edit ends). A
part of the main window (`window.compose`), which uses the window's composer, controller and banner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtGui import QTextCursor

from ember_chat.engine.core.states import ModelState

if TYPE_CHECKING:
    from ember_chat.app.shell.main_window import MainWindow
    from ember_chat.engine.attachments import StoredAttachment


class ComposerActions(QObject):
    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.w = window
        self._draft: tuple[str, list[StoredAttachment]] | None = None  # the box's own, while editing a message
        self._queued = ""  # a message sent while a model loads: "load" (waiting for it), "files" (for its chips)

    def send(self, text: str) -> None:
        self.w.banner.hide()
        if self.w.models.loading and not self.w.controller.model_ready:
            # a model loads: the message stays in the box and goes when it is ready (load_ended)
            self._put_back(text)
            self._queued = "load"
            self.w.show_notice(self.tr("Your message is sent as soon as the model is loaded."), cause="send-later")
            return
        refused = self.w.attach.refused()  # (still reading; an image for a model that cannot see it)
        if refused:
            self._put_back(text)
            self.w.show_error(refused)
            return
        editing = self.w.controller.editing
        self.w.composer.set_editing(False)
        attachments = self.w.composer.attachments.attachments()
        if not self.w.controller.send(text, attachments):  # not sent: the text goes back into the box
            self._put_back(text)
            self.w.composer.set_editing(editing)
        else:
            self.w.composer.attachments.clear()
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
        if self._queued == "files" and not self.w.composer.attachments.busy:
            self._queued = ""
            self.w.banner.end("send-later")
            self.w.composer.submit()

    def drop_queued(self) -> None:
        """A message waiting for a load stays in the box, unsent (the load was cancelled or refused, an
        edit started or ended, another chat was opened), and the notice says so."""
        if self._queued:
            self._queued = ""
            self.w.show_notice(self.tr("Your message was not sent; it is still in the box."), cause="send-later")

    def _put_back(self, text: str) -> None:
        """Text into the box with the cursor at its end, where typing goes on."""
        editor = self.w.composer.editor
        editor.setPlainText(text)
        editor.moveCursor(QTextCursor.MoveOperation.End)

    def edit_message(self, message_id: int) -> None:
        def act() -> None:
            composer = self.w.composer
            self.drop_queued()  # (the box's text is the message edited now)
            if not self.w.controller.editing:  # what the box held: it comes back when the edit ends
                self._draft = (composer.editor.toPlainText(), composer.attachments.attachments())
            self._put_back(self.w.controller.start_edit(message_id))
            composer.attachments.clear()  # the edited message's files come back with its text
            composer.attachments.attach_stored(self.w.attach.store.of_message(message_id))
            composer.set_editing(True)
            composer.editor.setFocus()

        self.w.controller.after_stop(act)

    def end_edit(self) -> None:
        """Editing ends (cancelled, sent, another chat opened, a new chat): the message box gets back what
        it held before the edit, never the edited text and files (they belong to that message)."""
        draft, self._draft = self._draft, None
        self.drop_queued()
        self.w.controller.cancel_edit()
        self.w.composer.set_editing(False)
        if draft is not None:
            text, files = draft
            self._put_back(text)
            self.w.composer.attachments.clear()
            self.w.composer.attachments.attach_stored(files)
