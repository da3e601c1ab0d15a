"""Reading what an import left in a chat database and writing an export file, shared by the import tests."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path


def rows(path: Path) -> dict[str, int]:
    """Rows in the database file, read through a connection of its own."""
    db = sqlite3.connect(path)
    try:
        tables = ("conversations", "messages", "tool_messages", "attachments", "comparisons", "message_attachments")
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        db.close()


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path
