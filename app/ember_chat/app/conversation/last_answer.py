"""What the side panel shows again of a chat when it is opened: its shown branch's last answer as it was
right after it was made — the figures its metrics kept, and in a project's chat the project's Why this
answer with the passages it was given (kept with it: engine/projects/answers.py) and how many found did
not fit (its metrics' LEFT_OUT). How the passages were ranked and why a project's model was not used are
not kept, so they are not said again."""

from __future__ import annotations

from dataclasses import dataclass

from ember_chat.app.conversation.attachments import LEFT_OUT
from ember_chat.engine.inference.events import KnowledgeUsed
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.projects.records import Project
from ember_chat.engine.storage.conversations import Conversation, ConversationStore, Message


@dataclass(frozen=True)
class LastAnswer:
    metrics: GenerationMetrics | None  # None: none kept (stopped before a token, or an imported chat's)
    project: Project | None  # the project of the chat (None: in none)
    used: KnowledgeUsed | None  # the passages it was given (None: none kept)


def last_answer(
    store: ConversationStore, knowledge: AnswerKnowledge | None, chat: Conversation, project: Project | None
) -> LastAnswer | None:
    """The last answer of the chat's shown branch (None: it has none yet). `project`: the chat's project
    now; `knowledge`: where the answers' passages are kept (None: nowhere)."""
    answer = _last_answer_of(store, chat)
    if answer is None:
        return None
    metrics = GenerationMetrics.from_stored(answer.metrics)
    sources = knowledge.sources_of(answer.id) if knowledge is not None and project is not None else []
    used = None
    if sources and project is not None:
        stored = answer.metrics or {}
        left_out = stored.get(LEFT_OUT) if isinstance(stored.get(LEFT_OUT), int) else 0
        used = KnowledgeUsed(project.name, tuple(sources), len(sources) + max(0, left_out), budget_tokens=0)
    return LastAnswer(metrics, project, used)


def _last_answer_of(store: ConversationStore, chat: Conversation) -> Message | None:
    """Read from the shown branch's leaf up to its last answer, a message at a time (on the GUI thread at
    each switch: a long chat is not read whole again, as the transcript just did)."""
    if chat.active_leaf is None:
        return next((m for m in reversed(store.thread(chat.id)) if m.role == "assistant"), None)
    node: int | None = chat.active_leaf
    while node is not None:
        try:
            message = store.message(node)
        except KeyError:
            return None  # (deleted meanwhile)
        if message.role == "assistant":
            return message
        node = message.parent_id
    return None


__all__ = ["LastAnswer", "last_answer"]
