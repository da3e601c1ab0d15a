"""The layout of a project's knowledge index (index.py): its tables, its FORMAT, the tables each
connection makes for searching, and `upgrade`, which makes the tables of a new index or brings one of an
earlier layout to this one (an index of an older FORMAT emptied of its passages, its files left pending
for the indexer to read again; a newer one refused)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ember_chat.engine.errors import StoreError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('indexed', 'skipped', 'pending')),
    reason TEXT,
    reader_failed INTEGER NOT NULL DEFAULT 0,
    pages INTEGER NOT NULL DEFAULT 0,
    passages INTEGER NOT NULL DEFAULT 0,
    indexed_at REAL
);
CREATE INDEX IF NOT EXISTS files_source ON files(source_id);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    page INTEGER,
    text TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS passages_file ON passages(file_id, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(
    title, text, content='passages', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS passages_ai AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, title, text) VALUES (new.id, new.title, new.text);
END;
CREATE TRIGGER IF NOT EXISTS passages_ad AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, title, text) VALUES ('delete', old.id, old.title, old.text);
END;
CREATE TABLE IF NOT EXISTS vectors (
    passage_id INTEGER PRIMARY KEY REFERENCES passages(id) ON DELETE CASCADE,
    vec BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS unread_folders (
    source_id INTEGER NOT NULL,
    path TEXT NOT NULL,
    cause TEXT NOT NULL,
    reason TEXT NOT NULL,
    missing INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (source_id, path)
);
"""
# The layout of passages and their FTS5 table; an index of another format is emptied of its passages
# when opened and its files left pending (the indexer reads them again). 1: text only, unicode61;
# 2: a title column (file name and section heading) and porter stemming.
FORMAT = 2
# per connection: the question's words tokenised as the index tokenises (their stems), and the index's terms
QUESTION_TABLES = """
CREATE VIRTUAL TABLE IF NOT EXISTS temp.question_words USING fts5(word, tokenize='porter unicode61');
CREATE VIRTUAL TABLE IF NOT EXISTS temp.question_terms USING fts5vocab(temp, question_words, 'instance');
CREATE VIRTUAL TABLE IF NOT EXISTS temp.passage_terms USING fts5vocab(main, passages_fts, 'row');
"""
_OLD_LAYOUT = """
DROP TRIGGER IF EXISTS passages_ai;
DROP TRIGGER IF EXISTS passages_ad;
DROP TABLE IF EXISTS passages_fts;
DROP TABLE IF EXISTS vectors;
DROP TABLE IF EXISTS passages;
DELETE FROM meta WHERE key = 'dim';
UPDATE files SET state = 'pending', passages = 0 WHERE state = 'indexed';
"""
UNREAD_KEY = ["source_id", "path"]  # (a folder under two sources, nested, is said for each)
_TABLES = {"files", "passages", "passages_fts", "vectors", "meta", "passages_ai", "passages_ad", "unread_folders"}
# the generation moved (in the transaction of the write that changes passages or vectors)
BUMP = (
    "INSERT INTO meta (key, value) VALUES ('generation', '1') "
    "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
)
_READER_FAILED_SAID = (  # (ReaderFailed's sentences before the flag: the one-time marking in `upgrade`)
    "% could not be read: no process could start to read it%",
    "% could not be read: its reader crashed.",
    "% could not be read: the reader stopped unexpectedly.",
    "% was not read: Ember reads at most % at once for API requests, and other files kept % busy for %",
)


def upgrade(db: sqlite3.Connection, path: Path) -> None:
    """The schema made, or an index of an older FORMAT emptied of its passages (files left pending).
    An index of this FORMAT is only read (no write lock taken: opening never waits on the indexer)."""
    if _format_found(db) == FORMAT:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        has_files = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'files'").fetchone() is not None
        has_meta = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is not None
        row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() if has_meta else None
        found = int(row[0]) if row is not None else (1 if has_files else FORMAT)
        if found > FORMAT:
            raise StoreError(f"The project's knowledge index {path} was made by a newer Ember (format {found}).")
        if found < FORMAT:
            for statement in _OLD_LAYOUT.strip().split(";\n"):
                db.execute(statement.rstrip(";"))
        if _primary_key(db, "unread_folders") == ["path"]:  # (an index made while it was keyed by path
            db.execute("DROP TABLE unread_folders")  # alone: made again, empty; the next walk says it again)
        for statement in _statements(_SCHEMA):
            db.execute(statement)
        if "reader_failed" not in _columns(db, "files"):  # (an index made before skips said whose they were)
            db.execute("ALTER TABLE files ADD COLUMN reader_failed INTEGER NOT NULL DEFAULT 0")
            # Once, for the rows of that older Ember only: its skips for a cause not the file's are known
            # by their sentence (errors.ReaderFailed's, as attachments/isolated.py and reader_turns.py
            # say them), so they are tried again at the next start as the flag makes later ones. Nothing
            # else reads a reason's words: the flag says it from then on.
            db.execute(
                "UPDATE files SET reader_failed = 1 WHERE state = 'skipped' AND ("
                + " OR ".join("reason LIKE ?" for _ in _READER_FAILED_SAID)
                + ")",
                _READER_FAILED_SAID,
            )
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('format', ?)", (str(FORMAT),))
        db.execute(BUMP)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _format_found(db: sqlite3.Connection) -> int | None:
    """The FORMAT of a complete index of a known format (None: new, partly made or damaged: `_upgrade`
    makes it, in a write transaction)."""
    names = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master")}
    if not names >= _TABLES:
        return None
    if "reader_failed" not in _columns(db, "files") or _primary_key(db, "unread_folders") != UNREAD_KEY:
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    return int(row[0]) if row is not None else None


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")}


def _primary_key(db: sqlite3.Connection, table: str) -> list[str]:
    """The columns of `table`'s primary key, in its order ([]: none, or no such table)."""
    rows = sorted((int(r[5]), str(r[1])) for r in db.execute(f"PRAGMA table_info({table})") if int(r[5]))
    return [name for _, name in rows]


def _statements(script: str) -> list[str]:
    """The statements of a schema script (a trigger's body kept whole)."""
    statements, current = [], ""
    for line in script.strip().splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
