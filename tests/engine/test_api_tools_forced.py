"""Forced tool calls on `ember-chat serve` with the chat starter (SmolLM2 135M), through the official
`openai` client (issue 27, item 10). Under a forced grammar the starter repeats its call for as long
as the grammar lets it: it made 6 calls until max_tokens, finish_reason "length", the last call cut
and its `<tool_call` markup in `content`. Now a named tool_choice is one call; "required" with the
default parallel_tool_calls makes at most MAX_CALLS, and a call max_tokens cuts after complete ones is
dropped, the answer ending with those: finish_reason "tool_calls", never markup in `content`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ember_chat.engine.inference.calls.grammar import MAX_CALLS
from tests.helpers.peer_servers import ember_server
from tests.helpers.runtime_tools import FORECAST

ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris for 3 days?"}]
NAMED: Any = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def starter(chat_starter_model: Path) -> Iterator[openai.OpenAI]:
    with (
        ember_server(chat_starter_model, n_ctx=4096) as base_url,
        openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600) as client,
    ):
        yield client


def forced(client: openai.OpenAI, choice: Any, max_tokens: int) -> Any:
    return client.chat.completions.create(
        model="", messages=ASK, tools=[FORECAST], tool_choice=choice, temperature=0, max_tokens=max_tokens
    )


def whole_calls(message: Any) -> list[dict[str, Any]]:
    """The message's calls (each get_weather with JSON arguments); its content holds no call markup."""
    assert "<tool_call" not in (message.content or "") and not (message.content or "").strip()
    assert message.tool_calls, message
    assert {c.function.name for c in message.tool_calls} == {"get_weather"}
    return [json.loads(c.function.arguments) for c in message.tool_calls]


def test_a_named_tool_is_one_call_and_the_answer_ends_with_it(starter: openai.OpenAI) -> None:
    reply = forced(starter, NAMED, max_tokens=1024)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert len(whole_calls(choice.message)) == 1
    assert reply.usage is not None and reply.usage.completion_tokens < 100  # (it ended there, not at 1024)


def test_required_calls_are_bounded(starter: openai.OpenAI) -> None:
    """Greedy, the starter calls again after each call until the grammar allows only the end."""
    choice = forced(starter, "required", max_tokens=1024).choices[0]
    assert choice.finish_reason == "tool_calls"
    assert len(whole_calls(choice.message)) == MAX_CALLS


def test_a_parallel_call_cut_by_max_tokens_is_dropped_not_leaked(starter: openai.OpenAI) -> None:
    """150 tokens end inside the 4th call: the answer is the 3 before it, whole, and ends with them;
    streamed, the same calls and no markup in any content delta."""
    whole = forced(starter, "required", max_tokens=150)
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = whole_calls(choice.message)
    assert 1 <= len(calls) < MAX_CALLS
    assert "invalid_tool_calls" not in (whole.model_extra or {}).get("ember", {})
    chunks = list(
        starter.chat.completions.create(
            model="", messages=ASK, tools=[FORECAST], tool_choice="required", temperature=0, max_tokens=150,
            stream=True,
        )
    )  # fmt: skip
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "<tool_call" not in "".join(d.content or "" for d in deltas)
    streamed = [json.loads(t.function.arguments) for d in deltas for t in d.tool_calls or [] if t.function.arguments]
    assert streamed == calls and chunks[-1].choices[0].finish_reason == "tool_calls"
