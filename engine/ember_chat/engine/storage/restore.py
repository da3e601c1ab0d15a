"""Rows read from a damaged chat database copied into a fresh one (storage/recovery.py reads them)."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Any

from ember_chat.engine.storage.records import Restored, json_text, number_or_none, text_or_none
from ember_chat.engine.storage.tool_records import calls_from_json


def restore_rows(
    db: sqlite3.Connection,
    transaction: AbstractContextManager[None],
    now: float,
    conversations: list[dict[str, Any]],
    messages: list[dict[str, Any]],
) -> Restored:
    """Copy rows, keeping their ids. A row that does not fit (its chat is gone, a bad role) is left out;
    a bad value in a row that fits (params or metrics that are not a JSON object, a time that is not a
    number) is left empty or set to now, and counted. An answer's tool calls come along when readable
    (their results lived in another table, which is not read back)."""
    kept_conv: set[int] = set()
    kept_msg: set[int] = set()
    repaired = 0

    def fix(value: Any, good: Any) -> Any:
        """`good` (the value checked, None when it was bad), counting a bad one."""
        nonlocal repaired
        repaired += good is None and value not in (None, "")
        return good

    with transaction:
        for c in conversations:
            params = fix(c.get("params"), json_text(c.get("params")))
            try:
                db.execute(
                    "INSERT INTO conversations (id, title, model, system_prompt, params, created_at, updated_at,"
                    " active_leaf) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        int(c["id"]),
                        fix(c.get("title"), text_or_none(c.get("title"))) or "Recovered chat",
                        fix(c.get("model"), text_or_none(c.get("model"))),
                        fix(c.get("system_prompt"), text_or_none(c.get("system_prompt"))) or "",
                        params or "{}",
                        fix(c.get("created_at"), number_or_none(c.get("created_at"))) or now,
                        fix(c.get("updated_at"), number_or_none(c.get("updated_at"))) or now,
                        fix(
                            c.get("active_leaf"),
                            c.get("active_leaf") if type(c.get("active_leaf")) is int else None,
                        ),
                    ),
                )
                kept_conv.add(int(c["id"]))
            except (sqlite3.DatabaseError, TypeError, ValueError):
                continue
        for m in sorted(messages, key=lambda m: int(m["id"])):
            if m.get("conversation_id") not in kept_conv or m.get("role") not in ("system", "user", "assistant"):
                continue
            parent = m.get("parent_id") if m.get("parent_id") in kept_msg else None
            calls = m.get("tool_calls")
            try:
                db.execute(
                    "INSERT INTO messages (id, conversation_id, parent_id, role, content, metrics, complete,"
                    " created_at, tool_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        int(m["id"]),
                        m["conversation_id"],
                        parent,
                        m["role"],
                        fix(m.get("content"), text_or_none(m.get("content"))) or "",
                        fix(m.get("metrics"), json_text(m.get("metrics"))),
                        int(bool(m.get("complete", 1))),
                        fix(m.get("created_at"), number_or_none(m.get("created_at"))) or now,
                        calls if calls_from_json(calls) else None,
                    ),
                )
                kept_msg.add(int(m["id"]))
            except (sqlite3.DatabaseError, TypeError, ValueError):
                continue
        # a shown branch whose last message was lost: show the newest one instead
        db.execute("UPDATE conversations SET active_leaf = NULL WHERE active_leaf NOT IN (SELECT id FROM messages)")
    left_out = len(conversations) - len(kept_conv) + len(messages) - len(kept_msg)
    return Restored(len(kept_conv), len(kept_msg), repaired, left_out)
