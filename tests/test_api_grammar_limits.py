"""Grammars and schemas built to crash or hang llama.cpp's GBNF parser (tests/hostile/grammars.py), sent
to `ember-chat serve` (a process of its own, as a user runs it) with the official `openai` client through
every field that becomes a grammar: `grammar`, `response_format`'s JSON schema, a tool's parameters.
Each is a 400 that says why, before llama.cpp sees it, and the server answers the next request
(issue 27, item 5: a 40 KB `grammar` killed the process with SIGSEGV)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.hostile import grammars
from tests.peer_servers import ember_server

ASK: list[Any] = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def served(tiny_model: Path) -> Iterator[openai.OpenAI]:
    # (a client timeout well under pytest's: a parser that hangs fails the test instead of stalling it)
    with (
        ember_server(tiny_model, threads=1) as base_url,
        openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30) as client,
    ):
        yield client


def still_answers(client: openai.OpenAI) -> None:
    """The server is alive and its engine free: a plain request is answered."""
    reply = client.chat.completions.create(model="", messages=ASK, max_tokens=2, temperature=0)
    assert reply.choices[0].finish_reason in ("length", "stop")


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (grammars.nested_parentheses, "nests groups (parentheses) more than 1000 deep"),
        (grammars.inverted_repetition, "its maximum is below its minimum"),
        (grammars.branching_rules, "can begin in more than 4,096 ways"),
        (grammars.growing_left_recursion, "left-recursive: the rule 'root' can begin with itself"),
    ],
    ids=["nested_parentheses", "inverted_repetition", "branching_rules", "growing_left_recursion"],
)
def test_a_hostile_grammar_is_400_and_the_server_answers_the_next_request(
    served: openai.OpenAI, build: Callable[[], str], says: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        served.chat.completions.create(model="", messages=ASK, max_tokens=4, extra_body={"grammar": build()})
    assert info.value.param == "grammar" and says in info.value.message
    still_answers(served)


def test_a_json_schema_whose_grammar_would_overflow_the_parser(served: openai.OpenAI) -> None:
    """A pattern's `{1,20000}` becomes 20,000 nested groups whatever Ember does: 400. A maxLength of
    20,000 is a schema people write: answered, the limit checked after the answer, not by the grammar."""

    def ask(schema: dict[str, Any]) -> openai.types.chat.ChatCompletion:
        response_format: Any = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        return served.chat.completions.create(
            model="", messages=ASK, max_tokens=8, temperature=0, response_format=response_format
        )

    with pytest.raises(openai.BadRequestError) as info:
        ask(grammars.long_pattern_schema())
    assert info.value.param == "response_format" and "more than 1000 deep" in info.value.message
    assert ask(grammars.long_string_schema()).choices[0].message.content  # (held to JSON, cut at 8 tokens)
    still_answers(served)


def test_a_schema_nested_too_deep_is_400(served: openai.OpenAI) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(40):  # 81 objects and arrays inside each other
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(openai.BadRequestError) as info:
        served.chat.completions.create(
            model="", messages=ASK, max_tokens=4, extra_body={"json_schema": deep}
        )  # fmt: skip
    assert info.value.param == "json_schema" and "more than 64 deep" in info.value.message


def test_tool_schemas_whose_grammar_would_overflow_the_parser(served: openai.OpenAI) -> None:
    """The same through a tool's parameters (the grammar that holds its calls): the pattern is a 400
    naming the tool; the long maxLength is answered, the call forced by tool_choice."""

    def tool(schema: dict[str, Any]) -> Any:
        return {"type": "function", "function": {"name": "save", "parameters": schema}}

    with pytest.raises(openai.BadRequestError) as info:
        served.chat.completions.create(
            model="", messages=ASK, max_tokens=4, tools=[tool(grammars.long_pattern_schema())]
        )  # fmt: skip
    assert info.value.param == "tools" and "tools[0] (save)" in info.value.message
    reply = served.chat.completions.create(
        model="", messages=ASK, max_tokens=8, temperature=0, tools=[tool(grammars.long_string_schema())],
        tool_choice="required",
    )  # fmt: skip
    assert reply.choices[0].finish_reason == "length"  # (a call cut short: the grammar held it, no crash)
    still_answers(served)
