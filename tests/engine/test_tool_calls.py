"""Tool calls read from answers in each family's format (engine/inference/calls/parsing.py), whole and
streamed in pieces split anywhere, never from inside thinking; arguments checked against the tool's
schema; the format chosen from the real templates in tests/templates; the cap on calls per answer.

The answers are recorded outputs in each family's format, written as literal strings. Where they come
from: the format each real template in tests/templates renders for a call (and tells the model to
write), and the model outputs llama.cpp's own parser tests feed to common/chat.cpp
(tests/test-chat.cpp: Hermes 2 Pro / Qwen, Llama 3.x, Mistral Nemo, GPT OSS cases, whose test tool
is `special_function` with one integer argument `arg1`).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember_chat.engine.core.reasoning import MarkerNormalizer
from ember_chat.engine.core.tools import ToolSpec
from ember_chat.engine.inference.calls.parsing import (
    CutShort,
    ParsedChunk,
    ToolCallStream,
    ToolFormat,
    call_triggers,
    parse_tool_calls,
    tool_format_for,
)
from tests.helpers.paths import TESTS

SPECIAL = ToolSpec(
    "special_function",
    "I'm special",
    {"type": "object", "properties": {"arg1": {"type": "integer", "description": "The arg."}}, "required": ["arg1"]},
)
PYTHON = ToolSpec("python", "Runs code", {"type": "object", "properties": {"code": {"type": "string"}}})
WEATHER = ToolSpec(
    "get_weather",
    "Current weather in a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
)
TOOLS = [SPECIAL, PYTHON, WEATHER]


def harmony(raw: str) -> str:
    """gpt-oss's raw output as Ember's runtime yields it: its markers made canonical (analysis → <think>)."""
    normalizer = MarkerNormalizer()
    return normalizer.feed(raw) + normalizer.flush()


# (format, answer, expected text, expected calls as (name, arguments)) — every answer here is one a
# model of that family writes; the expected text is the answer with the calls taken out.
RECORDED = [
    # Qwen2.5/Qwen3 templates: 'return a json object ... within <tool_call></tool_call> XML tags'
    (
        ToolFormat.HERMES,
        '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>',
        "",
        [("special_function", {"arg1": 1})],
    ),
    # several calls in one turn, with words before them (Qwen2.5 renders parallel calls this way)
    (
        ToolFormat.HERMES,
        "Let me look both up.\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n'
        '{"name": "get_weather", "arguments": {"city": "Lyon", "unit": "celsius"}}\n</tool_call>',
        "Let me look both up.\n",  # (the space between calls is no text of the answer)
        [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon", "unit": "celsius"})],
    ),
    # Qwen3 thinking first, a call after; the call tag's end token (<|im_end|>) stops generation
    (
        ToolFormat.HERMES,
        "<think>\nThe user wants the weather.\n</think>\n\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "<think>\nThe user wants the weather.\n</think>\n\n",
        [("get_weather", {"city": "Paris"})],
    ),
    # Qwen3-Coder's XML body (test-chat.cpp's Qwen3-Coder case); a string stays text even if it looks like JSON
    (
        ToolFormat.HERMES,
        "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>"
        "\n<tool_call>\n<function=get_weather>\n<parameter=city>\n1984\n</parameter>\n</function>\n</tool_call>",
        "",
        [("special_function", {"arg1": 1}), ("get_weather", {"city": "1984"})],
    ),
    # Llama 3.1/3.2 templates: 'Respond in the format {"name": function name, "parameters": ...}'
    (
        ToolFormat.LLAMA3,
        '{"name": "special_function", "parameters": {"arg1": 1}}',
        "",
        [("special_function", {"arg1": 1})],
    ),
    # llama.cpp's Llama 3.x parser also takes the "type" key first
    (
        ToolFormat.LLAMA3,
        '{"type": "function", "name": "special_function", "parameters": {"arg1": 1}}',
        "",
        [("special_function", {"arg1": 1})],
    ),
    # Llama 3.1's built-in tools: <|python_tag|>name.call(...) (test-chat.cpp's python case)
    (ToolFormat.LLAMA3, "<|python_tag|>python.call(code=\"print('hey')\")", "", [("python", {"code": "print('hey')"})]),
    (
        ToolFormat.LLAMA3,
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        "",
        [("get_weather", {"city": "Paris"})],
    ),
    # Mistral Nemo template renders [TOOL_CALLS][{..., "id": <9 chars>}] (test-chat.cpp's Nemo case)
    (
        ToolFormat.MISTRAL,
        '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]',
        "",
        [("special_function", {"arg1": 1})],
    ),
    (
        ToolFormat.MISTRAL,
        'Checking.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcdefghi"}, '
        '{"name": "get_weather", "arguments": {"city": "Lyon"}, "id": "jklmnopqr"}]',
        "Checking.",
        [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})],
    ),
    # Mistral Small 3.2 / Magistral: [TOOL_CALLS]name[ARGS]{...}
    (ToolFormat.MISTRAL, '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}', "", [("special_function", {"arg1": 1})]),
    # gpt-oss (test-chat.cpp's GPT OSS cases), through Ember's marker normalizer: analysis → thinking
    (
        ToolFormat.GPT_OSS,
        harmony(
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary "
            'to=functions.special_function <|constrain|>json<|message|>{"arg1": 1}'
        ),
        "<think>I'm\nthinking</think>",
        [("special_function", {"arg1": 1})],
    ),
    # the recipient in the role header, as gpt-oss's template renders an earlier call; <|call|> kept
    (
        ToolFormat.GPT_OSS,
        harmony(' to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{"arg1": 1}<|call|>'),
        "",
        [("special_function", {"arg1": 1})],
    ),
    # a commentary preamble to the user, then the call
    (
        ToolFormat.GPT_OSS,
        harmony(
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary<|message|>"
            "Hello, world!\nWhat's up?<|end|><|start|>assistant<|channel|>commentary to=functions.special_function "
            '<|constrain|>json<|message|>{"arg1": 1}'
        ),
        "<think>I'm\nthinking</think>Hello, world!\nWhat's up?",
        [("special_function", {"arg1": 1})],
    ),
]
IDS = [f"{fmt.value}-{i}" for i, (fmt, *_) in enumerate(RECORDED)]


def named(chunk: ParsedChunk) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in chunk.calls]


def streamed(fmt: ToolFormat, pieces: list[str]) -> ParsedChunk:
    stream = ToolCallStream(fmt, TOOLS)
    chunks = [stream.feed(p) for p in pieces] + [stream.flush()]
    return ParsedChunk(
        "".join(c.text for c in chunks),
        tuple(call for c in chunks for call in c.calls),
        tuple(bad for c in chunks for bad in c.invalid),
    )


@pytest.mark.parametrize(("fmt", "answer", "text", "calls"), RECORDED, ids=IDS)
def test_recorded_answers_give_their_calls(fmt: ToolFormat, answer: str, text: str, calls: list) -> None:
    parsed = parse_tool_calls(answer, fmt, TOOLS)
    assert parsed.invalid == ()
    assert named(parsed) == calls
    assert parsed.text == text
    assert all(c.raw and c.raw in answer for c in parsed.calls)
    assert len({c.id for c in parsed.calls}) == len(calls)


@pytest.mark.parametrize(("fmt", "answer", "text", "calls"), RECORDED, ids=IDS)
def test_split_anywhere_the_stream_gives_the_same(fmt: ToolFormat, answer: str, text: str, calls: list) -> None:
    for at in range(len(answer) + 1):
        parsed = streamed(fmt, [answer[:at], answer[at:]])
        assert (parsed.text, named(parsed), parsed.invalid) == (text, calls, ()), at


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(RECORDED), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_pieces_give_the_same(case: tuple, cuts: list[int]) -> None:
    fmt, answer, text, calls = case
    bounds = sorted({min(c, len(answer)) for c in cuts})
    pieces = [answer[a:b] for a, b in zip([0, *bounds], [*bounds, len(answer)], strict=True)]
    parsed = streamed(fmt, pieces)
    assert (parsed.text, named(parsed)) == (text, calls)


CUT = [  # answers that end inside a call (max tokens): the calls complete before it, and the rest CutShort
    (ToolFormat.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": {"ci', []),
    (
        ToolFormat.HERMES,
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"na',
        [("get_weather", {"city": "Paris"})],
    ),
    (ToolFormat.LLAMA3, '{"name": "get_weather", "parameters": {"ci', []),
    (ToolFormat.LLAMA3, '<|python_tag|>{"name": "get_weather", "parameters": {"ci', []),
    (
        ToolFormat.MISTRAL,
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_w',
        [("get_weather", {"city": "Oslo"})],
    ),
    (ToolFormat.GPT_OSS, '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"ci', []),
]


@pytest.mark.parametrize(("fmt", "answer", "calls"), CUT, ids=[f"{f.value}-{i}" for i, (f, *_) in enumerate(CUT)])
def test_a_call_the_answer_ends_inside_is_cut_short_and_no_text(fmt: ToolFormat, answer: str, calls: list) -> None:
    parsed = parse_tool_calls(answer, fmt, TOOLS)
    assert parsed.text == "" and named(parsed) == calls
    assert len(parsed.invalid) == 1 and isinstance(parsed.invalid[0], CutShort)
    assert answer.endswith(parsed.invalid[0].call.raw[-8:])


def test_text_streams_out_at_once_and_only_a_possible_call_is_held() -> None:
    stream = ToolCallStream(ToolFormat.HERMES, TOOLS)
    assert stream.feed("The weather").text == "The weather"
    assert stream.feed(" is <tool").text == " is "  # maybe the start of <tool_call>
    assert stream.feed("s> nice").text == "<tools> nice"  # it was not
    held = stream.feed('<tool_call>\n{"name": "get_weather", "arguments": {"ci')
    assert held == ParsedChunk()
    done = stream.feed('ty": "Rome"}}\n</tool_call> after')
    assert done.text == " after" and named(done) == [("get_weather", {"city": "Rome"})]
    assert stream.flush() == ParsedChunk()


def test_llama_holds_an_answer_starting_like_a_call_and_lets_other_json_through() -> None:
    stream = ToolCallStream(ToolFormat.LLAMA3, TOOLS)
    assert stream.feed('{"na').text == ""
    assert stream.feed('me": "get_weather", "parameters": {"city": "Oslo"}}').calls[0].arguments == {"city": "Oslo"}
    plain = ToolCallStream(ToolFormat.LLAMA3, TOOLS)
    assert plain.feed('{"answer": 4').text == '{"answer": 4'  # cannot be a call: shown as it comes
    assert parse_tool_calls('Sure: {"name": "get_weather"}', ToolFormat.LLAMA3, TOOLS).calls == ()


FAKE_IN_THINKING = [
    (ToolFormat.HERMES, '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>'),
    (ToolFormat.LLAMA3, '<|python_tag|>{"name": "special_function", "parameters": {"arg1": 1}}'),
    (ToolFormat.MISTRAL, '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]'),
    (ToolFormat.GPT_OSS, '<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{"arg1": 1}'),
]


@pytest.mark.parametrize(("fmt", "call"), FAKE_IN_THINKING, ids=[f.value for f, _ in FAKE_IN_THINKING])
def test_a_call_inside_thinking_is_never_read(fmt: ToolFormat, call: str) -> None:
    """LM Studio #1592: its parser read calls inside <think>. Here the thinking is text, whole or streamed."""
    answer = f"<think>\nI could write {call} but I will not.\n</think>\n\nNo tool needed."
    for at in range(len(answer) + 1):
        parsed = streamed(fmt, [answer[:at], answer[at:]])
        assert parsed.calls == () and parsed.invalid == (), at
        assert parsed.text == answer, at
    # thinking opened by the prompt (DeepSeek-R1 distills): the text starts inside it
    opened = parse_tool_calls(f"{call}\n</think>\n\nDone.", fmt, TOOLS, thinking=True)
    assert opened.calls == () and opened.text.endswith("Done.")


def test_gpt_oss_analysis_with_a_fake_call_then_a_real_one() -> None:
    answer = harmony(
        "<|channel|>analysis<|message|>Maybe to=functions.special_function with arg1=2?<|end|>"
        '<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{"arg1": 3}'
    )
    parsed = parse_tool_calls(answer, ToolFormat.GPT_OSS, TOOLS)
    assert named(parsed) == [("special_function", {"arg1": 3})]


INVALID = [
    (ToolFormat.HERMES, '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>', "no tool named"),
    (ToolFormat.HERMES, '<tool_call>{"name": "special_function", "arguments": {"arg1": "one"}}</tool_call>', "integer"),
    (ToolFormat.HERMES, '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>', "lacks required 'city'"),
    (
        ToolFormat.HERMES,
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"</tool_call>',
        "not valid JSON",
    ),
    (ToolFormat.LLAMA3, '{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "kelvin"}}', "one of"),
    (
        ToolFormat.MISTRAL,
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": 7}, "id": "123456789"}]',
        "string",
    ),
    (
        ToolFormat.GPT_OSS,
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": ',
        "cut short",
    ),
    (ToolFormat.MISTRAL, '[TOOL_CALLS][{"name": "get_weather", "argu', "cut short"),
]


@pytest.mark.parametrize(("fmt", "answer", "why"), INVALID, ids=[f"{f.value}-{i}" for i, (f, *_) in enumerate(INVALID)])
def test_an_invalid_call_is_an_error_result_not_a_call(fmt: ToolFormat, answer: str, why: str) -> None:
    parsed = parse_tool_calls(answer, fmt, TOOLS)
    assert parsed.calls == ()
    assert len(parsed.invalid) == 1 and why in parsed.invalid[0].error
    result = parsed.invalid[0].result()
    assert result.is_error and result.content.startswith("Error: ") and why in result.content
    assert result.call_id == parsed.invalid[0].call.id


def test_arguments_written_as_a_json_string_are_read() -> None:
    answer = '[TOOL_CALLS][{"name": "get_weather", "arguments": "{\\"city\\": \\"Bern\\"}", "id": "123456789"}]'
    parsed = parse_tool_calls(answer, ToolFormat.MISTRAL, TOOLS)
    assert named(parsed) == [("get_weather", {"city": "Bern"})] and parsed.calls[0].id == "123456789"


TEMPLATES = TESTS / "templates"


def test_the_format_is_chosen_from_the_real_templates() -> None:
    chosen = {p.stem: tool_format_for(p.read_text(encoding="utf-8"), "x") for p in TEMPLATES.glob("*.jinja")}
    assert chosen == {
        "Qwen-Qwen2.5-7B-Instruct": ToolFormat.HERMES,
        "Qwen-Qwen3-0.6B": ToolFormat.HERMES,
        "meta-llama-Llama-3.1-8B-Instruct": ToolFormat.LLAMA3,
        "meta-llama-Llama-3.2-3B-Instruct": ToolFormat.LLAMA3,
        "mistralai-Mistral-Nemo-Instruct-2407": ToolFormat.MISTRAL,
        "openai-gpt-oss-120b": ToolFormat.GPT_OSS,
        # no place for tools in these templates: Ember describes them in Hermes words (tools_render)
        "HuggingFaceTB-SmolLM3-3B": ToolFormat.HERMES,
        "microsoft-Phi-3.5-mini-instruct": ToolFormat.HERMES,
        "google-gemma-2-2b-it": ToolFormat.HERMES,
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ToolFormat.HERMES,
        # Gemma 4 writes <|tool_call>call:NAME{...}: not read yet, so no tools for it
        "google-gemma-4-31B-it": None,
    }
    assert tool_format_for(None, "gpt-oss") is ToolFormat.GPT_OSS  # llama.cpp's built-in gpt-oss format
    assert tool_format_for(None, "llama") is ToolFormat.HERMES  # a built-in format: Hermes text


def test_recorded_answers_cover_every_format() -> None:
    assert {fmt for fmt, *_ in RECORDED} == set(ToolFormat)


@pytest.mark.parametrize(("fmt", "answer", "text", "calls"), RECORDED, ids=IDS)
def test_each_call_starts_at_one_of_its_formats_triggers(fmt: ToolFormat, answer: str, text: str, calls: list) -> None:
    """The words a lazy grammar waits for: every recorded call opens with one, outside the thinking."""
    after_thinking = answer.split("</think>")[-1]
    found = [t for t in call_triggers(fmt) if t in after_thinking]
    assert found, answer
    first = min(after_thinking.find(t) for t in found)
    assert parse_tool_calls(after_thinking[:first], fmt, TOOLS).calls == ()
    assert named(parse_tool_calls(after_thinking[first:], fmt, TOOLS)) == calls


ANY_ARGS = ToolSpec("anything", "Takes any arguments")
MARKERS = ["</tool_call>", "<tool_call>", "<|call|>", "<|eot_id|>", "]", "[TOOL_CALLS]", " to=functions.x", "</think>"]
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12), st.sampled_from(MARKERS))
# words that cannot spell any format's markers (no "_", "|", "=" and no uppercase): the text around calls
PLAIN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz 0123456789.,:;!?'\"\n{}[]<>/-é中", max_size=30)


def written(fmt: ToolFormat, args: dict) -> str:
    """A call to `anything` as each family writes it."""
    body = json.dumps(args, ensure_ascii=False)
    if fmt is ToolFormat.HERMES:
        return f'<tool_call>\n{{"name": "anything", "arguments": {body}}}\n</tool_call>'
    if fmt is ToolFormat.LLAMA3:
        return f'<|python_tag|>{{"name": "anything", "parameters": {body}}}'
    if fmt is ToolFormat.MISTRAL:
        return f'[TOOL_CALLS][{{"name": "anything", "arguments": {body}, "id": "a1b2c3d4e"}}]'
    return f"<|channel|>commentary to=functions.anything <|constrain|>json<|message|>{body}<|call|>"


@settings(max_examples=200, deadline=None)
@given(
    fmt=st.sampled_from(list(ToolFormat)),
    before=PLAIN,
    args=st.lists(st.dictionaries(st.text(min_size=1, max_size=6), JSON_VALUES, max_size=4), min_size=1, max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=10),
)
def test_generated_answers_give_back_their_calls(fmt: ToolFormat, before: str, args: list, cuts: list) -> None:
    """Any text before the calls, any JSON arguments (their strings may hold a format's own markers,
    such as "</tool_call>"), split anywhere: the text and the calls come back as they were written."""
    if fmt is ToolFormat.LLAMA3:
        args = args[:1]  # after <|python_tag|> the rest of the answer is the call
        if before.lstrip().startswith("{"):
            before = "x" + before  # an answer opening with "{" may be a bare call: not this case
    answer = before + "".join(written(fmt, a) for a in args)
    bounds = sorted({min(c, len(answer)) for c in cuts})
    pieces = [answer[a:b] for a, b in zip([0, *bounds], [*bounds, len(answer)], strict=True)]
    stream = ToolCallStream(fmt, [ANY_ARGS])
    chunks = [stream.feed(p) for p in pieces] + [stream.flush()]
    assert "".join(c.text for c in chunks) == before
    assert [c.arguments for chunk in chunks for c in chunk.calls] == args
    assert all(not chunk.invalid for chunk in chunks)
