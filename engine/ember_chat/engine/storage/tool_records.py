"""Tool calls kept with the chat (schema 4): an assistant message's calls as the model wrote them (JSON
in `messages.tool_calls`; an invalid call with the error that kept it from running), the tool messages
that answer them (`tool_messages`: the call's id, its state, the result and JSON meta: name, source,
decision, duration_ms, is_error), and a chat's tool choices (`conversations.tools`: ChatTools as JSON
{"enabled", "always", "require_call"}; a value without "require_call" reads False).

A tool message's state: "asking" (its consent card waits), "running", "done" (its result is kept), or
"interrupted" (Ember closed while it waited or ran: set when the store is opened again)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ember_chat.engine.core.tools import ChatTools, InvalidCall, ToolCall, ToolResult

STATES = ("asking", "running", "done", "interrupted")
NOT_RUN = (
    "This call did not finish: the answer was stopped, or Ember closed, before it ran or while it ran "
    "(its result, if any, is unknown)."
)
_IN_CHUNK = 500  # ids per query


@dataclass(frozen=True)
class ToolMessage:
    """A stored tool message: the result (or state) of one call of an assistant message."""

    call_id: str
    name: str
    content: str
    state: str = "done"
    source: str | None = None  # "Built-in" or the MCP server's name
    decision: str | None = None  # "once", "always", "deny", "auto" (never asked), None (it could not run)
    duration_ms: float | None = None
    is_error: bool = False

    def result(self) -> ToolResult:
        """What goes back to the model: the result, or that it was not run."""
        if self.state != "done":
            return ToolResult(self.call_id, self.name, NOT_RUN, is_error=True)
        return ToolResult(self.call_id, self.name, self.content, self.is_error, self.duration_ms)


def call_record(call: ToolCall | InvalidCall) -> dict[str, Any]:
    """A call as stored (and exported): id, name, arguments, raw, and `error` for an invalid one."""
    c = call.call if isinstance(call, InvalidCall) else call
    out: dict[str, Any] = {"id": c.id, "name": c.name, "arguments": c.arguments, "raw": c.raw}
    if isinstance(call, InvalidCall):
        out["error"] = call.error
    return out


def calls_json(calls: Sequence[ToolCall | InvalidCall]) -> str:
    return json.dumps([call_record(c) for c in calls], ensure_ascii=False)


def calls_from_json(text: object) -> tuple[ToolCall | InvalidCall, ...]:
    """The stored calls; a damaged value reads as none, a damaged entry is left out."""
    if not isinstance(text, str) or not text:
        return ()
    try:
        items = json.loads(text)
    except ValueError:
        return ()
    out: list[ToolCall | InvalidCall] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(item.get("name"), str):
            continue
        arguments = item.get("arguments")
        raw = item.get("raw")
        call = ToolCall(
            item["id"],
            item["name"],
            arguments if isinstance(arguments, dict) else {},
            raw if isinstance(raw, str) else "",
        )
        error = item.get("error")
        out.append(InvalidCall(call, error) if isinstance(error, str) else call)
    return tuple(out)


def _meta(text: object) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {}


def _tool_message(row: sqlite3.Row) -> ToolMessage:
    meta = _meta(row["meta"])
    duration = meta.get("duration_ms")
    return ToolMessage(
        call_id=row["tool_call_id"],
        name=meta["name"] if isinstance(meta.get("name"), str) else "",
        content=row["content"] if isinstance(row["content"], str) else "",
        state=row["state"] if row["state"] in STATES else "interrupted",
        source=meta["source"] if isinstance(meta.get("source"), str) else None,
        decision=meta["decision"] if isinstance(meta.get("decision"), str) else None,
        duration_ms=float(duration) if isinstance(duration, int | float) and not isinstance(duration, bool) else None,
        is_error=meta.get("is_error") is True,
    )


class ToolRecords:
    """The tool tables of the chat database, on the store's connection and lock."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, clock: Callable[[], float]) -> None:
        self._db = db
        self._lock = lock
        self._clock = clock

    def set_calls(self, message_id: int, calls: Sequence[ToolCall | InvalidCall]) -> None:
        with self._lock:
            self._db.execute("UPDATE messages SET tool_calls = ? WHERE id = ?", (calls_json(calls), message_id))

    def _put(self, message_id: int, call_id: str, state: str, content: str | None, meta: dict[str, Any]) -> None:
        """Insert or update one tool message; meta values that are None keep what was stored."""
        if state not in STATES:
            raise ValueError(f"unknown tool message state {state!r}")
        with self._lock:
            row = self._db.execute(
                "SELECT content, meta FROM tool_messages WHERE message_id = ? AND tool_call_id = ?",
                (message_id, call_id),
            ).fetchone()
            kept = _meta(row["meta"]) if row is not None else {}
            kept.update({k: v for k, v in meta.items() if v is not None})
            text = content if content is not None else (row["content"] if row is not None else "")
            self._db.execute(
                "INSERT INTO tool_messages (message_id, tool_call_id, state, content, meta, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (message_id, tool_call_id) DO UPDATE SET"
                " state = excluded.state, content = excluded.content, meta = excluded.meta",
                (message_id, call_id, state, text, json.dumps(kept, ensure_ascii=False), self._clock()),
            )

    def set_state(
        self, message_id: int, call_id: str, name: str, state: str, source: str | None, decision: str | None
    ) -> None:
        self._put(message_id, call_id, state, None, {"name": name, "source": source, "decision": decision})

    def set_result(self, message_id: int, result: ToolResult, source: str | None, decision: str | None) -> None:
        meta = {
            "name": result.name,
            "source": source,
            "decision": decision,
            "duration_ms": result.duration_ms,
            "is_error": result.is_error,
        }
        self._put(message_id, result.call_id, "done", result.content, meta)

    def interrupt_waiting(self) -> None:
        """Calls left asking or running by an Ember that closed: they will never run."""
        with self._lock:
            self._db.execute("UPDATE tool_messages SET state = 'interrupted' WHERE state IN ('asking', 'running')")

    def of_conversation(self, conversation_id: int) -> dict[int, list[ToolMessage]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT t.* FROM tool_messages t JOIN messages m ON m.id = t.message_id"
                " WHERE m.conversation_id = ? ORDER BY t.id",
                (conversation_id,),
            ).fetchall()
        return _grouped(rows)

    def of_messages(self, message_ids: Sequence[int]) -> dict[int, list[ToolMessage]]:
        rows: list[sqlite3.Row] = []
        with self._lock:
            for i in range(0, len(message_ids), _IN_CHUNK):
                chunk = list(message_ids[i : i + _IN_CHUNK])
                marks = ", ".join("?" * len(chunk))
                rows += self._db.execute(
                    f"SELECT * FROM tool_messages WHERE message_id IN ({marks}) ORDER BY id", chunk
                ).fetchall()
        return _grouped(rows)

    def chat_tools(self, conversation_id: int) -> ChatTools:
        with self._lock:
            row = self._db.execute("SELECT tools FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        data = _meta(row["tools"])

        def keys(name: str) -> frozenset[str]:
            value = data.get(name)
            return frozenset(k for k in value if isinstance(k, str)) if isinstance(value, list) else frozenset()

        return ChatTools(keys("enabled"), keys("always"), data.get("require_call") is True, keys("servers"))

    def set_chat_tools(self, conversation_id: int, tools: ChatTools) -> None:
        value: dict[str, Any] = {"enabled": sorted(tools.enabled), "always": sorted(tools.always)}
        if tools.require_call:  # (absent: False, as stored before the choice existed)
            value["require_call"] = True
        if tools.servers:  # (absent: none, as stored before the "All" switch existed)
            value["servers"] = sorted(tools.servers)
        text = json.dumps(value, ensure_ascii=False)
        with self._lock:
            cur = self._db.execute("UPDATE conversations SET tools = ? WHERE id = ?", (text, conversation_id))
        if cur.rowcount == 0:
            raise KeyError(conversation_id)


def _grouped(rows: list[sqlite3.Row]) -> dict[int, list[ToolMessage]]:
    out: dict[int, list[ToolMessage]] = {}
    for row in rows:
        out.setdefault(row["message_id"], []).append(_tool_message(row))
    return out
