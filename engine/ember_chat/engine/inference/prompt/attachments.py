"""A turn's attachments expanded into the prompt, on the engine thread where the tokenizer is: the
budget is the context minus the tokens kept for the answer minus the conversation (with a margin for
the chat template), and `plan_turn` decides whole or retrieval within it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ember_chat.engine.attachments.planning import apply_plan, conversation_refs, plan_turn
from ember_chat.engine.attachments.store import AttachmentStore
from ember_chat.engine.attachments.turn_plan import TurnPlan
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import AttachmentError

MESSAGE_OVERHEAD = 8  # a message's role markers in a chat template, about
PROMPT_OVERHEAD = 64  # the template's own text (system preamble, generation prompt)
UNKNOWN_CONTEXT = 8192  # a remote server that does not say its context: a common size, conservatively


class TokenCount(NamedTuple):
    tokens: int
    estimated: bool  # no tokenizer for this model: about four characters per token


class ModelChangeGuard:
    """Token counts from any thread (many at once) never overlap a model being replaced or closed on the
    engine thread: a count that finds a change under way is estimated instead of waiting for it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._changing = 0

    @contextlib.contextmanager
    def changing(self) -> Iterator[None]:
        """Held while the model changes (re-entrant on the engine thread); waits for running counts."""
        with self._cond:
            self._changing += 1
            self._cond.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._cond:
                self._changing -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def reading(self) -> Iterator[bool]:
        """True when the model may be read now (then it is not changed until the block ends)."""
        with self._cond:
            ok = not self._changing
            if ok:
                self._readers += 1
        try:
            yield ok
        finally:
            if ok:
                with self._cond:
                    self._readers -= 1
                    self._cond.notify_all()


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def token_counter(backend: Any) -> tuple[Callable[[str], int], bool]:
    """How to count tokens with this backend: the model's own tokenizer (local), the server's (a remote
    with a tokenize endpoint), else an estimate (and True: the counts are estimates)."""
    tokenize = getattr(backend, "tokenize", None)
    if callable(tokenize):
        return (lambda text: len(tokenize(text)) if text else 0), False
    count = getattr(backend, "count_tokens", None)
    if callable(count) and count("x") is not None:

        def by_server(text: str) -> int:
            n = count(text) if text else 0
            return n if n is not None else estimate_tokens(text)

        return by_server, False
    return estimate_tokens, True


def attachment_budget(
    messages: list[ChatMessage], params: SamplingParams, n_ctx: int, count: Callable[[str], int]
) -> int:
    """Tokens the attachments may take: context − the answer's reserve (as the runtime keeps it) − the
    conversation − a margin."""
    reserve = min(params.max_tokens, max(1, n_ctx // 4))
    conversation = sum(count(m.content) + MESSAGE_OVERHEAD for m in messages) + PROMPT_OVERHEAD
    margin = 32 + n_ctx // 50
    return max(0, n_ctx - reserve - conversation - margin)


def expand_attachments(
    messages: list[ChatMessage],
    params: SamplingParams,
    backend: Any,
    n_ctx: int | None,
    store: AttachmentStore | None,
) -> tuple[list[ChatMessage], TurnPlan, int, bool] | None:
    """The messages with their text attachments in the prompt, the plan, the budget and whether the
    counts were estimated; None when no message has a text attachment."""
    refs = conversation_refs(messages)
    if not refs:
        return None
    if store is None:
        raise AttachmentError("This request has attachments but no attachment store to read them from.")
    count, estimated = token_counter(backend)
    budget = attachment_budget(messages, params, n_ctx or UNKNOWN_CONTEXT, count)
    question = next((m.content for m in reversed(messages) if m.role == "user"), "")
    plan = plan_turn(refs, question, budget, count, store)
    return apply_plan(messages, plan), plan, budget, estimated or not n_ctx
