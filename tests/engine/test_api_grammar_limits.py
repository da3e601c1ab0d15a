"""Grammars and schemas built to crash or hang llama.cpp's GBNF parser (tests/hostile/grammars.py), sent
to `ember-chat serve` (a process of its own, as a user runs it) with the official `openai` client through
every field that becomes a grammar: `grammar`, `response_format`'s JSON schema, a tool's parameters.
Each is a 400 that says why, before llama.cpp sees it, and the server answers the next request
(issue 27, item 5: a 40 KB `grammar` killed the process with SIGSEGV). The server runs with a 1 MB
stack for each thread (Windows' default) and 2 GB of address space, so what would overflow a stack
or use up memory shows here, on any machine."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import psutil
import pytest

from tests.helpers.peer_servers import ember_server
from tests.hostile import grammars

ASK: list[Any] = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def served(tiny_model: Path) -> Iterator[openai.OpenAI]:
    # (a client timeout well under pytest's: a parser that hangs fails the test instead of stalling it)
    with (
        ember_server(tiny_model, threads=1, stack_kb=1024, memory_mb=2048) as base_url,
        openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30) as client,
    ):
        yield client


def server_process(tiny_model: Path) -> psutil.Process:
    """The `ember-chat serve` process `served` started (a child of this one)."""

    def command(process: psutil.Process) -> list[str]:
        try:
            return process.cmdline()
        except psutil.Error:  # (a child ending meanwhile)
            return []

    (found,) = [p for p in psutil.Process().children(recursive=True) if {"serve", str(tiny_model)} <= set(command(p))]
    return found


def ask_schema(client: openai.OpenAI, schema: dict[str, Any], max_tokens: int = 4) -> openai.types.chat.ChatCompletion:
    response_format: Any = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return client.chat.completions.create(
        model="", messages=ASK, max_tokens=max_tokens, temperature=0, response_format=response_format
    )


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
        (grammars.leading_rule_chain, "and so on, more than 2,000 deep"),
        (grammars.hundred_million_repetition, "at least 100,000,000 times"),
        (grammars.huge_count, "llama.cpp allows 2,000 at most"),
    ],
    ids=[
        "nested_parentheses", "inverted_repetition", "branching_rules", "growing_left_recursion",
        "leading_rule_chain", "hundred_million_repetition", "huge_count",
    ],
)  # fmt: skip
def test_a_hostile_grammar_is_400_and_the_server_answers_the_next_request(
    served: openai.OpenAI, build: Callable[[], str], says: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        served.chat.completions.create(model="", messages=ASK, max_tokens=4, extra_body={"grammar": build()})
    assert info.value.param == "grammar" and says in info.value.message
    still_answers(served)


def test_a_json_schema_whose_grammar_would_overflow_the_parser(served: openai.OpenAI) -> None:
    """A pattern's `{1,20000}` would be 20,000 nested groups whatever Ember does: 400. A maxLength of
    20,000 is a schema people write: answered, the limit checked after the answer, not by the grammar."""
    with pytest.raises(openai.BadRequestError) as info:
        ask_schema(served, grammars.long_pattern_schema())
    assert info.value.param == "response_format" and "pattern count of 20,000" in info.value.message
    assert ask_schema(served, grammars.long_string_schema(), 8).choices[0].message.content  # (JSON, cut at 8)
    still_answers(served)


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (grammars.many_items_schema, "its minItems of 100,000,000 at the top would be written out"),
        (grammars.long_min_string_schema, "its minLength of 1,000,000,000 at /properties/note would be"),
        (grammars.pattern_count_schema, "its pattern count of 1,000,000,000 at the top would be"),
        (grammars.stray_brace_pattern_schema, "pattern at the top has a ']' or '}' that closes nothing"),
    ],
    ids=["many_items", "long_min_string", "pattern_count", "stray_brace"],
)
def test_a_json_schema_whose_grammar_would_use_up_memory_or_never_end_is_400_at_once(
    served: openai.OpenAI, build: Callable[[], dict[str, Any]], says: str
) -> None:
    """Refused before llama-cpp-python's converter writes a byte (it wrote minItems' item out 100
    million times, past the server's memory; it looped forever on the stray brace)."""
    start = time.monotonic()
    with pytest.raises(openai.BadRequestError) as info:
        ask_schema(served, build())
    assert info.value.param == "response_format" and says in info.value.message
    assert time.monotonic() - start < 5
    still_answers(served)


def test_refused_grammars_are_not_kept_in_the_server(served: openai.OpenAI, tiny_model: Path) -> None:
    """A grammar over the size limit is refused without being remembered: six 8 MB grammars (the
    check's cache kept each refused text, 64 of the largest a request can send) leave the server's
    memory as it was."""
    process = server_process(tiny_model)

    def refuse(n: int) -> None:  # (each text its own: the cache kept one copy of each)
        grammar = 'root ::= "a"\n' + "#" * (8_000_000 + n)
        with pytest.raises(openai.BadRequestError) as info:
            served.chat.completions.create(model="", messages=ASK, max_tokens=2, extra_body={"grammar": grammar})
        assert "characters long; the limit is 200,000" in info.value.message

    refuse(0)  # (the server's buffers for an 8 MB request, once)
    before = process.memory_info().rss
    for n in range(1, 7):
        refuse(n)
    assert process.memory_info().rss - before < 24_000_000  # (48 MB and more were kept before)
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
    with pytest.raises(openai.BadRequestError) as info:
        served.chat.completions.create(
            model="", messages=ASK, max_tokens=4, tools=[tool(grammars.long_min_string_schema())]
        )  # fmt: skip
    assert info.value.param == "tools" and "tools[0] (save)" in info.value.message
    assert "its minLength of 1,000,000,000" in info.value.message
    reply = served.chat.completions.create(
        model="", messages=ASK, max_tokens=8, temperature=0, tools=[tool(grammars.long_string_schema())],
        tool_choice="required",
    )  # fmt: skip
    assert reply.choices[0].finish_reason == "length"  # (a call cut short: the grammar held it, no crash)
    still_answers(served)
