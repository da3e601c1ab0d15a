"""What the chat controller does with attachments (no widget: the controller runs without a window):
keep a user message's stored files with it, record the plan an answer was made with (so its Sources
come back when the chat is reopened) and the project passages it was given (engine/projects/answers.py),
and say what the transcript shows of a message (its files, an answer's plan and project sources). What
the engine is given of them: engine/conversation/messages.py."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace

from ember_chat.app.transcript.attachments import MessageAttachments
from ember_chat.engine.attachments import AttachmentStore, StoredAttachment, TurnPlan
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.events import KnowledgeUsed
from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.storage.conversations import ConversationStore

LEFT_OUT = "knowledge_left_out"  # in an answer's stored metrics: its project's passages that did not fit


class ChatAttachments:
    """What the controller does with attachments: keep them with the user's message and record the
    plan the engine made an answer with."""

    def __init__(self, store: AttachmentStore, chats: ConversationStore | None = None) -> None:
        """`chats`: the chat store an answer's project sources are kept in (None: none are)."""
        self.store = store
        self.planned_answers: list[int] = []  # answers whose plan was recorded (the view asks again)
        self.chats = chats
        self.knowledge = AnswerKnowledge(chats) if chats is not None else None
        self.left_out: dict[int, int] = {}  # answers made here: their project's passages that did not fit

    def link(self, message_id: int, attachments: Sequence[StoredAttachment]) -> None:
        self.store.link(message_id, [a.id for a in attachments])

    def record(self, answer_id: int, plan: TurnPlan) -> None:
        self.store.record_sources(answer_id, plan)
        self.planned_answers.append(answer_id)

    def record_knowledge(self, answer_id: int, used: KnowledgeUsed) -> None:
        """The project passages an answer was given, kept with it (its metrics keep how many did not fit)."""
        if self.knowledge is not None:
            self.knowledge.record(answer_id, used.sources)
        self.left_out[answer_id] = used.left_out

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
        if self.knowledge is not None and self.chats is not None:
            for message_id, sources in self.knowledge.sources_of_answers(ids).items():
                left_out = self.left_out.get(message_id)
                if left_out is None:
                    with contextlib.suppress(KeyError):
                        stored = self.chats.message(message_id).metrics or {}
                        left_out = stored.get(LEFT_OUT) if isinstance(stored.get(LEFT_OUT), int) else 0
                had = out.get(message_id, MessageAttachments())
                out[message_id] = replace(had, knowledge=tuple(sources), left_out=max(0, left_out or 0))
        return out
