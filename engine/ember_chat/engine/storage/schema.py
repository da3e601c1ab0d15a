"""The chat database's schema: one migration per version (`PRAGMA user_version`), applied in order, each
in its own transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.backup_files import backup_before_migration

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
    # 4: tools (engine/storage/tool_records.py): an assistant's calls (JSON, an invalid one with its error),
    # the tool messages that answer them (their state while asked or running, the result, and who decided),
    # and a chat's tool choices (ChatTools as JSON)
    """
    ALTER TABLE messages ADD COLUMN tool_calls TEXT;
    ALTER TABLE conversations ADD COLUMN tools TEXT;
    CREATE TABLE tool_messages (
        id INTEGER PRIMARY KEY,
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        tool_call_id TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'done',
        content TEXT NOT NULL DEFAULT '',
        meta TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        UNIQUE (message_id, tool_call_id)
    );
    """,
    # 5: chats kept in order (organise.py: folders nested one level, pins, archive, the Trash) and model
    # comparisons kept with their chat (comparisons.py)
    """
    CREATE TABLE folders (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        parent_id INTEGER REFERENCES folders(id) ON DELETE CASCADE,
        position INTEGER NOT NULL DEFAULT 0,
        collapsed INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    ALTER TABLE conversations ADD COLUMN folder_id INTEGER REFERENCES folders(id) ON DELETE SET NULL;
    ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE conversations ADD COLUMN archived_at REAL;
    ALTER TABLE conversations ADD COLUMN deleted_at REAL;
    CREATE INDEX conversations_by_folder ON conversations(folder_id);
    CREATE INDEX conversations_by_update ON conversations(updated_at);
    CREATE TABLE comparisons (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        prompt_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
        settings TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    );
    CREATE INDEX comparisons_by_conversation ON comparisons(conversation_id);
    CREATE TABLE comparison_answers (
        id INTEGER PRIMARY KEY,
        comparison_id INTEGER NOT NULL REFERENCES comparisons(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        model TEXT NOT NULL,
        content TEXT NOT NULL DEFAULT '',
        metrics TEXT,
        error TEXT,
        kept_message_id INTEGER REFERENCES messages(id) ON DELETE SET NULL
    );
    CREATE INDEX comparison_answers_by_comparison ON comparison_answers(comparison_id, position);
    """,
    # 6: projects (engine/projects/records.py): a folder of the chat list made a project, with its
    # instructions and defaults, and its knowledge: files and folders on the user's disk, named by path
    # (never copied; `from_import`: came in with an imported chat, paused until the user confirms it)
    """
    CREATE TABLE projects (
        folder_id INTEGER PRIMARY KEY REFERENCES folders(id) ON DELETE CASCADE,
        icon TEXT NOT NULL DEFAULT '',
        instructions TEXT NOT NULL DEFAULT '',
        model TEXT,
        preset TEXT,
        tools TEXT NOT NULL DEFAULT '[]',
        context_length INTEGER,
        embedding_model TEXT,
        reranker TEXT,
        created_at REAL NOT NULL
    );
    CREATE TABLE project_sources (
        id INTEGER PRIMARY KEY,
        folder_id INTEGER NOT NULL REFERENCES projects(folder_id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('folder', 'file')),
        added_at REAL NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0,
        from_import INTEGER NOT NULL DEFAULT 0,
        UNIQUE (folder_id, path)
    );
    """,
    # 7: the knowledge an answer in a project was given (engine/projects/answers.py): passage `n` of its
    # block (the [n] it cites), the file, page and position it came from and its text as it was then (the
    # file may change or go; the answer's sources stay what it was given)
    """
    CREATE TABLE answer_knowledge (
        answer_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        n INTEGER NOT NULL,
        file_path TEXT NOT NULL,
        page INTEGER,
        seq INTEGER NOT NULL,
        passage_id INTEGER NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (answer_id, n)
    );
    """,
]

SCHEMA_VERSION = len(_MIGRATIONS)


def migrate(
    db: sqlite3.Connection,
    path: Path,
    before: Callable[[sqlite3.Connection, Path, int], object] | None = backup_before_migration,
) -> None:
    """Bring the database at `path` to SCHEMA_VERSION; a newer one is refused with a sentence.
    `before(db, path, version)` runs first when an existing database (version ≥ 1) is about to migrate:
    by default a backup is made (backup_files.py); None makes none (a restore migrating the backup it copied)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"The chat database {path} was written by a newer Ember (schema {version}); update Ember to open it."
        )
    if before is not None and 1 <= version < SCHEMA_VERSION:
        before(db, path, version)
    for number in range(version, SCHEMA_VERSION):
        try:
            db.executescript(f"BEGIN; {_MIGRATIONS[number]} PRAGMA user_version={number + 1}; COMMIT;")
        except sqlite3.DatabaseError:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
