"""What the chat controller does with attachments (no widget: the controller runs without a window):
keep a user message's stored files with it, record the plan an answer was made with (so its Sources
come back when the chat is reopened), and say what the transcript shows of a message (its files, an
answer's plan). What the engine is given of them: engine/conversation/messages.py."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from ember_chat.app.transcript.attachments import MessageAttachments
from ember_chat.engine.attachments import AttachmentStore, StoredAttachment, TurnPlan
from ember_chat.engine.errors import EmberError


class ChatAttachments:
    """What the controller does with attachments: keep them with the user's message and record the
    plan the engine made an answer with."""

    def __init__(self, store: AttachmentStore) -> None:
        self.store = store
        self.planned_answers: list[int] = []  # answers whose plan was recorded (the view asks again)

    def link(self, message_id: int, attachments: Sequence[StoredAttachment]) -> None:
        self.store.link(message_id, [a.id for a in attachments])

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
