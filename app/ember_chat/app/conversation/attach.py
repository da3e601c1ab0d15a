"""The chat's attachments, wired (`window.attach`): the composer's chips read, kept and counted off
the GUI thread, and how each will be read planned by the engine on the message as it would be sent
(`planner`), files dropped on the window, the controller's attachments part (conversation/attachments.py),
the transcript's chips, thumbnails and Sources read from the store, and what refuses a send (files
still being read; an image for a model that cannot see images).

Built from the context (the chat store, the task runner, the engine's service and token counter, the
settings' limits, the notifier) and the widgets it drives (the message box, the side panel's parameters
and system prompt, the chat's controller, the transcript, the banner it adds refused files to, the
widget drops land on and the area the drop overlay covers), never the window; the composition
(shell/compose.py) connects the window's model state to `on_model_state`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from ember_chat.app.context import AppContext
from ember_chat.app.conversation.attachments import ChatAttachments
from ember_chat.app.conversation.attachments_bar import FileDrops
from ember_chat.app.conversation.composer import Composer
from ember_chat.app.conversation.controller import ChatController
from ember_chat.app.conversation.drop_overlay import DropOverlay
from ember_chat.app.side_panel.params_panel import ParamsPanel
from ember_chat.app.transcript.view import TranscriptView
from ember_chat.engine.attachments import AttachmentStore, Limits, StoredAttachment
from ember_chat.engine.conversation.messages import thread_messages
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import AttachmentsPlanned
from ember_chat.engine.storage.conversations import Message
from ember_chat.engine.storage.paths import AppPaths

MAX_LOOKBACK = 64  # messages walked up from an answer to its question (a tool loop's answers between)
ATTACHMENT_CAUSE = "attachment"  # the banner's files that could not be attached (it stays until dismissed)


class ShownBanner(Protocol):
    """The window's banner, read to add a refused file's sentence to those it already shows."""

    cause: str

    def isVisible(self) -> bool: ...

    def text(self) -> str: ...


class WindowAttachments(QObject):
    def __init__(
        self,
        ctx: AppContext,
        config_dir: Path,
        composer: Composer,
        params: ParamsPanel,
        controller: ChatController,
        transcript: TranscriptView,
        banner: ShownBanner,
        *,
        model: Callable[[], ModelDescription | None],
        drop_target: QWidget,
        drop_area: QWidget,
    ) -> None:
        """`params`: the side panel's parameters and system prompt (a plan is made with them); `banner`: where
        refused files are said; `model`: the loaded model (None while none is); `drop_target`: the widget
        files are dropped on (its children's drops that they do not take reach it); `drop_area`: what the
        drop overlay covers while files are dragged (the chat)."""
        super().__init__(drop_target)
        self.ctx = ctx
        self.composer = composer
        self.params = params
        self.controller = controller
        self.banner = banner
        self._model = model
        self.store = AttachmentStore(AppPaths(ctx.data_dir, config_dir), ctx.store)
        # Files no message refers to any more (their chats deleted, or attached and never sent) go, before
        # anything is attached in this run (a file attached is kept before its message is sent).
        self.store.prune()
        self.chat = ChatAttachments(self.store, ctx.store)  # (and an answer's project sources)
        bar = composer.attachments
        bar.configure(ctx.tasks, ctx.bridge.measure_tokens, self.planner, self.sees_images, self.store.save)
        bar.question = composer.editor.toPlainText  # (the plan's passages are the ones it asks for)
        composer.editor.textChanged.connect(bar.replan_soon)
        params.changed.connect(bar.replan_soon)  # max tokens, the system prompt
        controller.thread_shown.connect(lambda _thread, _branches: bar.replan_soon())  # another chat, an edit
        bar.limits = lambda: Limits.from_settings(ctx.settings)  # size, and the reader's time and memory
        bar.text_of = self.store.text
        ctx.bridge.service.attachment_store = self.store  # where the engine reads a message's files
        bar.failed.connect(self._failed)
        self.drop_overlay = DropOverlay(drop_area)  # over the chat while files are dragged
        self.drops = FileDrops(drop_target, bar, self.drop_overlay, [composer.editor.viewport()])
        view = transcript.attachments
        view.lookup = self.chat.of_messages
        view.text_head = self.store.text_head  # a sent file's preview: the text Ember keeps, never a path
        view.question_of = self.question_of  # (a project source's passage: the question's words marked)
        transcript.action.connect(view.on_action)
        controller.attachments = self.chat
        controller.planned.connect(view.forget)  # the answer's plan is recorded: its Sources show

    def question_of(self, answer_id: int) -> str:
        """The question an answer answers: the user's message it follows, past a tool loop's answers
        ("" when it is gone)."""
        try:
            m = self.ctx.store.message(answer_id)
            for _ in range(MAX_LOOKBACK):
                if m.role == "user" or m.parent_id is None:
                    break
                m = self.ctx.store.message(m.parent_id)
        except KeyError:
            return ""
        return m.content if m.role == "user" else ""

    def on_model_state(self, _state: str) -> None:
        """The window's model state changed (a ModelState, as its str): the chips are counted again with
        the model's tokenizer, and its images checked against what it can see."""
        self.composer.attachments.recount()

    def _failed(self, message: str) -> None:
        """Why a file cannot be attached, in the banner; several files refused together (a drop, a
        multiple pick) each keep their sentence, one per line, until the banner is dismissed."""
        banner = self.banner
        if banner.isVisible() and banner.cause == ATTACHMENT_CAUSE and message not in banner.text():
            message = f"{banner.text()}\n{message}"
        self.ctx.notifier.show_error(message, cause=ATTACHMENT_CAUSE)

    def sees_images(self) -> bool | None:
        """Whether the loaded model can see images; None while none is loaded."""
        model = self._model()
        return None if model is None or not self.controller.model_ready else bool(model.vision)

    def planner(self, pending: list[StoredAttachment], question: str) -> Callable[[], AttachmentsPlanned | None]:
        """(GUI thread) The message as Enter would send it now, for the engine to plan on a worker
        thread: the chat's thread (up to the message edited, when editing), its tool calls, the system
        prompt, then the question typed with these files — what the controller gives the engine
        (controller._start) — so the chips say what the answer's Read line will."""
        params, system_prompt = self.params.params(), self.params.system_prompt.toPlainText()
        c = self.controller
        cid, editing, parent = c.conversation_id, c.editing, c.editing_parent
        refs = tuple(self.store.ref(a) for a in pending if not a.is_image)
        store, chat, service = self.ctx.store, self.chat, self.ctx.bridge.service

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
        bar = self.composer.attachments
        if bar.busy:
            return self.tr("The attachments are still being read; send again in a moment (your message is kept).")
        return bar.images_refused()
