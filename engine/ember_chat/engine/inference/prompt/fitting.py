"""What a chat request asks of the template, checked before anything is evaluated (`plan_chat`), and
the conversation fitted to the context (`fit_to_context`): the oldest turns are left out, never the
system prompt, and the kept history never starts with an orphaned answer or tool result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.tools import ToolRequest, ToolSpec
from ember_chat.engine.errors import ContextOverflowError, HistoryTooLong, InvalidParameter
from ember_chat.engine.inference.grammar.structured import wants_json

P = TypeVar("P")


@dataclass(frozen=True)
class ChatPlan:
    messages: list[ChatMessage]  # without the answer being continued
    prefix: str  # an answer being continued (after an interruption), else ""
    thinking: bool | None  # the template's thinking switch, as it will be rendered
    offered: list[ToolSpec] | None  # the tools the model is given (None: none)
    held: bytes = b""  # the answer being continued ended inside a character: its first bytes (ChatMessage)


def plan_chat(
    messages: list[ChatMessage], params: SamplingParams, thinking_switch: bool, tools: ToolRequest | None
) -> ChatPlan:
    """The last message is the user's, the results of the previous turn's calls (`tool` messages), or
    an assistant's partial answer to continue. A model with a thinking switch thinks unless asked not
    to (as the window and llama-server do), except where a grammar holds the answer from its first
    token (JSON output, a forced tool call). InvalidParameter with a sentence for what cannot be."""
    prefix, held = "", b""
    if messages and messages[-1].role == "assistant" and not messages[-1].tool_calls:
        prefix, held, messages = messages[-1].content, messages[-1].held_bytes, messages[:-1]
    if not messages or messages[-1].role not in ("user", "tool"):
        raise InvalidParameter("a chat request must end with a user message (or the results of tool calls).")
    thinking = params.thinking
    if thinking is None and thinking_switch:
        thinking = True
    offered = list(tools.tools) if tools is not None and tools.active else None
    constrained = params.grammar is not None or wants_json(params.response_format)
    if offered and constrained:
        raise InvalidParameter("An answer that may call tools cannot also be held to JSON or a grammar.")
    if prefix and tools is not None and tools.forced:  # (a continued answer may call tools, not be forced to)
        raise InvalidParameter(
            "An answer that must call a tool cannot be continued: regenerate it with a larger max tokens."
        )
    if constrained and prefix:  # the grammar starts at the answer's beginning: a second document would follow
        raise InvalidParameter(
            "An answer constrained to JSON (or a grammar) cannot be continued: regenerate it with a larger max tokens."
        )
    if thinking_switch and (constrained or (tools is not None and tools.forced)):
        thinking = False  # the grammar holds the answer from its first token: no room for thoughts
    return ChatPlan(list(messages), prefix, thinking, offered, held)


@dataclass(frozen=True)
class FittedPrompt(Generic[P]):
    rendered: P  # what `render` gave for the kept messages
    tokens: int
    dropped: int  # messages left out


class FitStopped(Exception):
    """The request was stopped while its conversation was being fitted to the context."""


def cut_points(messages: list[ChatMessage]) -> list[int]:
    """Where the kept history may start, newest cut last: the first message after the leading system
    messages (nothing left out), then each later user message (never an orphaned answer or tool
    result first). The leading system messages are always kept."""
    first = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    return [first, *(i for i in range(first + 1, len(messages)) if messages[i].role == "user")]


def fit_to_context(
    messages: list[ChatMessage],
    render: Callable[[list[ChatMessage]], tuple[P, int]],
    n_ctx: int,
    reserve: int,
    *,
    trim: bool = True,
    stopped: Callable[[], bool] = lambda: False,
    discard: Callable[[P], None] = lambda _rendered: None,
) -> FittedPrompt[P]:
    """Render (`render(kept) -> (prompt, its token count)`) with the fewest oldest turns left out that
    let the prompt and `reserve` tokens for the answer fit `n_ctx`. ContextOverflowError when even the
    last turn alone does not fit; HistoryTooLong when the whole conversation does not and `trim` is
    False (known after one render: an API client that did not opt into trimming gets its 400 then).

    A render costs the tokens it renders, so the conversation is rendered whole once (it usually
    fits), then from the newest turn back: the last turn alone, then twice as many turns each time
    until they do not fit, then a binary search between the two — O(log turns) renders, each about the
    size of the context, however long the conversation. `stopped` is checked before each render
    (FitStopped); `discard` is given each rendering that is not the one returned (images to free)."""
    cuts = cut_points(messages)
    head = messages[: cuts[0]]

    def attempt(k: int) -> tuple[P, int]:
        if stopped():
            raise FitStopped
        return render(head + messages[cuts[k] :])

    rendered, n_tokens = attempt(0)
    if n_tokens + reserve <= n_ctx:
        return FittedPrompt(rendered, n_tokens, 0)
    last = len(cuts) - 1
    if not trim and last > 0:  # (whether the last turn alone would fit is the client's to find out)
        discard(rendered)
        raise HistoryTooLong(
            f"The conversation needs {n_tokens:,} tokens (with the system prompt), but the context holds "
            f"{n_ctx:,} and {reserve:,} are kept for the answer."
        )
    if last > 0:
        discard(rendered)
        rendered, n_tokens = attempt(last)
    if n_tokens + reserve > n_ctx:
        discard(rendered)
        raise ContextOverflowError(
            f"The message needs {n_tokens:,} tokens (with the system prompt), but the context holds "
            f"{n_ctx:,} and {reserve:,} are kept for the answer. "
            "Shorten the message or load the model with a longer context."
        )
    best = FittedPrompt(rendered, n_tokens, cuts[last] - cuts[0])
    fits, too_long = last, 0  # cut indices: the newest turns from `fits` on fit, from `too_long` on they do not
    step = 1
    while fits - too_long > 1:  # widen from the newest end while it fits, then halve the gap
        k = max(too_long + 1, fits - step) if step else (fits + too_long) // 2
        rendered, n_tokens = attempt(k)
        if n_tokens + reserve <= n_ctx:
            discard(best.rendered)
            best, fits = FittedPrompt(rendered, n_tokens, cuts[k] - cuts[0]), k
            if step:
                step *= 2
        else:
            discard(rendered)
            too_long, step = k, 0
    return best
