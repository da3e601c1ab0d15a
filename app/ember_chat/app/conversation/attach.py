"""The window's attachments, wired (`window.attach`): the composer's chips read, kept and counted off
the GUI thread, and how each will be read planned by the engine on the message as it would be sent
(`planner`), files dropped on the window, the controller's attachments part (chat_attachments.py),
the transcript's chips, thumbnails and Sources read from the store, and what refuses a send (files
still being read; an image for a model that cannot see images)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject

from ember_chat.app.conversation.attachments import ChatAttachments
from ember_chat.app.conversation.attachments_bar import FileDrops
from ember_chat.app.conversation.drop_overlay import DropOverlay
from ember_chat.engine.attachments import AttachmentStore, Limits, StoredAttachment
from ember_chat.engine.conversation.messages import thread_messages
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.inference.events import AttachmentsPlanned
from ember_chat.engine.storage.conversations import Message
from ember_chat.engine.storage.paths import AppPaths

ATTACHMENT_CAUSE = "attachment"  # the banner's files that could not be attached (it stays until dismissed)


class WindowAttachments(QObject):
    def __init__(self, window: Any, config_dir: Path) -> None:  # (the main window, until it comes off it)
        super().__init__(window)
        self.w = window
        self.store = AttachmentStore(AppPaths(window.data_dir, config_dir), window.store)
        # Files no message refers to any more (their chats deleted, or attached and never sent) go, before
        # anything is attached in this run (a file attached is kept before its message is sent).
        self.store.prune()
        self.chat = ChatAttachments(self.store)
        bar = window.composer.attachments
        bar.configure(window.tasks, window.bridge.measure_tokens, self.planner, self.sees_images, self.store.save)
        bar.question = window.composer.editor.toPlainText  # (the plan's passages are the ones it asks for)
        window.composer.editor.textChanged.connect(bar.replan_soon)
        window.side.params.changed.connect(bar.replan_soon)  # max tokens, the system prompt
        window.controller.thread_shown.connect(lambda _thread, _branches: bar.replan_soon())  # another chat, an edit
        bar.limits = lambda: Limits.from_settings(window.settings)  # size, and the reader's time and memory
        bar.text_of = self.store.text
        window.bridge.service.attachment_store = self.store  # where the engine reads a message's files
        bar.failed.connect(self._failed)
        self.drop_overlay = DropOverlay(window.centre_stack)  # over the chat while files are dragged
        self.drops = FileDrops(window, bar, self.drop_overlay, [window.composer.editor.viewport()])
        view = window.transcript.attachments
        view.lookup = self.chat.of_messages
        view.text_head = self.store.text_head  # a sent file's preview: the text Ember keeps, never a path
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

    def planner(self, pending: list[StoredAttachment], question: str) -> Callable[[], AttachmentsPlanned | None]:
        """(GUI thread) The message as Enter would send it now, for the engine to plan on a worker
        thread: the chat's thread (up to the message edited, when editing), its tool calls, the system
        prompt, then the question typed with these files — what the controller gives the engine
        (controller._start) — so the chips say what the answer's Read line will."""
        w = self.w
        params, system_prompt = w.side.params.params(), w.side.params.system_prompt.toPlainText()
        cid, editing, parent = w.controller.conversation_id, w.controller.editing, w.controller.editing_parent
        refs = tuple(self.store.ref(a) for a in pending if not a.is_image)
        store, chat, service = w.store, self.chat, w.bridge.service

        def job() -> AttachmentsPlanned | None:
            thread: list[Message] = []
            if cid is not None and not (editing and parent is None):  # (an edited first message: none before)
                thread = store.thread(cid, parent) if editing else store.thread(cid)
            history = thread_messages(thread, chat.store, system_prompt)
            history.append(ChatMessage("user", question, attachments=refs))
            return service.plan_attachments(history, params, self.store)

        return job

    def refused(self) -> str:
        """Why the composer's attachments cannot be sent now ("" when they can)."""
        bar = self.w.composer.attachments
        if bar.busy:
            return self.tr("The attachments are still being read; send again in a moment (your message is kept).")
        return bar.images_refused()
