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
from ember_chat.engine.errors import ContextOverflowError, InvalidParameter
from ember_chat.engine.inference.grammar import wants_json

P = TypeVar("P")


@dataclass(frozen=True)
class ChatPlan:
    messages: list[ChatMessage]  # without the answer being continued
    prefix: str  # an answer being continued (after an interruption), else ""
    thinking: bool | None  # the template's thinking switch, as it will be rendered
    offered: list[ToolSpec] | None  # the tools the model is given (None: none)


def plan_chat(
    messages: list[ChatMessage], params: SamplingParams, thinking_switch: bool, tools: ToolRequest | None
) -> ChatPlan:
    """The last message is the user's, the results of the previous turn's calls (`tool` messages), or
    an assistant's partial answer to continue. A model with a thinking switch thinks unless asked not
    to (as the window and llama-server do), except where a grammar holds the answer from its first
    token (JSON output, a forced tool call). InvalidParameter with a sentence for what cannot be."""
    prefix = ""
    if messages and messages[-1].role == "assistant" and not messages[-1].tool_calls:
        prefix, messages = messages[-1].content, messages[:-1]
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
    return ChatPlan(list(messages), prefix, thinking, offered)


@dataclass(frozen=True)
class FittedPrompt(Generic[P]):
    rendered: P  # what `render` gave for the kept messages
    tokens: int
    dropped: int  # messages left out


def fit_to_context(
    messages: list[ChatMessage], render: Callable[[list[ChatMessage]], tuple[P, int]], n_ctx: int, reserve: int
) -> FittedPrompt[P]:
    """Render (`render(kept) -> (prompt, its token count)`) with the oldest turns left out until the
    prompt and `reserve` tokens for the answer fit `n_ctx`; ContextOverflowError when even the last
    turn alone does not."""
    kept = list(messages)
    dropped = 0
    while True:
        rendered, n_tokens = render(kept)
        if n_tokens + reserve <= n_ctx:
            return FittedPrompt(rendered, n_tokens, dropped)
        first = next(i for i, m in enumerate(kept) if m.role != "system")
        # what is left out goes up to the next user message: never an orphaned answer or tool result first
        nxt = next((i for i in range(first + 1, len(kept)) if kept[i].role == "user"), None)
        if nxt is None:
            raise ContextOverflowError(
                f"The message needs {n_tokens:,} tokens (with the system prompt), but the context holds "
                f"{n_ctx:,} and {reserve:,} are kept for the answer. "
                "Shorten the message or load the model with a longer context."
            )
        dropped += nxt - first
        del kept[first:nxt]
