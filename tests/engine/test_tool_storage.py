"""Tool calls kept with the chat: an assistant's calls (invalid ones with their error), the tool
messages that answer them (with who decided and how long they ran), a chat's tool choices, what the
engine is given back, exports, and a schema-3 database that migrates."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ember_chat.engine.conversation.messages import with_tool_messages
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.tools import ChatTools, InvalidCall, ToolCall, ToolResult
from ember_chat.engine.storage import conversations as store_module
from ember_chat.engine.storage.conversations import SCHEMA_VERSION, ConversationStore
from ember_chat.engine.storage.export import chat_as_json, chat_as_markdown
from ember_chat.engine.storage.tool_records import ToolMessage

ADD = ToolCall("call00001", "calculator", {"expression": "2+3"}, '{"expression": "2+3"}')
BAD = InvalidCall(ToolCall("call00002", "calculator", {"expr": 1}, '{"expr": 1}'), "expression is required")


@pytest.fixture
def store(tmp_path: Path):
    s = ConversationStore(tmp_path / "chats.db")
    yield s
    s.close()


def _answer_with_calls(store: ConversationStore) -> tuple[int, int, int]:
    conv = store.create_conversation("sums")
    q = store.add_message(conv.id, "user", "What is 2+3?")
    a = store.add_message(conv.id, "assistant", "Let me compute.", parent_id=q.id)
    store.set_tool_calls(a.id, [ADD, BAD])
    store.set_tool_result(
        a.id, ToolResult(ADD.id, "calculator", "5", duration_ms=1.5), source="Built-in", decision="once"
    )
    store.set_tool_result(a.id, BAD.result(), source="Built-in", decision=None)
    final = store.add_message(conv.id, "assistant", "2+3 is 5.", parent_id=a.id)
    return conv.id, a.id, final.id


def test_calls_and_results_are_kept_with_the_answer(store: ConversationStore, tmp_path: Path) -> None:
    cid, aid, _ = _answer_with_calls(store)
    store.close()
    again = ConversationStore(tmp_path / "chats.db")  # read back from the file
    try:
        answer = again.message(aid)
        assert answer.tool_calls == (ADD, BAD)
        assert [
            (t.call_id, t.name, t.content, t.state, t.source, t.decision, t.is_error) for t in answer.tool_results
        ] == [
            ("call00001", "calculator", "5", "done", "Built-in", "once", False),
            ("call00002", "calculator", "Error: expression is required", "done", "Built-in", None, True),
        ]
        assert answer.tool_results[0].duration_ms == 1.5
        thread = again.thread(cid)
        assert [m.role for m in thread] == ["user", "assistant", "assistant"]
        assert thread[1].tool_calls == (ADD, BAD) and thread[1].tool_results == answer.tool_results
        assert thread[0].tool_calls == () and thread[0].tool_results == ()
    finally:
        again.close()


def test_a_result_replaces_the_calls_state(store: ConversationStore) -> None:
    _, aid, _ = _answer_with_calls(store)
    store.set_tool_state(aid, "call00003", "calculator", "asking", source="Built-in")
    assert store.message(aid).tool_results[-1].state == "asking"
    store.set_tool_state(aid, "call00003", "calculator", "running", source="Built-in", decision="always")
    store.set_tool_result(aid, ToolResult("call00003", "calculator", "9", duration_ms=2.0), source="Built-in")
    last = store.message(aid).tool_results[-1]
    assert (last.state, last.content, last.decision, last.duration_ms) == ("done", "9", "always", 2.0)
    assert len(store.message(aid).tool_results) == 3


def test_calls_left_waiting_when_ember_closed_are_interrupted_on_reopen(
    store: ConversationStore, tmp_path: Path
) -> None:
    _, aid, _ = _answer_with_calls(store)
    store.set_tool_state(aid, "call00003", "calculator", "asking", source="Built-in")
    store.set_tool_state(aid, "call00004", "calculator", "running", source="Built-in")
    store.close()
    again = ConversationStore(tmp_path / "chats.db")
    try:
        states = [t.state for t in again.message(aid).tool_results]
        assert states == ["done", "done", "interrupted", "interrupted"]
    finally:
        again.close()


def test_the_engine_gets_the_calls_and_tool_messages(store: ConversationStore) -> None:
    cid, aid, _ = _answer_with_calls(store)
    thread = store.thread(cid, aid)
    history = [ChatMessage(m.role, m.content) for m in thread]
    messages = with_tool_messages(thread, history)
    assert messages == [
        ChatMessage("user", "What is 2+3?"),
        ChatMessage("assistant", "Let me compute.", tool_calls=(ADD, BAD.call)),
        ChatMessage("tool", "5", tool_call_id="call00001"),
        ChatMessage("tool", "Error: expression is required", tool_call_id="call00002"),
    ]


def test_a_call_that_never_ran_goes_back_as_not_run(store: ConversationStore) -> None:
    conv = store.create_conversation()
    q = store.add_message(conv.id, "user", "go")
    a = store.add_message(conv.id, "assistant", "", parent_id=q.id)
    store.set_tool_calls(a.id, [ADD])
    store.set_tool_state(a.id, ADD.id, ADD.name, "asking")
    thread = store.thread(conv.id)
    (_, _, tool) = with_tool_messages(thread, [ChatMessage(m.role, m.content) for m in thread])
    assert tool.role == "tool" and tool.tool_call_id == ADD.id and "did not finish" in tool.content


def test_chat_tools_are_kept_per_chat(store: ConversationStore) -> None:
    a = store.create_conversation("a")
    b = store.create_conversation("b")
    assert store.chat_tools(a.id) == ChatTools()
    choice = ChatTools(frozenset({"Built-in/calculator", "files/read"}), frozenset({"Built-in/calculator"}))
    store.set_chat_tools(a.id, choice)
    assert store.chat_tools(a.id) == choice and store.chat_tools(b.id) == ChatTools()
    with pytest.raises(KeyError):
        store.chat_tools(999)


def test_deleting_the_answer_deletes_its_tool_messages(store: ConversationStore) -> None:
    cid, aid, _ = _answer_with_calls(store)
    store.delete_message(aid)
    db, lock = store.shared_connection()
    with lock:
        assert db.execute("SELECT count(*) FROM tool_messages").fetchone()[0] == 0
    store.delete_conversation(cid)


def test_export_includes_calls_and_results(store: ConversationStore) -> None:
    cid, _, _ = _answer_with_calls(store)
    conv, thread = store.conversation(cid), store.thread(cid)
    md = chat_as_markdown(conv, thread)
    assert "calculator" in md and '"expression": "2+3"' in md and "Result" in md and "5" in md
    assert "expression is required" in md and "Built-in" in md
    data = json.loads(chat_as_json(conv, thread))
    roles = [m["role"] for m in data["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    calls = data["messages"][1]["tool_calls"]
    assert calls[0] == {
        "id": "call00001",
        "type": "function",
        "function": {"name": "calculator", "arguments": '{"expression": "2+3"}'},
    }
    assert calls[1]["error"] == "expression is required"
    tool = data["messages"][2]
    assert tool["tool_call_id"] == "call00001" and tool["content"] == "5"
    assert tool["meta"] == {
        "name": "calculator",
        "source": "Built-in",
        "decision": "once",
        "duration_ms": 1.5,
        "is_error": False,
    }


def test_a_schema_3_database_migrates(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    db = sqlite3.connect(path)
    db.executescript("".join(store_module._MIGRATIONS[:3]) + "PRAGMA user_version=3;")
    db.execute("INSERT INTO conversations (id, title, created_at, updated_at) VALUES (1, 'old chat', 1, 1)")
    db.execute("INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES (1, 1, 'user', 'hi', 1)")
    db.execute(
        "INSERT INTO messages (id, conversation_id, parent_id, role, content, created_at)"
        " VALUES (2, 1, 1, 'assistant', 'hello', 1)"
    )
    db.commit()
    db.close()
    s = ConversationStore(path)
    try:
        assert s.schema_version == SCHEMA_VERSION == 7
        thread = s.thread(1, 2)
        assert [(m.role, m.content, m.tool_calls, m.tool_results) for m in thread] == [
            ("user", "hi", (), ()),
            ("assistant", "hello", (), ()),
        ]
        assert s.chat_tools(1) == ChatTools()
        s.set_tool_calls(2, [ADD])
        s.set_tool_result(2, ToolResult(ADD.id, ADD.name, "5"), source="Built-in", decision="once")
        assert s.message(2).tool_results[0] == ToolMessage(
            ADD.id, ADD.name, "5", "done", "Built-in", "once", None, False
        )
        assert s.search("hello")[0].message_id == 2  # the full-text index still works
    finally:
        s.close()


def test_damaged_tool_values_cost_only_themselves(store: ConversationStore) -> None:
    cid, aid, _ = _answer_with_calls(store)
    db, lock = store.shared_connection()
    with lock:
        db.execute("UPDATE messages SET tool_calls = 'not json' WHERE id = ?", (aid,))
        db.execute("UPDATE tool_messages SET meta = '[1' WHERE tool_call_id = 'call00001'")
        db.execute("UPDATE conversations SET tools = '{' WHERE id = ?", (cid,))
    answer = store.message(aid)
    assert answer.tool_calls == ()
    assert answer.tool_results[0].content == "5" and answer.tool_results[0].name == ""
    assert store.chat_tools(cid) == ChatTools()


def test_a_chats_must_call_choice_is_kept_and_old_values_read_without_it(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    s = ConversationStore(path)
    try:
        a = s.create_conversation("a").id
        b = s.create_conversation("b").id
        choice = ChatTools(frozenset({"Built-in/calculator"}), require_call=True)
        s.set_chat_tools(a, choice)
        s.set_chat_tools(b, ChatTools(frozenset({"Built-in/calculator"})))
        db, lock = s.shared_connection()
        with lock:  # a value stored before the choice existed
            db.execute("UPDATE conversations SET tools = ? WHERE id = ?", ('{"enabled": ["x/y"], "always": []}', b))
    finally:
        s.close()
    s = ConversationStore(path)  # the file, opened again
    try:
        assert s.chat_tools(a) == choice and s.chat_tools(a).require_call
        assert s.chat_tools(b) == ChatTools(frozenset({"x/y"})) and not s.chat_tools(b).require_call
        raw = sqlite3.connect(path)
        try:
            stored = json.loads(raw.execute("SELECT tools FROM conversations WHERE id = ?", (a,)).fetchone()[0])
        finally:
            raw.close()
        assert stored["require_call"] is True
    finally:
        s.close()
