"""Attachments kept with messages: the file's content in a content-addressed blob under the data folder
(`attachments/ab/abcdef…`, one per sha256, shared by every message that attaches the same file), a row
in the chat database, and, for text, its passages indexed in FTS5 (bm25) for retrieval. What no message
refers to any more is removed by `prune`. Shares the chat store's connection and lock."""

from __future__ import annotations

import base64
import codecs
import contextlib
import json
import os
import re
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember_chat.engine.attachments.chunking import chunk_text
from ember_chat.engine.attachments.kinds import AttachmentKind, Extracted
from ember_chat.engine.attachments.turn_plan import PlannedAttachment, Source, TurnPlan
from ember_chat.engine.core.messages import AttachmentRef
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths

_STOP_WORDS = (
    "a an and are as at be by does did do for from has have how i in is it its of on or that the this to was "
    "were what when where which who why will with you your about into than then there these those can"
)
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class StoredAttachment:
    id: int
    sha256: str
    name: str
    kind: str
    mime: str
    size: int
    chars: int
    pages: int  # a PDF's page count, else 0

    @property
    def is_image(self) -> bool:
        return self.kind == AttachmentKind.IMAGE


@dataclass(frozen=True)
class ChunkHit:
    attachment_id: int
    seq: int
    page: int | None
    text: str
    rank: float  # bm25: lower is better


class AttachmentStore:
    def __init__(self, paths: AppPaths, store: ConversationStore) -> None:
        self.blob_dir = paths.data_dir / "attachments"
        self._db, self._lock = store.shared_connection()

    # ----- saving and reading
    def save(self, extracted: Extracted) -> StoredAttachment:
        """Keep an extracted file (the same file under the same name is stored once) and index its text."""
        existing = self._row("WHERE sha256 = ? AND name = ?", (extracted.sha256, extracted.name))
        if existing is not None:
            self._write_blob(extracted)  # a blob removed by hand comes back
            return existing
        self._write_blob(extracted)
        chunks = chunk_text(extracted.text, extracted.pages) if extracted.kind.is_text else []
        with self._tx():
            cur = self._db.execute(
                "INSERT INTO attachments (sha256, name, kind, mime, size, chars, pages, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    extracted.sha256,
                    extracted.name,
                    str(extracted.kind),
                    extracted.mime,
                    extracted.size,
                    len(extracted.text),
                    json.dumps(list(extracted.pages)),
                    time.time(),
                ),
            )
            att_id = int(cur.lastrowid or 0)
            self._db.executemany(
                "INSERT INTO attachment_chunks (attachment_id, seq, page, start, text) VALUES (?, ?, ?, ?, ?)",
                [(att_id, c.seq, c.page, c.start, c.text) for c in chunks],
            )
        return self.get(att_id)

    def get(self, attachment_id: int) -> StoredAttachment:
        att = self._row("WHERE id = ?", (attachment_id,))
        if att is None:
            raise AttachmentError("An attachment of this chat is no longer stored; attach the file again.")
        return att

    def blob_path(self, sha256: str) -> Path:
        return self.blob_dir / sha256[:2] / sha256

    def text(self, att: StoredAttachment) -> str:
        return self._read_blob(att).decode("utf-8")

    def image(self, att: StoredAttachment) -> bytes:
        return self._read_blob(att)

    def text_head(self, att: StoredAttachment, max_bytes: int) -> tuple[str, int]:
        """The start of a text attachment's stored text, at most `max_bytes` of it (a preview of a 50 MB
        file must not load it all), and the text's whole size in bytes. Read from Ember's own blob, named
        by the hash Ember computed: never from a path a chat file names. A character cut at the end is
        left out (the blob is UTF-8 written by `save`)."""
        path = self.blob_path(att.sha256)
        try:
            with path.open("rb") as f:
                total = os.fstat(f.fileno()).st_size
                head = f.read(max(0, max_bytes))
        except OSError:
            raise AttachmentError(f"{att.name} is missing from Ember's data folder; attach it again.") from None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(head, final=len(head) >= total), total

    def ref(self, att: StoredAttachment) -> AttachmentRef:
        return AttachmentRef(att.id, att.sha256, att.name, att.kind)

    # ----- messages
    def link(self, message_id: int, ids: Iterable[int]) -> None:
        """Keep these attachments with a message (in this order)."""
        with self._tx():
            self._db.executemany(
                "INSERT OR IGNORE INTO message_attachments (message_id, attachment_id, position) VALUES (?, ?, ?)",
                [(message_id, att_id, i) for i, att_id in enumerate(ids)],
            )

    def of_message(self, message_id: int) -> list[StoredAttachment]:
        return self.of_messages([message_id]).get(message_id, [])

    def of_messages(self, ids: Iterable[int]) -> dict[int, list[StoredAttachment]]:
        ids = list(ids)
        out: dict[int, list[StoredAttachment]] = {}
        for batch in _batches(ids):
            marks = ",".join("?" * len(batch))
            with self._lock:
                rows = self._db.execute(
                    f"SELECT ma.message_id, a.* FROM message_attachments ma JOIN attachments a "
                    f"ON a.id = ma.attachment_id WHERE ma.message_id IN ({marks}) ORDER BY ma.message_id, ma.position",
                    batch,
                ).fetchall()
            for row in rows:
                out.setdefault(row["message_id"], []).append(_stored(row))
        return out

    def prune(self) -> int:
        """Remove the attachments no message refers to (rows, passages and blobs no row shares)."""
        with self._tx():
            gone = self._db.execute(
                "SELECT id, sha256 FROM attachments WHERE id NOT IN (SELECT attachment_id FROM message_attachments)"
            ).fetchall()
            self._db.executemany("DELETE FROM attachments WHERE id = ?", [(r["id"],) for r in gone])
            kept = {r[0] for r in self._db.execute("SELECT DISTINCT sha256 FROM attachments")}
        for sha in {r["sha256"] for r in gone} - kept:
            with contextlib.suppress(FileNotFoundError):
                self.blob_path(sha).unlink()
        return len(gone)

    # ----- passages
    def chunk_count(self, attachment_id: int) -> int:
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM attachment_chunks WHERE attachment_id = ?", (attachment_id,))
            return int(row.fetchone()[0])

    def chunks(self, attachment_id: int, first: int = 0, limit: int = -1) -> list[ChunkHit]:
        """Passages in document order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT attachment_id, seq, page, text FROM attachment_chunks WHERE attachment_id = ? AND seq >= ? "
                "ORDER BY seq LIMIT ?",
                (attachment_id, first, limit),
            ).fetchall()
        return [ChunkHit(r[0], r[1], r[2], r[3], 0.0) for r in rows]

    def search(self, attachment_ids: Iterable[int], question: str, limit: int = 50) -> list[ChunkHit]:
        """The passages of these attachments that best match the question (bm25), best first."""
        ids = list(attachment_ids)
        query = fts_query(question)
        if not ids or not query:
            return []
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._db.execute(
                "SELECT c.attachment_id, c.seq, c.page, c.text, bm25(attachment_chunks_fts) AS rank "
                "FROM attachment_chunks_fts JOIN attachment_chunks c ON c.id = attachment_chunks_fts.rowid "
                f"WHERE attachment_chunks_fts MATCH ? AND c.attachment_id IN ({marks}) ORDER BY rank LIMIT ?",
                (query, *ids, limit),
            ).fetchall()
        return [ChunkHit(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    # ----- an answer's sources
    def record_sources(self, answer_id: int, plan: TurnPlan) -> None:
        data = {
            "items": [item.__dict__ for item in plan.items],
            "sources": [source.__dict__ for source in plan.sources],
        }
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO message_sources (answer_id, plan) VALUES (?, ?)", (answer_id, json.dumps(data))
            )

    def sources_of(self, answer_id: int) -> list[Source]:
        plan = self.plan_of(answer_id)
        return plan.sources if plan is not None else []

    def plan_of(self, answer_id: int) -> TurnPlan | None:
        """The plan an answer was made with (its items and sources; no prompt text), or None."""
        return self.plans_of([answer_id]).get(answer_id)

    def plans_of(self, answer_ids: Iterable[int]) -> dict[int, TurnPlan]:
        """The plans of those answers that have one, in one query per batch (a long chat shown)."""
        out: dict[int, TurnPlan] = {}
        for batch in _batches(list(answer_ids)):
            marks = ",".join("?" * len(batch))
            with self._lock:
                rows = self._db.execute(
                    f"SELECT answer_id, plan FROM message_sources WHERE answer_id IN ({marks})", batch
                ).fetchall()
            for answer_id, plan in rows:
                data = json.loads(plan)
                out[answer_id] = TurnPlan(
                    [PlannedAttachment(**item) for item in data.get("items", [])],
                    [Source(**source) for source in data.get("sources", [])],
                    "",
                )
        return out

    # ----- export
    def export_entries(self, message_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
        """Per message, its attachments for a JSON export: the text of text kinds, base64 of images."""
        out: dict[int, list[dict[str, Any]]] = {}
        for message_id, atts in self.of_messages(message_ids).items():
            for att in atts:
                entry: dict[str, Any] = {"name": att.name, "kind": att.kind, "mime": att.mime, "size": att.size}
                entry["sha256"] = att.sha256
                try:
                    if att.is_image:
                        entry["data_base64"] = base64.b64encode(self.image(att)).decode("ascii")
                    else:
                        entry["text"] = self.text(att)
                except AttachmentError as exc:
                    entry["missing"] = str(exc)
                out.setdefault(message_id, []).append(entry)
        return out

    # ----- internals
    def _row(self, where: str, args: tuple[Any, ...]) -> StoredAttachment | None:
        with self._lock:
            row = self._db.execute(f"SELECT * FROM attachments {where}", args).fetchone()
        return _stored(row) if row is not None else None

    def _write_blob(self, extracted: Extracted) -> None:
        path = self.blob_path(extracted.sha256)
        if path.exists():
            return
        content = extracted.image if extracted.kind is AttachmentKind.IMAGE else extracted.text.encode("utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(content or b"")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _read_blob(self, att: StoredAttachment) -> bytes:
        try:
            return self.blob_path(att.sha256).read_bytes()
        except OSError:
            raise AttachmentError(f"{att.name} is missing from Ember's data folder; attach it again.") from None

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        with self._lock:
            own = not self._db.in_transaction
            if own:
                self._db.execute("BEGIN")
            try:
                yield
            except BaseException:
                if own and self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            if own and self._db.in_transaction:
                self._db.execute("COMMIT")


def question_words(question: str) -> list[str]:
    """The words of a question a search looks for: lower case, once each, stop words and letters left out."""
    return list(dict.fromkeys(w for w in re.findall(r"\w+", question.lower()) if len(w) > 1 and w not in _STOP))


def fts_query(question: str | Sequence[str]) -> str:
    """An FTS5 query matching any of the question's words (quoted: no FTS5 syntax gets through); a
    sequence: those words (question_words' of a question)."""
    words = question_words(question) if isinstance(question, str) else question
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def _stored(row: sqlite3.Row) -> StoredAttachment:
    pages = json.loads(row["pages"] or "[]")
    return StoredAttachment(
        row["id"], row["sha256"], row["name"], row["kind"], row["mime"], row["size"], row["chars"], len(pages)
    )


def _batches(ids: list[int], size: int = 500) -> Iterator[list[int]]:
    for i in range(0, len(ids), size):
        yield ids[i : i + size]


@contextlib.contextmanager
def temporary_store(prefix: str) -> Iterator[AttachmentStore]:
    """An attachment store for one run or one API request, in a temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        chats = ConversationStore(Path(folder) / "chats.sqlite3")
        try:
            yield AttachmentStore(AppPaths(Path(folder), Path(folder)), chats)
        finally:
            chats.close()


__all__ = ["AttachmentStore", "ChunkHit", "StoredAttachment", "fts_query", "question_words", "temporary_store"]
