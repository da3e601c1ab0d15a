"""The chat store: conversations, messages (with branches and metrics) and full-text search, in SQLite.

WAL mode, a schema version in `PRAGMA user_version` with forward migrations, FTS5 kept in sync by
triggers. A streaming answer is written as it grows (`streaming.StreamingMessage`), so a killed process
loses at most about a second of it; such a message stays marked incomplete.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ember_chat.engine.core.tools import ChatTools, InvalidCall, ToolCall, ToolResult
from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.comparisons import Comparisons
from ember_chat.engine.storage.import_staging import purge_stale
from ember_chat.engine.storage.organise import TRASH_DAYS, Organiser
from ember_chat.engine.storage.records import (
    MATCH_END,
    MATCH_START,
    ChatRow,
    Conversation,
    Message,
    Restored,
    SearchHit,
    conversation_of,
    message_of,
)
from ember_chat.engine.storage.restore import restore_rows
from ember_chat.engine.storage.rows import batches
from ember_chat.engine.storage.schema import _MIGRATIONS, SCHEMA_VERSION, migrate
from ember_chat.engine.storage.titles import clean_title
from ember_chat.engine.storage.tool_records import ToolMessage, ToolRecords

__all__ = [
    "SCHEMA_VERSION",
    "TRASH_DAYS",
    "_MIGRATIONS",
    "ChatRow",
    "Conversation",
    "ConversationStore",
    "Message",
    "Restored",
    "SearchHit",
    "ToolMessage",
]


class ConversationStore:
    """One connection, serialised by a lock; safe to share between the GUI and engine threads."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"The chat database {self.path} cannot be opened: {exc}.") from exc
        try:
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA secure_delete=ON")  # freed pages are zeroed (privacy.py)
            self._migrate()
            self.tools = ToolRecords(self._db, self._lock, clock)  # the tool tables (tool_records.py)
            self.comparisons = Comparisons(self._db, self._lock, clock)  # comparisons.py
            self.organise = Organiser(self._db, self._lock, clock, self.path)  # folders, Trash, undo
            self._purge_old_trash()
            purge_stale(self._db, self._lock, clock())  # what an import killed midway left (import_staging.py)
            self.tools.interrupt_waiting()
        except (sqlite3.DatabaseError, StoreError) as exc:
            self._db.close()  # before anyone moves the file aside: Windows cannot move an open file
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"The chat database {self.path} cannot be opened: {exc}.") from exc

    def _purge_old_trash(self) -> None:
        """Housekeeping at open: a purge that cannot be done now (a full disk, another program writing)
        waits for the next open; it never keeps the chats from opening (nor gets a healthy file moved aside)."""
        try:
            self.organise.empty_trash(older_than_days=TRASH_DAYS)
        except sqlite3.Error as exc:
            logging.getLogger(__name__).warning("The Trash was not emptied of old chats at open: %s", exc)

    def close(self) -> None:
        """The privacy sweep first when messages were deleted (organise.py), then the connection closes."""
        with self._lock:
            try:
                self.organise.sweep_if_messages_were_deleted()
            except sqlite3.Error as exc:  # (never keeps the chats from closing; done at the next purge)
                logging.getLogger(__name__).warning("The chat database was not swept at close: %s", exc)
            self._db.close()

    def _migrate(self) -> None:
        migrate(self._db, self.path)

    def _tx(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    def shared_connection(self) -> tuple[sqlite3.Connection, threading.RLock]:
        """The connection and its lock, for a module that owns tables of this database (attachments)."""
        return self._db, self._lock

    def clock(self) -> float:
        """The time now, as this store writes it (a test's clock where one was given)."""
        return self._clock()

    def data_version(self, *, wait: bool = True) -> int | None:
        """SQLite's `PRAGMA data_version` of this connection: it changes when another connection (another
        process: `ember-chat chats import`, a second window) committed to the file, never for this
        store's own writes, so a window can notice chats changed elsewhere by reading it now and then.
        `wait` False: None at once when another thread holds the store (an import's batch) instead of
        waiting for it (the GUI thread asks again later)."""
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])
        finally:
            self._lock.release()

    def integrity_problem(self) -> str | None:
        """SQLite's quick check (every page readable, b-trees well formed): None when all is well."""
        try:
            with self._lock:
                result = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            return str(exc)
        return None if result == "ok" else str(result)

    @property
    def schema_version(self) -> int:
        with self._lock:
            return self._db.execute("PRAGMA user_version").fetchone()[0]

    # ----- conversations
    def create_conversation(
        self,
        title: str = "New chat",
        model: str | None = None,
        system_prompt: str = "",
        params: dict[str, Any] | None = None,
    ) -> Conversation:
        now = self._clock()
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO conversations (title, model, system_prompt, params, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (clean_title(title), model, system_prompt, json.dumps(params or {}), now, now),
            )
            return self.conversation(int(cur.lastrowid or 0))

    def conversation(self, conversation_id: int) -> Conversation:
        with self._lock:
            row = self._db.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return conversation_of(row)

    def conversations(self, *, archived: bool = False) -> list[Conversation]:
        """Newest activity first; never those in the Trash; the archived ones only (`archived=True`) or
        none of them."""
        where = "archived_at IS NOT NULL" if archived else "archived_at IS NULL"
        with self._lock:
            rows = self._db.execute(
                f"SELECT * FROM conversations WHERE deleted_at IS NULL AND {where} ORDER BY updated_at DESC, id DESC"
            ).fetchall()
        return [conversation_of(r) for r in rows]

    def chat_rows(self, ids: Iterable[int] | None = None) -> list[ChatRow]:
        """The chats `conversations()` lists (neither archived nor in the Trash), newest activity first, as
        the chat list needs them: the columns it shows only. `ids`: only these (those listed of them)."""
        query = (
            "SELECT id, title, folder_id, pinned, archived_at, updated_at FROM conversations"
            " WHERE deleted_at IS NULL AND archived_at IS NULL"
        )
        order = " ORDER BY updated_at DESC, id DESC"
        with self._lock:
            cursor = self._db.cursor()
            cursor.row_factory = None  # plain tuples, each dropped as its ChatRow is made (no sqlite3.Row)
            if ids is None:
                found = cursor.execute(query + order)
                return [ChatRow(i, clean_title(t), f, bool(p), a, u) for i, t, f, p, a, u in found]
            rows: list[ChatRow] = []
            for batch in batches(ids):
                marks = ",".join("?" * len(batch))
                found = cursor.execute(f"{query} AND id IN ({marks})", batch)
                rows += [ChatRow(i, clean_title(t), f, bool(p), a, u) for i, t, f, p, a, u in found]
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return rows

    def archived_count(self) -> int:
        """How many chats the Archived list shows."""
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*) FROM conversations WHERE deleted_at IS NULL AND archived_at IS NOT NULL"
            ).fetchone()
        return int(row[0])

    def message_counts(self) -> dict[int, int]:
        """How many messages each chat has (all branches), by chat id; a chat without any is left out."""
        with self._lock:
            rows = self._db.execute(  # (not an import's chats until it shows them: import_staging.py)
                "SELECT conversation_id, COUNT(*) FROM messages WHERE conversation_id NOT IN"
                " (SELECT id FROM conversations WHERE deleted_at < 0) GROUP BY conversation_id"
            )
            return {r[0]: r[1] for r in rows}

    def update_conversation(self, conversation_id: int, **changes: Any) -> Conversation:
        allowed = {"title", "model", "system_prompt", "params", "active_leaf"}
        if not changes.keys() <= allowed:
            raise ValueError(f"cannot update {sorted(set(changes) - allowed)}")
        if "params" in changes:
            changes["params"] = json.dumps(changes["params"])
        if "title" in changes:
            changes["title"] = clean_title(changes["title"])
        cols = ", ".join(f"{k} = ?" for k in changes)
        with self._lock:
            self._db.execute(
                f"UPDATE conversations SET {cols}, updated_at = ? WHERE id = ?",
                (*changes.values(), self._clock(), conversation_id),
            )
        return self.conversation(conversation_id)

    def restore(self, conversations: list[dict[str, Any]], messages: list[dict[str, Any]]) -> Restored:
        """Copy rows read from a damaged database, keeping their ids (see restore.restore_rows)."""
        return restore_rows(self._db, self._tx(), self._clock(), conversations, messages)

    def delete_conversation(self, conversation_id: int) -> None:
        with self._tx():
            self._db.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))
            self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    # ----- messages
    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        parent_id: int | None = None,
        metrics: dict[str, Any] | None = None,
        complete: bool = True,
    ) -> Message:
        now = self._clock()
        with self._tx():
            cur = self._db.execute(
                "INSERT INTO messages (conversation_id, parent_id, role, content, metrics, complete,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    parent_id,
                    role,
                    content,
                    json.dumps(metrics) if metrics is not None else None,
                    int(complete),
                    now,
                ),
            )
            mid = int(cur.lastrowid or 0)
            self._db.execute(
                "UPDATE conversations SET updated_at = ?, active_leaf = ? WHERE id = ?",
                (now, mid, conversation_id),
            )
        return self.message(mid)

    def update_message(
        self,
        message_id: int,
        content: str,
        metrics: dict[str, Any] | None = None,
        complete: bool | None = None,
    ) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE messages SET content = ?, metrics = COALESCE(?, metrics),"
                " complete = COALESCE(?, complete) WHERE id = ?",
                (
                    content,
                    json.dumps(metrics) if metrics is not None else None,
                    None if complete is None else int(complete),
                    message_id,
                ),
            )

    def delete_message(self, message_id: int) -> None:
        """Delete a message and everything below it in its branch."""
        with self._lock:
            self._db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    def message(self, message_id: int) -> Message:
        with self._lock:
            row = self._db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            results = self.tools.of_messages([message_id]) if row is not None and row["tool_calls"] else {}
        if row is None:
            raise KeyError(message_id)
        return message_of(row, results.get(message_id))

    def messages(self, conversation_id: int) -> list[Message]:
        """Every message of a conversation, all branches, oldest first (an answer with its tool calls and
        the tool messages answering them)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
            ).fetchall()
            results = self.tools.of_conversation(conversation_id) if any(r["tool_calls"] for r in rows) else {}
        return [message_of(r, results.get(r["id"])) for r in rows]

    def thread(self, conversation_id: int, leaf_id: int | None = None) -> list[Message]:
        """The branch ending at `leaf_id` (default: the conversation's active leaf), root first."""
        return self.thread_with_branches(conversation_id, leaf_id)[0]

    def thread_with_branches(
        self, conversation_id: int, leaf_id: int | None = None
    ) -> tuple[list[Message], dict[int, tuple[int, int]]]:
        """The branch (as `thread`) and, for each of its messages that has alternatives, its place
        among them: {message id: (position from 1, count)}. One query for the whole conversation."""
        messages = self.messages(conversation_id)
        by_id = {m.id: m for m in messages}
        if leaf_id is None:
            leaf_id = self.conversation(conversation_id).active_leaf
        out: list[Message] = []
        node = by_id.get(leaf_id) if leaf_id is not None else None
        while node is not None:
            out.append(node)
            node = by_id.get(node.parent_id) if node.parent_id is not None else None
        alternatives: dict[tuple[int | None, str], list[int]] = {}
        for m in messages:  # oldest first, as `siblings`
            alternatives.setdefault((m.parent_id, m.role), []).append(m.id)
        branches = {}
        for m in out:
            ids = alternatives[(m.parent_id, m.role)]
            if len(ids) > 1:
                branches[m.id] = (ids.index(m.id) + 1, len(ids))
        return out[::-1], branches

    def newest_leaf(self, message_id: int) -> int:
        """The end of the newest branch below a message (the message itself if it has no replies)."""
        children: dict[int, list[int]] = {}
        for m in self.messages(self.message(message_id).conversation_id):
            if m.parent_id is not None:
                children.setdefault(m.parent_id, []).append(m.id)
        node = message_id
        while node in children:
            node = max(children[node])
        return node

    def siblings(self, message_id: int) -> list[Message]:
        """The alternatives for a message (same parent and role), oldest first, itself included."""
        m = self.message(message_id)
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM messages WHERE conversation_id = ? AND parent_id IS ? AND role = ? ORDER BY id",
                (m.conversation_id, m.parent_id, m.role),
            ).fetchall()
            results = self.tools.of_messages([r["id"] for r in rows if r["tool_calls"]])
        return [message_of(r, results.get(r["id"])) for r in rows]

    # ----- tools (tool_records.py)
    def set_tool_calls(self, message_id: int, calls: Sequence[ToolCall | InvalidCall]) -> None:
        """The calls an answer made, as the model wrote them (an invalid one with its error)."""
        self.tools.set_calls(message_id, calls)

    def set_tool_state(
        self,
        message_id: int,
        call_id: str,
        name: str,
        state: str,
        source: str | None = None,
        decision: str | None = None,
    ) -> None:
        """A call of answer `message_id` waits for consent ("asking") or runs ("running")."""
        self.tools.set_state(message_id, call_id, name, state, source, decision)

    def set_tool_result(
        self, message_id: int, result: ToolResult, source: str | None = None, decision: str | None = None
    ) -> None:
        """A call's result (or its error, or that it was denied): its tool message is done."""
        self.tools.set_result(message_id, result, source, decision)

    def chat_tools(self, conversation_id: int) -> ChatTools:
        """The chat's tool choices (none for a chat that never chose); KeyError for an unknown chat."""
        return self.tools.chat_tools(conversation_id)

    def set_chat_tools(self, conversation_id: int, tools: ChatTools) -> None:
        self.tools.set_chat_tools(conversation_id, tools)

    # ----- search
    def search(self, query: str, limit: int = 50, within: int | None = None) -> list[SearchHit]:
        """Full-text search across every chat (archived ones too; never the Trash); each word must match
        (prefixes allowed). `within`: only the chats in this folder and in its subfolders (a project's
        chats); None: every chat."""
        words = [w.replace('"', '""') for w in query.split()]
        if not words:
            return []
        fts_query = " ".join(f'"{w}"*' for w in words)
        scope = ""
        args: tuple[int, ...] = ()
        if within is not None:
            scope = " AND c.folder_id IN (SELECT id FROM folders WHERE id = ? OR parent_id = ?)"
            args = (within, within)  # (folders nest one level: a subfolder's parent is the folder)
        with self._lock:
            rows = self._db.execute(
                "SELECT m.conversation_id, c.title, m.id,"
                " snippet(messages_fts, 0, ?, ?, '…', 12) AS snip"
                " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
                " JOIN conversations c ON c.id = m.conversation_id"
                f" WHERE messages_fts MATCH ? AND c.deleted_at IS NULL{scope} ORDER BY rank LIMIT ?",
                (MATCH_START, MATCH_END, fts_query, *args, limit),
            ).fetchall()
        return [SearchHit(r[0], clean_title(r[1]), r[2], r[3]) for r in rows]


class _Transaction:
    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock

    def __enter__(self) -> None:
        self._lock.acquire()
        if not self._db.in_transaction:
            self._db.execute("BEGIN")

    def __exit__(self, exc_type: object, *_: object) -> None:
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self._lock.release()
