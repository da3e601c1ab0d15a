"""A turn's knowledge (a project's passages) added to the prompt, on the engine thread where the
tokenizer is: the request carries a `TurnKnowledge` (engine/projects/turn.py makes one from a project);
`add_knowledge` gives it the budget left once the conversation and its attachments are counted (the same
budget as attachments', attachments.attachment_budget) and puts the numbered block it fitted before the
text of the last user message. What was retrieved but did not fit is said (`KnowledgeUsed.left_out`),
never cut silently."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.backend import InferenceBackend
from ember_chat.engine.inference.events import CitedPassage, KnowledgeUsed
from ember_chat.engine.inference.prompt.attachments import UNKNOWN_CONTEXT, attachment_budget, token_counter


@dataclass(frozen=True)
class KnowledgeFit:
    """The passages that fit a budget: the block for the prompt ("" when none), its numbered sources, and
    how many passages retrieval found before the budget was applied; how they were ranked and why a model
    the knowledge names was not used (KnowledgeUsed's `ranked_by` and `problems`)."""

    block: str
    sources: tuple[CitedPassage, ...]
    retrieved: int
    ranked_by: tuple[str, ...] = ("bm25",)
    problems: tuple[str, ...] = ()


class TurnKnowledge(Protocol):
    """Knowledge a request answers with (a project's: projects/turn.py `ProjectKnowledge`)."""

    @property
    def name(self) -> str:
        """What the knowledge is called for the user (the project's name)."""
        ...

    def fit(self, question: str, budget: int, count: Callable[[str], int]) -> KnowledgeFit:
        """The passages for `question` whose block takes at most `budget` tokens by `count`."""
        ...


def last_question(messages: Sequence[ChatMessage]) -> str:
    """The text of the last user message ("" when there is none)."""
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


def with_block(messages: list[ChatMessage], block: str) -> list[ChatMessage]:
    """The messages with `block` put before the text of the last user message."""
    if not block:
        return messages
    out = list(messages)
    for i in range(len(out) - 1, -1, -1):
        if out[i].role == "user":
            out[i] = replace(out[i], content=f"{block}\n\n{out[i].content}")
            break
    return out


def add_knowledge(
    messages: list[ChatMessage],
    question: str,
    params: SamplingParams,
    backend: InferenceBackend,
    n_ctx: int | None,
    knowledge: TurnKnowledge,
) -> tuple[list[ChatMessage], KnowledgeUsed]:
    """The messages (attachments already in them) with the knowledge that fits the context added to the
    last user turn, and what was used. `question`: the user's own words (retrieval's query)."""
    count, estimated = token_counter(backend)
    budget = attachment_budget(messages, params, n_ctx or UNKNOWN_CONTEXT, count)
    fit = knowledge.fit(question, budget, count) if question.strip() else KnowledgeFit("", (), 0)
    used = KnowledgeUsed(knowledge.name, fit.sources, fit.retrieved, budget, estimated or not n_ctx,
                         fit.ranked_by, fit.problems)  # fmt: skip
    return with_block(messages, fit.block), used


__all__ = ["KnowledgeFit", "TurnKnowledge", "add_knowledge", "last_question", "with_block"]
