"""The window's attachments, wired (`window.attach`): the composer's chips read, kept and counted off
the GUI thread, files dropped on the window, the controller's attachments part (chat_attachments.py),
the transcript's chips, thumbnails and Sources read from the store, and what refuses a send (files
still being read; an image for a model that cannot see images)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from ember_chat.app.chat.attachments_bar import FileDrops
from ember_chat.app.chat.chat_attachments import ChatAttachments
from ember_chat.engine.attachments import AttachmentStore, Limits
from ember_chat.engine.storage.paths import AppPaths

ATTACHMENT_CAUSE = "attachment"  # the banner's files that could not be attached (it stays until dismissed)

if TYPE_CHECKING:
    from ember_chat.app.shell.main_window import MainWindow


class WindowAttachments(QObject):
    def __init__(self, window: MainWindow, config_dir: Path) -> None:
        super().__init__(window)
        self.w = window
        self.store = AttachmentStore(AppPaths(window.data_dir, config_dir), window.store)
        # Files no message refers to any more (their chats deleted, or attached and never sent) go, before
        # anything is attached in this run (a file attached is kept before its message is sent).
        self.store.prune()
        self.chat = ChatAttachments(self.store)
        bar = window.composer.attachments
        bar.configure(window.tasks, window.bridge.measure_tokens, self.budget, self.sees_images, self.store.save)
        bar.limits = lambda: Limits.from_settings(window.settings)  # size, and the reader's time and memory
        bar.text_of = self.store.text
        window.bridge.service.attachment_store = self.store  # where the engine reads a message's files
        bar.failed.connect(self._failed)
        self.drops = FileDrops(window, bar)
        view = window.transcript.attachments
        view.lookup = self.chat.of_messages
        window.transcript.action.connect(view.on_action)
        window.controller.attachments = self.chat
        window.controller.planned.connect(view.forget)  # the answer's plan is recorded: its Sources show
        window.model_state_changed.connect(lambda _state: bar.recount())

    def _failed(self, message: str) -> None:
        """Why a file cannot be attached, in the banner; several files refused together (a drop, a
        multiple pick) each keep their sentence, one per line, until the banner is dismissed."""
        banner = self.w.banner
        if banner.isVisible() and banner.cause == ATTACHMENT_CAUSE and message not in banner.text():
            message = f"{banner.text()}\n{message}"
        self.w.show_error(message, cause=ATTACHMENT_CAUSE)

    def sees_images(self) -> bool | None:
        """Whether the loaded model can see images; None while none is loaded."""
        model = self.w.model
        return None if model is None or not self.w.controller.model_ready else bool(model.vision)

    def budget(self) -> int | None:
        """Tokens the attachments can take whole: the context, less the answer's max tokens, less the
        conversation so far (its last answer's prompt and output); None while no model is loaded."""
        model = self.w.model
        if model is None or not model.n_ctx:
            return None
        used = 0
        cid = self.w.controller.conversation_id
        if cid is not None:
            thread = self.w.store.thread(cid)
            metrics = thread[-1].metrics if thread else None
            if metrics:
                used = int(metrics.get("prompt_tokens") or 0) + int(metrics.get("output_tokens") or 0)
        return max(0, model.n_ctx - self.w.side.params.params().max_tokens - used)

    def refused(self) -> str:
        """Why the composer's attachments cannot be sent now ("" when they can)."""
        bar = self.w.composer.attachments
        if bar.busy:
            return self.tr("The attachments are still being read; send again in a moment (your message is kept).")
        return bar.images_refused()
