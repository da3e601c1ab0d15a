"""Deleting a message and everything below it in its branch, kept aside so an undo puts the very same rows
back: the messages (same ids), their tool messages, attachment links and sources, the project knowledge
they were given, the comparisons asked from them (with their answers), the answers kept from them, and
the chat's active leaf as it was."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.rows import Row, free_ids, insert_rows, rows_where_in

# (table, column that names a deleted message)
_DEPENDENT = (
    ("tool_messages", "message_id"),
    ("message_attachments", "message_id"),
    ("message_sources", "answer_id"),
    ("answer_knowledge", "answer_id"),
    ("comparisons", "prompt_id"),
)


@dataclass(frozen=True)
class Deleted:
    conversation_id: int
    active_leaf: int | None
    updated_at: float
    rows: dict[str, list[Row]]  # table -> rows as they were
    kept: tuple[tuple[int, int], ...]  # (comparison answer id, the deleted message it was kept as)


def delete(db: sqlite3.Connection, message_id: int) -> Deleted:
    """Delete (inside the caller's transaction) and give back what went."""
    row = db.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    if row is None:
        raise StoreError("This message is no longer in the chat; it may have been deleted already.")
    cid, parent = row[0], row[1]
    conv = db.execute("SELECT active_leaf, updated_at FROM conversations WHERE id = ?", (cid,)).fetchone()
    ids = [
        r[0]
        for r in db.execute(
            "WITH RECURSIVE below(id) AS (SELECT ? UNION ALL SELECT m.id FROM messages m JOIN below b"
            " ON m.parent_id = b.id) SELECT id FROM below",
            (message_id,),
        )
    ]
    rows: dict[str, list[Row]] = {"messages": rows_where_in(db, "messages", "id", ids)}
    for table, column in _DEPENDENT:
        rows[table] = rows_where_in(db, table, column, ids)
    rows["comparison_answers"] = rows_where_in(
        db, "comparison_answers", "comparison_id", [c["id"] for c in rows["comparisons"]]
    )
    mine = {a["id"] for a in rows["comparison_answers"]}
    kept = tuple(
        (a["id"], a["kept_message_id"])
        for a in rows_where_in(db, "comparison_answers", "kept_message_id", ids)
        if a["id"] not in mine
    )
    db.execute("DELETE FROM messages WHERE id = ?", (message_id,))  # (what is below, and what refers, cascade)
    leaf = conv[0]
    if leaf is None or leaf in set(ids):
        leaf = _newest_leaf(db, cid, parent)
        db.execute("UPDATE conversations SET active_leaf = ? WHERE id = ?", (leaf, cid))
    return Deleted(cid, conv[0], conv[1], rows, kept)


# (table, id named by the deleted rows, required) -> that row's id now; None: it is gone (when not required)
IdsNow = Callable[[str, int, bool], int | None]


def put_back(db: sqlite3.Connection, deleted: Deleted, now: IdsNow) -> dict[str, dict[int, int]]:
    """Undo `delete` (inside the caller's transaction): the same rows with the same ids; a row whose id was
    given to a new one since (a message written after the delete) comes back with a new id, and what
    refers to it follows. A row outside the deleted ones they name (a parent, the active leaf, a kept
    answer) is named by `now`: by its id now. Returns the ids that changed ({table: {old: new}}).
    sqlite3.IntegrityError when the chat itself is gone."""
    rows = deleted.rows
    msg = free_ids(db, "messages", [r["id"] for r in rows["messages"]])
    own = {t: free_ids(db, t, [r["id"] for r in rows[t]]) for t in ("tool_messages", "comparisons")}
    own["comparison_answers"] = free_ids(db, "comparison_answers", [r["id"] for r in rows["comparison_answers"]])

    def message_now(old: int | None, required: bool = True) -> int | None:
        return None if old is None else msg[old] if old in msg else now("messages", old, required)

    for r in _parents_first(rows["messages"]):
        insert_rows(db, "messages", [{**r, "id": msg[r["id"]], "parent_id": message_now(r["parent_id"])}])
    insert_rows(db, "tool_messages", [{**r, "id": own["tool_messages"][r["id"]], "message_id": msg[r["message_id"]]}
                                      for r in rows["tool_messages"]])  # fmt: skip
    present = {r[0] for r in db.execute("SELECT id FROM attachments")}  # (a file removed since stays gone)
    links = [r for r in rows["message_attachments"] if r["attachment_id"] in present]
    insert_rows(db, "message_attachments", [{**r, "message_id": msg[r["message_id"]]} for r in links])
    insert_rows(db, "message_sources", [{**r, "answer_id": msg[r["answer_id"]]} for r in rows["message_sources"]])
    insert_rows(db, "answer_knowledge", [{**r, "answer_id": msg[r["answer_id"]]} for r in rows["answer_knowledge"]])
    insert_rows(db, "comparisons", [{**r, "id": own["comparisons"][r["id"]], "prompt_id": msg[r["prompt_id"]]}
                                    for r in rows["comparisons"]])  # fmt: skip
    insert_rows(
        db,
        "comparison_answers",
        [
            {
                **r,
                "id": own["comparison_answers"][r["id"]],
                "comparison_id": own["comparisons"][r["comparison_id"]],
                "kept_message_id": message_now(r["kept_message_id"], False),
            }
            for r in rows["comparison_answers"]
        ],
    )
    kept = [(msg[m], answer) for a, m in deleted.kept if (answer := now("comparison_answers", a, False)) is not None]
    # (an answer kept again since keeps its newer message)
    db.executemany("UPDATE comparison_answers SET kept_message_id = ? WHERE id = ? AND kept_message_id IS NULL", kept)
    leaf = message_now(deleted.active_leaf, False)
    gone = deleted.active_leaf is not None and leaf is None  # (that branch was deleted since: the leaf stays)
    db.execute(
        "UPDATE conversations SET active_leaf = CASE WHEN ? THEN active_leaf ELSE ? END, updated_at = ? WHERE id = ?",
        (gone, leaf, deleted.updated_at, deleted.conversation_id),
    )
    changed = {"messages": msg, **own}
    return {t: {o: n for o, n in ids.items() if o != n} for t, ids in changed.items()}


def deleted_ids(deleted: Deleted) -> dict[str, list[int]]:
    """The ids of the rows that went which other rows may name (messages, comparison answers)."""
    return {t: [r["id"] for r in deleted.rows[t]] for t in ("messages", "comparison_answers")}


def _parents_first(rows: list[Row]) -> list[Row]:
    ids = {r["id"] for r in rows}
    placed: set[int] = set()
    out: list[Row] = []
    pending = sorted(rows, key=lambda r: r["id"])
    while pending:
        later = []
        for r in pending:
            if r["parent_id"] in ids and r["parent_id"] not in placed:
                later.append(r)
            else:
                out.append(r)
                placed.add(r["id"])
        if len(later) == len(pending):  # (a loop cannot be stored: foreign keys refuse it)
            out.extend(later)
            break
        pending = later
    return out


def _newest_leaf(db: sqlite3.Connection, cid: int, parent: int | None) -> int | None:
    """The end of the newest branch left under `parent` (or under the newest root left)."""
    children: dict[int | None, list[int]] = {}
    for mid, pid in db.execute("SELECT id, parent_id FROM messages WHERE conversation_id = ?", (cid,)):
        children.setdefault(pid, []).append(mid)
    node = parent if parent is not None else max(children.get(None, []), default=None)
    while node is not None and node in children:
        node = max(children[node])
    return node
