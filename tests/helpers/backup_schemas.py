"""A chat database as an older Ember wrote it, for the backup and restore tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ember_chat.engine.storage.schema import _MIGRATIONS


def _schema_4_database(path: Path, chats: int = 2) -> None:
    """A database as Ember with schema 4 wrote it (its migrations, its columns), with chats in it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    for number, script in enumerate(_MIGRATIONS[:4]):
        db.executescript(f"BEGIN; {script} PRAGMA user_version={number + 1}; COMMIT;")
    for i in range(1, chats + 1):
        db.execute(
            "INSERT INTO conversations (id, title, created_at, updated_at, tools) VALUES (?, ?, 1.0, 2.0, NULL)",
            (i, f"Old chat {i}"),
        )
        db.execute(
            "INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES (?, ?, 'user', ?, 1.5)",
            (i, i, f"old question {i} about herons"),
        )
        db.execute("UPDATE conversations SET active_leaf = ? WHERE id = ?", (i, i))
    db.close()
