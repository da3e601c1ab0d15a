"""A chat's tool session (engine/tools/session.py): which calls need the user's consent, what a
decision does, the cap on calls per answer, running a call on the tool it meant, and the messages
that give the results back to the model, rendered by real chat templates and continued by the real
runtime. Sources: the real BuiltinTools and tests/tool_sources.TextTools (real code)."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.tools import (
    ChatTools,
    InvalidCall,
    ToolCall,
    ToolRequest,
    ToolResult,
    tool_limit_message,
)
from ember_chat.engine.errors import InvalidParameter, ToolError
from ember_chat.engine.inference.events import Finished, Token, ToolCallParsed
from ember_chat.engine.inference.prompt.templates import BuiltinTemplate, JinjaTemplate, render_chat
from ember_chat.engine.tools.builtin import BuiltinTools
from ember_chat.engine.tools.registry import ToolRegistry
from ember_chat.engine.tools.session import ChatToolSession, Decision, PendingCall
from tests.helpers.runtime_support import loaded
from tests.helpers.tool_sources import TextTools
from tests.helpers.tool_templates import ENTRIES, HERE

ALL = frozenset(
    {"Built-in/calculator", "Built-in/current_datetime"}
    | {f"Text/{n}" for n in ("calculator", "word_count", "wait", "average")}
)


@pytest.fixture
def text(tmp_path: Path) -> TextTools:
    return TextTools("Text", tmp_path / "text.json").write("calculator", "word_count", "wait", "average")


@pytest.fixture
def registry(text: TextTools) -> ToolRegistry:
    registry = ToolRegistry([BuiltinTools(datetime=True, calculator=True), text])
    assert registry.refresh(5.0) == []
    return registry


def session_of(
    registry: ToolRegistry,
    enabled: frozenset[str] = ALL,
    always: frozenset[str] = frozenset(),
    never_ask: frozenset[str] = frozenset(),
    max_calls: int = 8,
) -> ChatToolSession:
    return ChatToolSession(registry, ChatTools(enabled, always), never_ask, max_calls)


def words(text: str, call_id: str = "w1") -> ToolCall:
    return ToolCall(call_id, "word_count", {"text": text})


def test_the_request_is_the_chats_tools(registry: ToolRegistry) -> None:
    session = session_of(registry, frozenset({"Text/word_count", "Built-in/calculator"}))
    assert [t.name for t in session.request().tools] == ["Built-in_calculator", "word_count"]
    assert session_of(registry, frozenset()).request() is None


def test_every_call_needs_consent_by_default(registry: ToolRegistry, text: TextTools) -> None:
    session = session_of(registry)
    [pending] = session.triage([words("one two three")])
    assert pending.needs_consent and pending.result is None and pending.decision is None
    assert pending.entry is registry.entry("Text/word_count")
    assert session.waiting(pending)
    with pytest.raises(ToolError, match="consent"):
        session.run(pending)  # never runs before the user said yes
    assert text.calls == []
    session.decide(pending, Decision.ONCE)
    assert not session.waiting(pending)
    result = session.run(pending)
    assert result == pending.result and result.content == "3" and not result.is_error
    assert session.chat.always == frozenset()  # once is only this call
    [again] = session.triage([words("a b", "w2")])
    assert again.needs_consent


def test_never_ask_and_always_skip_consent(registry: ToolRegistry) -> None:
    session = session_of(
        registry,
        always=frozenset({"Built-in/calculator"}),
        never_ask=frozenset({"Text/word_count", "Text/calculator"}),
    )
    asked = session.triage(
        [
            words("x y"),
            ToolCall("c1", "Built-in_calculator", {"expression": "6 * 7"}),
            ToolCall("c2", "Text_calculator", {"expression": "1 + 2"}),
        ]
    )
    assert [p.needs_consent for p in asked] == [False, False, True]  # never ask counts only for read-only tools
    assert [session.run(p).content for p in asked[:2]] == ["2", "42"]


def test_always_updates_the_chat(registry: ToolRegistry, text: TextTools) -> None:
    session = session_of(registry)
    first, second, other = session.triage(
        [words("a", "w1"), words("b c", "w2"), ToolCall("c1", "Built-in_calculator", {"expression": "1"})]
    )
    session.decide(first, Decision.ALWAYS)
    assert session.chat == ChatTools(ALL, frozenset({"Text/word_count"}))
    assert not session.waiting(second)  # the same tool in the same answer: no second question
    assert session.waiting(other)
    assert session.run(second).content == "2"
    [later] = session.triage([words("d", "w3")])
    assert not later.needs_consent


def test_deny_gives_the_denied_result_without_running(registry: ToolRegistry, text: TextTools) -> None:
    session = session_of(registry)
    [pending] = session.triage([words("secret words")])
    session.decide(pending, Decision.DENY)
    assert pending.decision is Decision.DENY
    assert pending.result == ToolResult("w1", "word_count", "The user denied this call.", is_error=True)
    assert session.run(pending) == pending.result
    assert text.calls == []
    assert session.chat.always == frozenset()
    with pytest.raises(InvalidParameter):
        session.decide(pending, Decision.ONCE)  # decided already


def test_an_invalid_call_never_runs(registry: ToolRegistry, text: TextTools) -> None:
    session = session_of(registry)
    invalid = InvalidCall(ToolCall("bad1", "word_count", {}, raw='{"txt": 1}'), "arguments lack required 'text'")
    [pending] = session.triage([invalid])
    assert not pending.needs_consent and pending.result == invalid.result() and pending.result.is_error
    assert pending.entry is registry.entry("Text/word_count")
    assert session.run(pending) == invalid.result()
    assert text.calls == []


def test_an_unknown_or_disabled_tool_never_runs(registry: ToolRegistry, text: TextTools) -> None:
    session = session_of(registry, frozenset({"Text/word_count"}))
    unknown, disabled = session.triage(
        [ToolCall("u1", "rm", {}), ToolCall("u2", "Text_calculator", {"expression": "1+1"})]
    )
    for pending in (unknown, disabled):
        assert not pending.needs_consent and pending.result.is_error
        assert "word_count" in pending.result.content  # says what it may call
        assert session.run(pending) is pending.result
    assert "'rm'" in unknown.result.content
    assert text.calls == []


def test_the_cap_ends_the_answer_and_over_cap_calls_do_not_run(registry: ToolRegistry, text: TextTools) -> None:
    session = session_of(registry, never_ask=frozenset({"Text/word_count"}), max_calls=3)
    first = session.triage([words("a", "1"), words("a b", "2")])
    assert not session.budget_spent
    second = session.triage([words("a b c", "3"), words("x", "4"), words("y", "5")])
    assert session.budget_spent
    assert session.limit_message() == tool_limit_message(3)
    ran = [session.run(p) for p in first + second]
    assert [r.content for r in ran[:3]] == ["1", "2", "3"]
    for over in second[1:]:
        assert not over.needs_consent and over.result.is_error
        assert over.result.content == tool_limit_message(3)
    assert [c.id for c in text.calls] == ["1", "2", "3"]  # the calls over the cap were not run
    [late] = session.triage([words("z", "6")])
    assert late.result.content == tool_limit_message(3)
    session.new_answer()  # a new user message: the budget starts again
    assert not session.budget_spent
    [fresh] = session.triage([words("z z", "7")])
    assert session.run(fresh).content == "2"


def test_run_calls_the_tool_it_meant_and_measures_it(registry: ToolRegistry, text: TextTools) -> None:
    session = session_of(registry, always=ALL)
    mine, theirs = session.triage(
        [
            ToolCall("b1", "Built-in_calculator", {"expression": "2 ** 10"}),
            ToolCall("t1", "Text_calculator", {"expression": "2 + 10"}),
        ]
    )
    assert session.run(mine).content == "1024"  # the built-in one
    result = session.run(theirs)
    assert result.content == "12.0" and result.name == "Text_calculator" and result.call_id == "t1"
    assert [c.name for c in text.calls] == ["calculator"]  # the source gets its own tool's name
    [slow] = session.triage([ToolCall("s1", "wait", {"seconds": 0.2})])
    waited = session.run(slow, threading.Event())
    assert waited.content == "waited" and waited.duration_ms >= 200
    assert mine.result.duration_ms is not None and mine.result.duration_ms < waited.duration_ms


def test_stop_reaches_a_running_call(registry: ToolRegistry) -> None:
    session = session_of(registry, always=ALL)
    [pending] = session.triage([ToolCall("s1", "wait", {"seconds": 30})])
    cancel = threading.Event()
    done = threading.Event()
    worker = threading.Thread(target=lambda: (session.run(pending, cancel), done.set()))
    worker.start()
    cancel.set()
    assert done.wait(5)
    worker.join()
    assert pending.result.is_error and pending.result.duration_ms < 5000
    [later] = session.triage([ToolCall("s2", "wait", {"seconds": 30})])
    stopped = threading.Event()
    stopped.set()
    assert session.run(later, stopped).is_error  # stopped before it started: it does not start


def test_a_tool_that_breaks_gives_an_error_result(registry: ToolRegistry, text: TextTools) -> None:
    session = session_of(registry, always=ALL)
    [pending] = session.triage([ToolCall("x1", "average", {"numbers": []})])  # its source has a bug there
    with pytest.raises(ZeroDivisionError):
        text.call(pending.call)
    result = session.run(pending)  # on a worker thread: it must come back as a result, never raise
    assert result.is_error and "average" in result.content and result.content.endswith(".")
    assert "ZeroDivisionError" not in result.content and result.duration_ms is not None
    [fine] = session.triage([ToolCall("x2", "average", {"numbers": [1, 2]})])
    assert session.run(fine).content == "1.5"


def template(name: str) -> JinjaTemplate:
    entry = ENTRIES[name]
    source = (HERE / entry["file"]).read_text(encoding="utf-8")
    return JinjaTemplate(source, entry["bos"], entry["eos"], clock=lambda: datetime(2026, 1, 15))


def answered(registry: ToolRegistry) -> tuple[ChatToolSession, list[PendingCall], list[ChatMessage]]:
    session = session_of(registry, never_ask=frozenset({"Text/word_count"}))
    pendings = session.triage(
        [
            words("the quick brown fox", "callA1234"),
            ToolCall("callB1234", "Built-in_calculator", {"expression": "6 * 7"}),
            InvalidCall(ToolCall("callC1234", "word_count", {}), "arguments lack required 'text'"),
            ToolCall("callD1234", "Text_calculator", {"expression": "1 + 1"}),
        ]
    )
    session.run(pendings[0])
    session.decide(pendings[1], Decision.ONCE)
    session.run(pendings[1])
    session.decide(pendings[3], Decision.DENY)
    asked = [ChatMessage("system", "Be brief."), ChatMessage("user", "Count and compute.")]
    return session, pendings, ChatToolSession.continuation(asked, "Let me check.", pendings)


def test_continuation_is_the_calls_then_their_results(registry: ToolRegistry) -> None:
    _, _, messages = answered(registry)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool", "tool", "tool"]
    assistant = messages[2]
    assert assistant.content == "Let me check."
    assert [c.id for c in assistant.tool_calls] == ["callA1234", "callB1234", "callC1234", "callD1234"]
    assert [c.name for c in assistant.tool_calls][:2] == ["word_count", "Built-in_calculator"]  # as the model wrote
    assert [(m.tool_call_id, m.content) for m in messages[3:]] == [
        ("callA1234", "4"),
        ("callB1234", "42"),
        ("callC1234", "Error: arguments lack required 'text'"),
        ("callD1234", "The user denied this call."),
    ]
    with pytest.raises(InvalidParameter, match="result"):
        ChatToolSession.continuation([], "", [PendingCall(words("x"), None, True)])  # not run yet


@pytest.mark.parametrize("name", ["qwen2.5", "llama-3.1", "mistral-nemo", "gpt-oss"])
def test_continuation_renders_in_real_templates(registry: ToolRegistry, name: str) -> None:
    session, _, messages = answered(registry)
    prompt, notice = render_chat(
        template(name), messages, BuiltinTemplate("chatml"), tools=list(session.request().tools)
    )
    assert notice is None
    for piece in ("the quick brown fox", "6 * 7", "42", "The user denied this call.", "lack required"):
        assert piece in prompt, piece
    assert "Built-in_calculator" in prompt and "Text_calculator" in prompt
    if name == "qwen2.5":
        assert "<tool_response>\n42\n</tool_response>" in prompt
        assert '{"name": "Built-in_calculator", "arguments": {"expression": "6 * 7"}}' in prompt


def test_the_loop_with_a_real_model(tiny_model: Path) -> None:
    """Template → forced call (grammar) → triage → consent → the built-in tool → continuation → the
    model answers again, with the real runtime and a tiny model."""
    registry = ToolRegistry([BuiltinTools(datetime=True)])
    assert registry.refresh(5.0) == []
    session = session_of(registry, frozenset({"Built-in/current_datetime"}))
    asked = [ChatMessage("user", "What time is it?")]
    params = SamplingParams(max_tokens=600, temperature=0.0)
    with loaded(tiny_model, n_ctx=2048) as rt:
        named = registry.request(session.chat.enabled, choice="Built-in/current_datetime")
        forced = ToolRequest(named.tools, named.choice, parallel=False)  # one call, then the answer ends
        events = list(rt.chat(asked, params, tools=forced))
        done = events[-1]
        assert isinstance(done, Finished) and done.reason == "tool_calls"
        calls = [e.call for e in events if isinstance(e, ToolCallParsed)]
        text = "".join(e.text for e in events if isinstance(e, Token))
        pendings = session.triage(calls)
        assert [p.needs_consent for p in pendings] == [True]
        session.decide(pendings[0], Decision.ONCE)
        result = session.run(pendings[0])
        assert not result.is_error and str(datetime.now().year) in result.content
        again = ChatToolSession.continuation(asked, text, pendings)
        follow = list(rt.chat(again, SamplingParams(max_tokens=16, temperature=0.0), tools=session.request()))
        assert isinstance(follow[-1], Finished)
        assert follow[-1].metrics.prompt_tokens > done.metrics.prompt_tokens  # the result went into the prompt


def test_with_real_mcp_servers_beside_the_built_in_tools() -> None:
    """The registry and a session over real stdio MCP servers (tests/mcp_servers, official SDK): one
    that cannot start costs one sentence; a read-only tool the user never wants to be asked about
    runs at once; the other asks first, then runs on its server."""
    from ember_chat.engine.tools.mcp_client import McpManager
    from tests.helpers.mcp_stdio import stdio

    manager = McpManager()
    try:
        manager.configure([stdio("notes", "normal.py"), stdio("broken", "crash.py", "--exit-at-start")])
        registry = ToolRegistry([BuiltinTools(calculator=True), *manager.servers()])
        problems = registry.refresh(20.0)
        assert len(problems) == 1 and "broken" in problems[0] and "settings.toml" in problems[0]
        keys = {e.key for e in registry.entries()}
        assert {"Built-in/calculator", "notes/add", "notes/read_note"} <= keys
        assert not any(k.startswith("broken/") for k in keys)
        session = session_of(
            registry,
            frozenset({"notes/add", "notes/read_note", "Built-in/calculator"}),
            never_ask=frozenset({"notes/read_note", "notes/add"}),  # add is not read-only: it still asks
        )
        note, add = session.triage(
            [ToolCall("n1", "read_note", {"key": "todo"}), ToolCall("a1", "add", {"a": 2, "b": 40})]
        )
        assert (note.needs_consent, add.needs_consent) == (False, True)
        assert session.run(note).content == "write tests"
        session.decide(add, Decision.ONCE)
        result = session.run(add, threading.Event())
        assert (result.content, result.is_error, result.call_id) == ("42", False, "a1")
        assert result.duration_ms is not None and result.duration_ms > 0
    finally:
        manager.close()


def test_must_call_asks_for_a_call_first_then_lets_the_model_answer(registry: ToolRegistry, text: TextTools) -> None:
    """A chat set to "the model must call a tool": the answer's first generation requires a call, the
    ones after the calls are "auto" (the model answers with the results); a new message requires again."""
    chat = ChatTools(frozenset({"Text/word_count"}), require_call=True)
    session = ChatToolSession(registry, chat, frozenset(), 8)
    first = session.request()
    assert first is not None and first.choice == "required" and first.forced
    assert not first.parallel  # one call (a base model held to calls would write them until its limit)
    assert [t.name for t in first.tools] == ["word_count"]
    pendings = session.triage([words("one two three")])
    session.decide(pendings[0], Decision.ONCE)
    session.run(pendings[0])
    after = session.request()
    assert after.choice == "auto" and after.parallel and after.tools == first.tools
    session.decide(session.triage([words("four", "w2")])[0], Decision.DENY)
    assert session.request().choice == "auto"
    session.new_answer()
    assert session.request().choice == "required"
    # "Always allow" keeps the choice with the chat
    pending = session.triage([words("five", "w3")])[0]
    session.decide(pending, Decision.ALWAYS)
    assert session.chat == ChatTools(chat.enabled, frozenset({"Text/word_count"}), require_call=True)
    # without it, every generation is "auto"
    plain = session_of(registry, frozenset({"Text/word_count"}))
    assert plain.request().choice == "auto"
    assert ChatTools(frozenset({"a/b"})) == ChatTools(frozenset({"a/b"}), require_call=False)
