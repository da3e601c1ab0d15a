"""What the chat controller does with attachments (no widget: the controller runs without a window):
keep a user message's stored files with it, put them in the history it sends (AttachmentRef for text,
which the engine expands whole or by retrieval; ImageInput for images), record the plan an answer
was made with (so its Sources come back when the chat is reopened), and say what the transcript shows
of a message (its files, an answer's plan)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from ember_chat.app.chat.transcript_attachments import MessageAttachments
from ember_chat.engine.attachments import AttachmentStore, StoredAttachment, TurnPlan
from ember_chat.engine.core.messages import ChatMessage, ImageInput
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.conversations import Message


class ChatAttachments:
    """What the controller does with attachments: keep them with the user's message, put them in the
    history it sends, and record the plan the engine made an answer with."""

    def __init__(self, store: AttachmentStore) -> None:
        self.store = store
        self.planned_answers: list[int] = []  # answers whose plan was recorded (the view asks again)

    def link(self, message_id: int, attachments: Sequence[StoredAttachment]) -> None:
        self.store.link(message_id, [a.id for a in attachments])

    def history(self, messages: list[Message]) -> list[ChatMessage]:
        """The thread as the engine gets it: each user message with its text files as references (the
        engine expands them, whole or by retrieval) and its images as ImageInput. An image whose file
        is gone raises AttachmentError (the send says so; nothing is dropped silently)."""
        stored = self.store.of_messages([m.id for m in messages if m.role == "user"])
        out = []
        for m in messages:
            mine = stored.get(m.id, [])
            images = tuple(ImageInput(a.sha256, self.store.image(a), a.name) for a in mine if a.is_image)
            refs = tuple(self.store.ref(a) for a in mine if not a.is_image)
            out.append(ChatMessage(m.role, m.content, images=images, attachments=refs))
        return out

    def record(self, answer_id: int, plan: TurnPlan) -> None:
        self.store.record_sources(answer_id, plan)
        self.planned_answers.append(answer_id)

    def of_messages(self, ids: list[int]) -> dict[int, MessageAttachments]:
        """What the transcript shows of these messages (their files, images, and an answer's plan)."""
        out: dict[int, MessageAttachments] = {}
        for message_id, atts in self.store.of_messages(ids).items():
            images = {}
            for a in atts:
                if a.is_image:
                    with contextlib.suppress(EmberError):  # a missing file: its chip stays, without a thumbnail
                        images[a.sha256] = self.store.image(a)
            out[message_id] = MessageAttachments(tuple(atts), images=images)
        for message_id, plan in self.store.plans_of(ids).items():
            out[message_id] = MessageAttachments(
                out.get(message_id, MessageAttachments()).attachments, tuple(plan.items), tuple(plan.sources)
            )
        return out
