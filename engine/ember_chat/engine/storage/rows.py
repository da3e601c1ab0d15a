"""Small helpers for the store's modules that share its connection: a transaction under the store's lock,
and rows read as plain dicts and written back with the same ids (what an Undo keeps)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

Row = dict[str, Any]
_IN_CHUNK = 500  # ids per query (SQLite's limit on parameters is far above)


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, lock: threading.RLock) -> Iterator[None]:
    """One transaction (joined when one is open already): everything in it or nothing."""
    with lock:
        own = not db.in_transaction
        if own:
            db.execute("BEGIN")
        try:
            yield
        except BaseException:
            if own and db.in_transaction:
                db.execute("ROLLBACK")
            raise
        if own and db.in_transaction:
            db.execute("COMMIT")


def batches(ids: Iterable[int]) -> Iterator[list[int]]:
    items = list(ids)
    for i in range(0, len(items), _IN_CHUNK):
        yield items[i : i + _IN_CHUNK]


def rows_where_in(db: sqlite3.Connection, table: str, column: str, ids: Iterable[int]) -> list[Row]:
    """Every row of `table` whose `column` is one of `ids`, as dicts, by rowid."""
    out: list[Row] = []
    for batch in batches(ids):
        marks = ",".join("?" * len(batch))
        cur = db.execute(f"SELECT * FROM {table} WHERE {column} IN ({marks}) ORDER BY rowid", batch)
        names = [d[0] for d in cur.description]
        out.extend(dict(zip(names, r, strict=True)) for r in cur.fetchall())
    return out


def insert_rows(db: sqlite3.Connection, table: str, rows: Sequence[Row]) -> None:
    """Put rows back as they were read (their ids included)."""
    for row in rows:
        cols = ", ".join(row)
        marks = ", ".join("?" * len(row))
        db.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(row.values()))


def free_ids(db: sqlite3.Connection, table: str, old: Iterable[int]) -> dict[int, int]:
    """For rows going back into `table`: each old id kept where it is free, else a new one above every id
    in use or going back (a row added since the delete may have been given it)."""
    old = list(old)
    taken: set[int] = set()
    for batch in batches(old):
        marks = ",".join("?" * len(batch))
        taken.update(r[0] for r in db.execute(f"SELECT id FROM {table} WHERE id IN ({marks})", batch))
    top = max([db.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0], *old])
    out: dict[int, int] = {}
    for i in old:
        if i in taken:
            top += 1
            out[i] = top
        else:
            out[i] = i
    return out
