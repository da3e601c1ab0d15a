"""The chat store: conversations, messages (with branches and metrics) and full-text search, in SQLite.

WAL mode, a schema version in `PRAGMA user_version` with forward migrations, FTS5 kept in sync by
triggers. A streaming answer is written as it grows (`streaming.StreamingMessage`), so a killed process
loses at most about a second of it; such a message stays marked incomplete.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ember_chat.engine.errors import StoreError

_MIGRATIONS: list[str] = [
    # 1: the initial schema
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL,
        model TEXT,
        system_prompt TEXT NOT NULL DEFAULT '',
        params TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
        content TEXT NOT NULL DEFAULT '',
        metrics TEXT,
        complete INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
    CREATE INDEX messages_by_parent ON messages(parent_id);
    CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');
    CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END;
    CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END;
    """,
    # 2: remember which branch of a conversation is shown
    "ALTER TABLE conversations ADD COLUMN active_leaf INTEGER;",
    # 3: attachments (engine/attachments/store.py): files kept with messages, their passages indexed for
    # retrieval, and the sources an answer used
    """
    CREATE TABLE attachments (
        id INTEGER PRIMARY KEY,
        sha256 TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        mime TEXT NOT NULL,
        size INTEGER NOT NULL,
        chars INTEGER NOT NULL DEFAULT 0,
        pages TEXT NOT NULL DEFAULT '[]',
        created_at REAL NOT NULL,
        UNIQUE (sha256, name)
    );
    CREATE TABLE attachment_chunks (
        id INTEGER PRIMARY KEY,
        attachment_id INTEGER NOT NULL REFERENCES attachments(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        page INTEGER,
        start INTEGER NOT NULL,
        text TEXT NOT NULL
    );
    CREATE INDEX attachment_chunks_by_attachment ON attachment_chunks(attachment_id, seq);
    CREATE VIRTUAL TABLE attachment_chunks_fts USING fts5(text, content='attachment_chunks', content_rowid='id');
    CREATE TRIGGER attachment_chunks_ai AFTER INSERT ON attachment_chunks BEGIN
        INSERT INTO attachment_chunks_fts(rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER attachment_chunks_ad AFTER DELETE ON attachment_chunks BEGIN
        INSERT INTO attachment_chunks_fts(attachment_chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    CREATE TABLE message_attachments (
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        attachment_id INTEGER NOT NULL REFERENCES attachments(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        PRIMARY KEY (message_id, attachment_id)
    );
    CREATE INDEX message_attachments_by_attachment ON message_attachments(attachment_id);
    CREATE TABLE message_sources (
        answer_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
        plan TEXT NOT NULL
    );
    """,
]
SCHEMA_VERSION = len(_MIGRATIONS)


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    model: str | None
    system_prompt: str
    params: dict[str, Any]
    created_at: float
    updated_at: float
    active_leaf: int | None


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    metrics: dict[str, Any] | None
    complete: bool
    created_at: float


class Restored(NamedTuple):
    """What `ConversationStore.restore` kept."""

    chats: int
    messages: int
    repaired_values: int  # bad values left empty (or set to now) in rows that were kept
    left_out: int  # rows that did not fit


@dataclass(frozen=True)
class SearchHit:
    conversation_id: int
    conversation_title: str
    message_id: int
    snippet: str


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
            self._migrate()
        except (sqlite3.DatabaseError, StoreError) as exc:
            self._db.close()  # before anyone moves the file aside: Windows cannot move an open file
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"The chat database {self.path} cannot be opened: {exc}.") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"The chat database {self.path} was written by a newer Ember (schema {version}); "
                "update Ember to open it."
            )
        for number in range(version, SCHEMA_VERSION):
            try:
                self._db.executescript(f"BEGIN; {_MIGRATIONS[number]} PRAGMA user_version={number + 1}; COMMIT;")
            except sqlite3.DatabaseError:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def _tx(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    def shared_connection(self) -> tuple[sqlite3.Connection, threading.RLock]:
        """The connection and its lock, for a module that owns tables of this database (attachments)."""
        return self._db, self._lock

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
                (title, model, system_prompt, json.dumps(params or {}), now, now),
            )
            return self.conversation(int(cur.lastrowid or 0))

    def conversation(self, conversation_id: int) -> Conversation:
        with self._lock:
            row = self._db.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return _conversation(row)

    def conversations(self) -> list[Conversation]:
        """Newest activity first."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM conversations ORDER BY updated_at DESC, id DESC").fetchall()
        return [_conversation(r) for r in rows]

    def update_conversation(self, conversation_id: int, **changes: Any) -> Conversation:
        allowed = {"title", "model", "system_prompt", "params", "active_leaf"}
        if not changes.keys() <= allowed:
            raise ValueError(f"cannot update {sorted(set(changes) - allowed)}")
        if "params" in changes:
            changes["params"] = json.dumps(changes["params"])
        cols = ", ".join(f"{k} = ?" for k in changes)
        with self._lock:
            self._db.execute(
                f"UPDATE conversations SET {cols}, updated_at = ? WHERE id = ?",
                (*changes.values(), self._clock(), conversation_id),
            )
        return self.conversation(conversation_id)

    def restore(self, conversations: list[dict[str, Any]], messages: list[dict[str, Any]]) -> Restored:
        """Copy rows read from a damaged database, keeping their ids. A row that does not fit (its chat
        is gone, a bad role) is left out; a bad value in a row that fits (params or metrics that are
        not a JSON object, a time that is not a number) is left empty or set to now, and counted."""
        now = self._clock()
        kept_conv: set[int] = set()
        kept_msg: set[int] = set()
        repaired = 0

        def fix(value: Any, good: Any) -> Any:
            """`good` (the value checked, None when it was bad), counting a bad one."""
            nonlocal repaired
            repaired += good is None and value not in (None, "")
            return good

        with self._tx():
            for c in conversations:
                params = fix(c.get("params"), _json_text(c.get("params")))
                try:
                    self._db.execute(
                        "INSERT INTO conversations (id, title, model, system_prompt, params, created_at, updated_at,"
                        " active_leaf) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            int(c["id"]),
                            fix(c.get("title"), _text(c.get("title"))) or "Recovered chat",
                            fix(c.get("model"), _text(c.get("model"))),
                            fix(c.get("system_prompt"), _text(c.get("system_prompt"))) or "",
                            params or "{}",
                            fix(c.get("created_at"), _number(c.get("created_at"))) or now,
                            fix(c.get("updated_at"), _number(c.get("updated_at"))) or now,
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
                try:
                    self._db.execute(
                        "INSERT INTO messages (id, conversation_id, parent_id, role, content, metrics, complete,"
                        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            int(m["id"]),
                            m["conversation_id"],
                            parent,
                            m["role"],
                            fix(m.get("content"), _text(m.get("content"))) or "",
                            fix(m.get("metrics"), _json_text(m.get("metrics"))),
                            int(bool(m.get("complete", 1))),
                            fix(m.get("created_at"), _number(m.get("created_at"))) or now,
                        ),
                    )
                    kept_msg.add(int(m["id"]))
                except (sqlite3.DatabaseError, TypeError, ValueError):
                    continue
            # a shown branch whose last message was lost: show the newest one instead
            self._db.execute(
                "UPDATE conversations SET active_leaf = NULL WHERE active_leaf NOT IN (SELECT id FROM messages)"
            )
        left_out = len(conversations) - len(kept_conv) + len(messages) - len(kept_msg)
        return Restored(len(kept_conv), len(kept_msg), repaired, left_out)

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
        if row is None:
            raise KeyError(message_id)
        return _message(row)

    def messages(self, conversation_id: int) -> list[Message]:
        """Every message of a conversation, all branches, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
            ).fetchall()
        return [_message(r) for r in rows]

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
        return [_message(r) for r in rows]

    # ----- search
    def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Full-text search across every chat; each word must match (prefixes allowed)."""
        words = [w.replace('"', '""') for w in query.split()]
        if not words:
            return []
        fts_query = " ".join(f'"{w}"*' for w in words)
        with self._lock:
            rows = self._db.execute(
                "SELECT m.conversation_id, c.title, m.id,"
                " snippet(messages_fts, 0, '[', ']', '…', 12) AS snip"
                " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
                " JOIN conversations c ON c.id = m.conversation_id"
                " WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?",
                (fts_query, limit),
            ).fetchall()
        return [SearchHit(r[0], r[1], r[2], r[3]) for r in rows]


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


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=row["id"],
        title=row["title"],
        model=row["model"],
        system_prompt=row["system_prompt"],
        params=_json_object(row["params"]) or {},
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        active_leaf=row["active_leaf"],
    )


def _message(row: sqlite3.Row) -> Message:
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        parent_id=row["parent_id"],
        role=row["role"],
        content=row["content"],
        metrics=_json_object(row["metrics"]),
        complete=bool(row["complete"]),
        created_at=row["created_at"],
    )


def _json_object(text: object) -> dict[str, Any] | None:
    """The JSON object stored as `text`; None when there is none or it is not one (a damaged value
    costs only itself, never the reading of its chat)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _json_text(value: object) -> str | None:
    """`value` if it is the JSON text of an object, else None."""
    return value if _json_object(value) is not None else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # (NaN)
        return None
    return float(value)
