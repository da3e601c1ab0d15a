"""A tool call being written streams (issue 28, item 5): its text is in no Token, so the window showed a
blank answer while 200–300 tokens of a call were generated. The local runtime now gives ToolCallWriting
events as the call grows (its tool's name once written, its arguments so far), and a call the answer was
stopped inside comes as a CutShort named after its tool. Real llama.cpp: a scripted model that says
" the" wherever the call's grammar lets it (inside a string: without end), under "call a tool first";
the preview reader on the call formats of every family."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.tools import ToolRequest, ToolSpec
from ember_chat.engine.inference.calls.formats import CUT_SHORT, CutShort
from ember_chat.engine.inference.calls.preview import CallPreview, call_preview
from ember_chat.engine.inference.events import Event, Finished, Token, ToolCallParsed, ToolCallWriting
from tests.helpers.gguf_factory import Script, TinySpec, write_tiny_model
from tests.helpers.runtime_support import loaded

GIT_STATUS = ToolSpec(
    "git_status",
    "The working tree's status.",
    {"type": "object", "properties": {"repo_path": {"type": "string"}}, "required": ["repo_path"]},
)
MUST_CALL = ToolRequest((GIT_STATUS,), "required")
ASK = [ChatMessage("user", "What changed in /tmp/repo?")]


@pytest.fixture(scope="module")
def the_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Prefers " the" to anything: under the call's grammar, a repo_path of " the the the …" until stopped."""
    return write_tiny_model(tmp_path_factory.mktemp("the") / "the.gguf", TinySpec(script=Script(start=("▁the",))))


def test_a_call_being_written_streams_its_name_and_arguments(the_model: Path) -> None:
    with loaded(the_model, n_ctx=2048) as rt:
        events = list(rt.chat(ASK, SamplingParams(max_tokens=200, temperature=0.0), tools=MUST_CALL))
    writing = [e for e in events if isinstance(e, ToolCallWriting)]
    assert len(writing) > 100 and {e.index for e in writing} == {0}  # as it grows, not once at the end
    assert writing[0].name == "" and writing[-1].name == "git_status"  # named once its name is written whole
    named = [e for e in writing if e.name]
    assert named[0].arguments == ""  # (then the arguments, as written)
    assert writing[-1].arguments.startswith('{ "repo_path" : " the the the'), writing[-1].arguments[:40]
    assert all(len(b.arguments) >= len(a.arguments) for a, b in itertools.pairwise(named))
    assert all(e.text == "" for e in events if isinstance(e, Token))  # the call's text is no answer text
    (parsed,) = [e for e in events if isinstance(e, ToolCallParsed)]
    assert events.index(parsed) > events.index(writing[-1])
    done = events[-1]
    assert isinstance(done, Finished) and done.reason == "length" and done.text == ""
    assert isinstance(parsed.call, CutShort) and parsed.call.call.name == "git_status"  # max tokens: cut, named


def test_a_call_stopped_while_it_is_written_is_kept_named(the_model: Path) -> None:
    """Stop mid-call (the window's Stop): the call comes as a CutShort with its tool's name and its text."""
    with loaded(the_model, n_ctx=2048) as rt:
        cancel = threading.Event()
        events: list[Event] = []
        for event in rt.chat(ASK, SamplingParams(max_tokens=2000, temperature=0.0), tools=MUST_CALL, cancel=cancel):
            events.append(event)
            if isinstance(event, ToolCallWriting) and event.arguments.count("the") >= 20:
                cancel.set()
    done = events[-1]
    assert isinstance(done, Finished) and done.reason == "cancelled" and done.text == ""
    (call,) = done.tool_calls
    assert isinstance(call, CutShort) and call.error == CUT_SHORT
    assert call.call.name == "git_status" and call.call.raw.startswith("<tool_call>") and " the the" in call.call.raw


@pytest.mark.parametrize(
    ("text", "preview"),
    [
        ("<tool_call>", CallPreview("", "")),
        ('<tool_call>\n{"name": "git_st', CallPreview("", "")),
        (
            '<tool_call>\n{"name": "git_status", "arguments": {"repo_path": "/tm',
            CallPreview("git_status", '{"repo_path": "/tm'),
        ),
        ('<tool_call>\n{"name": "a\\u00e9"', CallPreview("aé", "")),
        (
            "<tool_call>\n<function=git_log>\n<parameter=max_count>\n3",
            CallPreview("git_log", "<parameter=max_count>\n3"),
        ),
        ('{"name": "get_weather", "parameters": {"city": "Par', CallPreview("get_weather", '{"city": "Par')),
        ('<|python_tag|>brave_search.call(query="sea', CallPreview("brave_search", 'query="sea')),
        ('[TOOL_CALLS][{"name": "now", "arguments": {', CallPreview("now", "{")),
        ('[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"', CallPreview("get_weather", '{"city": "Oslo"')),
        (
            '<|channel|>commentary to=functions.git_status <|constrain|>json<|message|>{"repo',
            CallPreview("git_status", '{"repo'),
        ),
        ("<|channel|>commentary to=functions.git_st", CallPreview("git_st", "")),
    ],
)
def test_the_preview_reads_every_familys_call(text: str, preview: CallPreview) -> None:
    assert call_preview(text) == preview


@pytest.mark.parametrize(
    "call",
    [
        '<tool_call>\n{"name": "git_status", "arguments": {"repo_path": "/tmp/repo"}}\n</tool_call>',
        '<|channel|>commentary to=functions.git_status <|constrain|>json<|message|>{"repo_path": "/r"}<|call|>',
        '<|python_tag|>brave_search.call(query="sea")<|eom_id|>',
        "<tool_call>\n<function=git_log>\n<parameter=max_count>\n3\n</parameter>\n</function>\n</tool_call>",
    ],
)
def test_the_preview_holds_back_a_closing_tag_being_written(call: str) -> None:
    """Issue 28: a model that writes "</tool_call>" in pieces showed "writing a call to git_status…" with a
    raw "</tool" under it. At every length of the call's text, the arguments shown end in no piece of a
    closing tag, and grow only (nothing shown is taken back)."""
    shown = [call_preview(call[:n]).arguments for n in range(1, len(call) + 1)]
    for arguments in shown:
        assert not arguments.endswith(("<", "</", "</tool", "</tool_call", "<|", "<|ca", "<|call|", "<|eom_id")), (
            arguments
        )
    assert shown[-1] in call and shown[-1].rstrip().endswith((")", "}", "</function>")), shown[-1]
    grown = [a for a in shown if a]
    assert all(b.startswith(a) for a, b in itertools.pairwise(grown)), grown
