"""A project's knowledge index: one SQLite file per project (`knowledge_path`) holding each file of its
knowledge sources (indexed, skipped with the reason, or pending), the passages of the files read, an
FTS5 index of them (bm25) and, when the project has an embedding model, one L2-normalised float32
vector per passage. Vectors are kept for one model at a time (`meta`): an index built with one model is
never searched with another (`vectors_for` answers None, and the indexer embeds the passages again).

One connection, serialised by a lock: the indexer writes from its worker thread while a chat reads.
Paths and source ids are plain values (the project's records live in the chat database).

Every write that can change the passages or vectors bumps `meta`'s generation in its own transaction, so
any connection (the window opens one per answer, `ember-chat` another process) sees the index changed:
retrieval keeps a matrix of the vectors until it moves. Removed knowledge does not stay in the file:
secure_delete zeroes freed content, and after files are dropped the FTS5 index is merged (its deleted
terms gone) and the WAL checkpointed and truncated."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ember_chat.engine.attachments.chunking import Chunk
from ember_chat.engine.attachments.store import fts_query, question_words
from ember_chat.engine.errors import StoreError
from ember_chat.engine.projects.index_layout import BUMP, QUESTION_TABLES, upgrade
from ember_chat.engine.storage.paths import AppPaths

INDEXED, SKIPPED, PENDING = "indexed", "skipped", "pending"

TITLE_WEIGHT = 8.0  # bm25() weight of the title column against the text's 1 (bench/retrieval_projects)
# A section's first passage (the first under a heading: it says what the section is about, "'cut' writes
# to standard output selected parts of each line") ranks as if its bm25 score were this much better: a
# near-tie with a passage further into a section goes to the section's lead. A passage of a file without
# headings is no section's lead. Measured on bench/retrieval_projects, BM25 alone, recall@5 / recall@1:
# coreutils (30 questions) 0.733 / 0.233 -> 0.800 / 0.367 (boosts 0.1 / 0.2 / 0.3 / 0.5: 0.800 / 0.333,
# 0.767 / 0.433, 0.767 / 0.433, 0.700 / 0.533), the generated corpus (no headings) 1.000 / 0.770 both.
# Held out: tuned on the odd questions (0.2) the even ones went 0.667 / 0.200 -> 0.733 / 0.467; tuned on
# the even ones (0.1) the odd went 0.800 / 0.267 -> 0.800 / 0.333; 0.15 is between. Its risk: most of
# these questions ask what a command does, which a section's lead says; a question answered by one
# option further into a section can lose its place (one did: 'ls' sorting by time, 5th -> 9th).
LEAD_BOOST = 0.15
# A question's word found in more than this share of the passages is left out of the search when rarer
# words remain and it is in more than COMMON_MIN passages: its weight in bm25 is small (idf) but ranking
# every passage it is in is most of a search's time. Measured on bench/retrieval_projects' generated
# corpus at 100,000 passages, 400 questions: BM25's CPU time per search p95 45.7 ms -> 8.2 ms, recall@5
# 1.0 both; the generated (5,300) and coreutils (976 passages) sets are below COMMON_MIN (unchanged).
# A share of 0.05 of at least 5,000 passages was tried: 1.9 ms but recall@5 fell to 0.68.
COMMON_SHARE = 0.2
COMMON_MIN = 10_000  # passages: below it every word is searched (a small index is quick, and every word helps)


# What each source's last walk could not list, with the index's files kept under each folder: the folder
# itself, or a path after "folder/" and before "folder0" ('0' follows '/'; ']' follows '\\'), both looked up
# in the index of files.path (a condition on an expression of f.path, as substr(), read every file once
# for each folder: 100,000 files, 1,000 folders took 20 s, and it runs at each counts-only read).
# Parameters: os.sep, and the character after it.
UNREAD_QUERY = (
    "SELECT u.source_id, u.path, u.cause, u.reason, u.missing, COUNT(f.id), COALESCE(SUM(f.passages), 0) "
    "FROM unread_folders u LEFT JOIN files f "
    "ON (f.path = u.path OR (f.path > u.path || ?1 AND f.path < u.path || ?2)) "
    "GROUP BY u.source_id, u.path ORDER BY u.path, u.source_id"
)


def knowledge_path(paths: AppPaths, folder_id: int) -> Path:
    """Where the knowledge index of the project made of chat-list folder `folder_id` is kept."""
    return paths.data_dir / "projects" / f"{int(folder_id)}" / "knowledge.sqlite3"


@dataclass(frozen=True)
class IndexedFile:
    id: int
    source_id: int
    path: str
    size: int
    mtime_ns: int
    state: str  # INDEXED, SKIPPED or PENDING
    reason: str | None  # why a skipped file was not read: a sentence for the user
    reader_failed: bool  # skipped for a cause not the file's (errors.ReaderFailed): tried again at a later start
    pages: int  # a PDF's pages, else 0
    passages: int
    indexed_at: float | None


@dataclass(frozen=True)
class Passage:
    id: int
    file_id: int
    file_path: str
    seq: int  # 0-based position in its file
    page: int | None  # 1-based PDF page its text is on (chunking.page_spans)
    text: str


@dataclass(frozen=True)
class IndexCounts:
    files: int
    indexed: int
    skipped: int
    pending: int
    pages: int
    passages: int


@dataclass(frozen=True)
class UnreadFolder:
    """A source's path, or a folder in it, that its last walk could not list (a drive unplugged, permission
    denied, an I/O error): the files the index had under it are kept, not read again, until it can be."""

    source_id: int
    path: str
    cause: str  # the system's few words: "permission denied", "not there"
    reason: str  # the whole sentence, naming the path
    missing: bool  # not there at all
    files: int  # the index's files under it, kept
    passages: int  # ... and their passages


@dataclass(frozen=True)
class Vectors:
    """The index's vectors for one embedding model: row i of `matrix` is passage `passage_ids[i]`'s."""

    model_id: str
    passage_ids: np.ndarray  # int64, (n,)
    matrix: np.ndarray  # float32, (n, dim), rows L2-normalised


class KnowledgeIndex:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._passage_count: tuple[int, int] = (-1, 0)  # (generation, passages) for COMMON_SHARE
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise StoreError(f"The project's knowledge index {self.path} cannot be opened: {exc}.") from exc
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA secure_delete=ON")  # (removed passages' text zeroed, not left in free pages)
            upgrade(self._db, self.path)
            self._db.executescript(QUESTION_TABLES)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"The project's knowledge index {self.path} cannot be opened: {exc}.") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self, changes: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction; `changes`: it may change passages or vectors (the generation moves with it)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                if changes:
                    self._db.execute(BUMP)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def generation(self) -> int:
        """A number that moves with every change of the index's passages or vectors, made through this
        connection or any other (the indexer's, another process's: `ember-chat`): it is kept in the file.
        A matrix of its vectors loaded at one generation serves until it moves."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row is not None else 0

    # ----- files
    def files(self, source_id: int | None = None) -> list[IndexedFile]:
        where, args = ("WHERE source_id = ?", (source_id,)) if source_id is not None else ("", ())
        with self._lock:
            rows = self._db.execute(f"SELECT {_FILE_COLUMNS} FROM files {where} ORDER BY path", args).fetchall()
        return [_indexed_file(row) for row in rows]

    def file(self, path: str | Path) -> IndexedFile | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_FILE_COLUMNS} FROM files WHERE path = ?", (str(path),)).fetchone()
        return None if row is None else _indexed_file(row)

    def put_file(
        self,
        source_id: int,
        path: str | Path,
        size: int,
        mtime_ns: int,
        pages: int,
        passages: Sequence[Chunk],
        headings: Sequence[str] | None = None,
    ) -> int:
        """The file read: its row (new, or replacing a pending, skipped or older one) and its passages,
        the old ones (and their vectors) gone, in one transaction. Returns the file's id. `headings`:
        the section heading each passage is under (projects/headings.py), searched with the file's name
        as the passage's title."""
        if headings is not None and len(headings) != len(passages):
            raise ValueError(f"{len(passages)} passages but {len(headings)} headings")
        name = Path(path).name
        titles = [f"{name} {h}".strip() for h in headings] if headings is not None else [name] * len(passages)
        with self._tx() as db:
            file_id = self._upsert(db, source_id, str(path), size, mtime_ns, INDEXED, None, pages, len(passages))
            db.executemany(
                "INSERT INTO passages (file_id, seq, page, text, title) VALUES (?, ?, ?, ?, ?)",
                [(file_id, c.seq, c.page, c.text, title) for c, title in zip(passages, titles, strict=True)],
            )
        return file_id

    def skip_file(
        self, source_id: int, path: str | Path, size: int, mtime_ns: int, reason: str, reader_failed: bool = False
    ) -> int:
        """A file that could not be read, kept with the reason (and without passages) until it changes or
        is tried again (the indexer's `Retry`); `reader_failed`: for a cause not the file's own."""
        with self._tx() as db:
            return self._upsert(db, source_id, str(path), size, mtime_ns, SKIPPED, reason, 0, 0, reader_failed)

    def pend_files(self, files: Sequence[tuple[int, str, int, int]]) -> None:
        """(source_id, path, size, mtime_ns) of files found and not read yet, listed as pending; a file the
        index already has keeps its row (its passages serve until it is read again)."""
        with self._tx(changes=False) as db:
            db.executemany(
                "INSERT OR IGNORE INTO files (source_id, path, size, mtime_ns, state) VALUES (?, ?, ?, ?, 'pending')",
                [(source_id, str(path), size, mtime_ns) for source_id, path, size, mtime_ns in files],
            )

    def move_files(self, moves: Sequence[tuple[int, str | Path]]) -> None:
        """(source_id, path): files the index has, given to another of the project's sources (the one
        that names them now: another that also did is paused or removed), kept as they are, unread."""
        if not moves:
            return
        with self._tx() as db:  # (the generation moves: which files are left out of retrieval changed)
            db.executemany("UPDATE files SET source_id = ? WHERE path = ?", [(sid, str(p)) for sid, p in moves])

    def drop_file(self, path: str | Path) -> None:
        self.drop_files([path])

    def drop_files(self, paths: Sequence[str | Path]) -> None:
        """These files' rows, passages and vectors removed in one transaction, then `purge`d."""
        if not paths:
            return
        with self._tx() as db:
            db.executemany("DELETE FROM files WHERE path = ?", [(str(p),) for p in paths])
        self.purge()

    def drop_source(self, source_id: int) -> None:
        """Every file of a knowledge source removed from the project (the files on disk are not touched),
        then `purge`d."""
        with self._tx() as db:
            db.execute("DELETE FROM files WHERE source_id = ?", (source_id,))
            db.execute("DELETE FROM unread_folders WHERE source_id = ?", (source_id,))
        self.purge()

    def purge(self) -> None:
        """Removed passages' words out of the file too: the FTS5 index merged (its segments keep a deleted
        passage's terms until then; secure_delete zeroes the freed pages) and the WAL, which still holds the
        pages as they were, checkpointed and truncated (only as far as no other connection reads it: a
        reader's pages go at the next purge)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT INTO passages_fts(passages_fts) VALUES ('optimize')")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def _upsert(
        self,
        db: sqlite3.Connection,
        source_id: int,
        path: str,
        size: int,
        mtime_ns: int,
        state: str,
        reason: str | None,
        pages: int,
        passages: int,
        reader_failed: bool = False,
    ) -> int:
        row = db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
        values = (source_id, size, mtime_ns, state, reason, int(reader_failed), pages, passages, time.time())
        if row is None:
            cur = db.execute(
                "INSERT INTO files (source_id, size, mtime_ns, state, reason, reader_failed, pages, passages, "
                "indexed_at, path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, path),
            )
            return int(cur.lastrowid or 0)
        file_id = int(row[0])
        db.execute("DELETE FROM passages WHERE file_id = ?", (file_id,))
        db.execute(
            "UPDATE files SET source_id = ?, size = ?, mtime_ns = ?, state = ?, reason = ?, reader_failed = ?, "
            "pages = ?, passages = ?, indexed_at = ? WHERE id = ?",
            (*values, file_id),
        )
        return file_id

    # ----- passages
    def found_passages(self, passage_ids: Sequence[int]) -> dict[int, Passage]:
        """The passages of these ids that are still in the index (one whose file was read again or
        removed since it was ranked is left out), by id."""
        ids = [int(i) for i in passage_ids]
        found: dict[int, Passage] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                marks = ", ".join("?" * len(part))
                for row in self._db.execute(f"{_PASSAGE_SELECT} WHERE p.id IN ({marks})", part):
                    found[int(row[0])] = Passage(*row)
        return found

    def passage(self, passage_id: int) -> Passage:
        with self._lock:
            row = self._db.execute(f"{_PASSAGE_SELECT} WHERE p.id = ?", (passage_id,)).fetchone()
        if row is None:
            raise StoreError("This passage is no longer in the project's knowledge (its file changed or was removed).")
        return Passage(*row)

    def passages_of(self, file_id: int) -> list[Passage]:
        with self._lock:
            rows = self._db.execute(f"{_PASSAGE_SELECT} WHERE p.file_id = ? ORDER BY p.seq", (file_id,)).fetchall()
        return [Passage(*row) for row in rows]

    def neighbours(self, passage_id: int) -> list[Passage]:
        """The passages just before and just after this one in its file (0, 1 or 2 of them, in order)."""
        with self._lock:
            rows = self._db.execute(
                f"{_PASSAGE_SELECT} JOIN passages q ON q.file_id = p.file_id AND p.seq IN (q.seq - 1, q.seq + 1) "
                "WHERE q.id = ? ORDER BY p.seq",
                (passage_id,),
            ).fetchall()
        return [Passage(*row) for row in rows]

    def bm25(self, question: str, limit: int) -> list[tuple[int, float]]:
        """(passage id, bm25 score: lower is better) of the passages matching any of the question's words
        (but those in more than COMMON_SHARE of the passages while rarer ones remain: `search_words`),
        a section's lead's score made LEAD_BOOST better (`section_leads`)."""
        with self._lock:
            words = self.search_words(question)
            if not words:
                return []
            rows = self._db.execute(
                f"SELECT rowid, bm25(passages_fts, {TITLE_WEIGHT}, 1.0) AS rank FROM passages_fts "
                "WHERE passages_fts MATCH ? ORDER BY rank LIMIT ?",
                (fts_query(words), limit),
            ).fetchall()
            leads = self.section_leads([int(r[0]) for r in rows])
        scored = [(int(pid), float(rank) * (1 + LEAD_BOOST) if pid in leads else float(rank)) for pid, rank in rows]
        return sorted(scored, key=lambda item: item[1])  # (bm25() is negative: a lead's more so)

    def section_leads(self, passage_ids: Sequence[int]) -> set[int]:
        """Those of these passages that are the first under their heading (projects/headings.py): the
        passage before has another title, or none and the passage has a heading in its title (not the
        file's name alone)."""
        ids = [int(i) for i in passage_ids]
        leads: set[int] = set()
        with self._lock:
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                rows = self._db.execute(
                    "SELECT p.id, p.title, q.title, f.path FROM passages p JOIN files f ON f.id = p.file_id "
                    "LEFT JOIN passages q ON q.file_id = p.file_id AND q.seq = p.seq - 1 "
                    f"WHERE p.id IN ({', '.join('?' * len(part))})",
                    part,
                ).fetchall()
                leads.update(pid for pid, title, before, path in rows if title != (before or Path(path).name))
        return leads

    def search_words(self, question: str) -> list[str]:
        """The question's words a search looks for: those in no passage left out, and those in more
        than COMMON_SHARE of the passages too while a rarer one remains (else the rarest one)."""
        words = question_words(question)
        if not words:
            return []
        with self._lock:
            db = self._db
            db.execute("DELETE FROM temp.question_words")
            db.executemany("INSERT INTO temp.question_words (rowid, word) VALUES (?, ?)", enumerate(words))
            stems: dict[int, list[str]] = {}
            for row, term in db.execute("SELECT doc, term FROM temp.question_terms"):
                stems.setdefault(int(row), []).append(str(term))
            found: dict[str, int] = {}
            for term in {t for ts in stems.values() for t in ts}:
                hit = db.execute("SELECT doc FROM temp.passage_terms WHERE term = ?", (term,)).fetchone()
                found[term] = int(hit[0]) if hit is not None else 0
            total = self._passages_now()
        frequency = {w: min((found[t] for t in stems.get(i, [])), default=0) for i, w in enumerate(words)}
        present = [w for w in words if frequency[w] > 0]
        rare = [w for w in present if frequency[w] <= max(COMMON_SHARE * total, COMMON_MIN)]
        return rare or sorted(present, key=lambda w: frequency[w])[:1]

    def _passages_now(self) -> int:
        generation = self.generation()
        if self._passage_count[0] != generation:
            count = int(self._db.execute("SELECT COUNT(*) FROM passages").fetchone()[0])
            self._passage_count = (generation, count)
        return self._passage_count[1]

    def counts(self) -> IndexCounts:
        with self._lock:
            row = self._db.execute(f"SELECT {_COUNT_COLUMNS} FROM files").fetchone()
        return IndexCounts(*(int(v) for v in row))

    def counts_by_source(self) -> dict[int, IndexCounts]:
        """`counts` of each source id that has files, in one grouped query (no row read out: cheap enough
        to ask often while a run goes, where `files` of a large index is not)."""
        with self._lock:
            rows = self._db.execute(f"SELECT source_id, {_COUNT_COLUMNS} FROM files GROUP BY source_id").fetchall()
        return {int(r[0]): IndexCounts(*(int(v) for v in r[1:])) for r in rows}

    def skipped_files(self) -> list[tuple[int, str, str]]:
        """(source id, path, reason) of every skipped file, by path."""
        with self._lock:
            rows = self._db.execute(
                "SELECT source_id, path, COALESCE(reason, '') FROM files WHERE state = 'skipped' ORDER BY path"
            ).fetchall()
        return [(int(sid), str(path), str(reason)) for sid, path, reason in rows]

    def set_unread(self, source_ids: Collection[int], folders: Sequence[tuple[int, str, str, str, bool]]) -> None:
        """What the walk of these sources could not list: (source id, path, cause, reason, missing) each,
        in place of what their last walk found (a folder readable again is no longer said)."""
        ids = [(int(sid),) for sid in source_ids]
        with self._tx(changes=False) as db:
            db.executemany("DELETE FROM unread_folders WHERE source_id = ?", ids)
            db.executemany(
                "INSERT OR REPLACE INTO unread_folders (source_id, path, cause, reason, missing) "
                "VALUES (?, ?, ?, ?, ?)",
                [(int(sid), str(path), cause, reason, int(missing)) for sid, path, cause, reason, missing in folders],
            )

    def keep_unread_of(self, source_ids: Collection[int]) -> None:
        """What the walks of sources not among `source_ids` (removed from the project) could not list,
        forgotten: a removed source with no files (only a folder it could not list, or its own path not
        there) has nothing for `drop_source` to find."""
        ids = sorted({int(sid) for sid in source_ids})
        with self._tx(changes=False) as db:
            db.execute(f"DELETE FROM unread_folders WHERE source_id NOT IN ({', '.join('?' for _ in ids)})", ids)

    def unread_folders(self) -> list[UnreadFolder]:
        """What the last walk of each source could not list, by path, with the index's files kept under it."""
        with self._lock:
            rows = self._db.execute(UNREAD_QUERY, (os.sep, chr(ord(os.sep) + 1))).fetchall()
        return [UnreadFolder(int(s), str(p), str(c), str(r), bool(m), int(f), int(n)) for s, p, c, r, m, f, n in rows]

    # ----- vectors
    def embedding_model(self) -> str | None:
        """The embedding model the stored vectors were made with (None: no vectors)."""
        return self._meta("embedding_model")

    def use_embedding_model(self, model_id: str) -> bool:
        """Vectors from now on are `model_id`'s: another model's are deleted (True when they were)."""
        with self._tx() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()
            if row is not None and row[0] == model_id:
                return False
            db.execute("DELETE FROM vectors")
            db.execute("DELETE FROM meta WHERE key = 'dim'")
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('embedding_model', ?)", (model_id,))
            return row is not None

    def passages_without_vectors(self, limit: int) -> list[tuple[int, str]]:
        """(id, text) of up to `limit` passages that have no vector yet."""
        with self._lock:
            rows = self._db.execute(
                "SELECT p.id, p.text FROM passages p LEFT JOIN vectors v ON v.passage_id = p.id "
                "WHERE v.passage_id IS NULL ORDER BY p.id LIMIT ?",
                (limit,),
            ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def put_vectors(self, model_id: str, passage_ids: Sequence[int], matrix: np.ndarray) -> None:
        """Passages' vectors (rows of `matrix`, L2-normalised here) for `model_id`, which must be the
        model `use_embedding_model` named; a passage gone meanwhile (its file re-read) is left out."""
        vectors = np.ascontiguousarray(matrix, dtype="<f4")
        if vectors.ndim != 2 or len(vectors) != len(passage_ids):
            raise ValueError(f"{len(passage_ids)} passages but vectors of shape {vectors.shape}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = (vectors / np.where(norms == 0, 1, norms)).astype("<f4")
        with self._tx() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()
            if row is None or row[0] != model_id:
                raise StoreError(f"The knowledge index holds vectors of another model than {model_id}.")
            dim = db.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
            if dim is None:
                db.execute("INSERT INTO meta (key, value) VALUES ('dim', ?)", (str(vectors.shape[1]),))
            elif int(dim[0]) != vectors.shape[1]:
                raise StoreError(f"{model_id} made vectors of {vectors.shape[1]} numbers, the index holds {dim[0]}.")
            db.executemany(
                "INSERT OR REPLACE INTO vectors (passage_id, vec) "
                "SELECT ?, ? WHERE EXISTS (SELECT 1 FROM passages WHERE id = ?)",
                [(int(pid), vec.tobytes(), int(pid)) for pid, vec in zip(passage_ids, vectors, strict=True)],
            )

    def vectors_for(self, model_id: str) -> Vectors | None:
        """Every stored vector, when they are `model_id`'s; None when the index has none, or another
        model's (never searched with this one)."""
        with self._lock:
            if self._meta("embedding_model") != model_id or (dim := self._meta("dim")) is None:
                return None
            rows = self._db.execute("SELECT passage_id, vec FROM vectors ORDER BY passage_id").fetchall()
        width = int(dim)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), width)
        return Vectors(model_id, ids, matrix.astype(np.float32, copy=False))

    def _meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])


def _indexed_file(row: tuple[int, int, str, int, int, str, str | None, int, int, int, float | None]) -> IndexedFile:
    """A row of `_FILE_COLUMNS` (reader_failed stored as 0 or 1)."""
    i, source_id, path, size, mtime_ns, state, reason, reader_failed, pages, passages, at = row
    return IndexedFile(i, source_id, path, size, mtime_ns, state, reason, bool(reader_failed), pages, passages, at)


_FILE_COLUMNS = "id, source_id, path, size, mtime_ns, state, reason, reader_failed, pages, passages, indexed_at"
_COUNT_COLUMNS = (  # (IndexCounts' fields, in order)
    "COUNT(*), COALESCE(SUM(state = 'indexed'), 0), COALESCE(SUM(state = 'skipped'), 0), "
    "COALESCE(SUM(state = 'pending'), 0), COALESCE(SUM(pages), 0), COALESCE(SUM(passages), 0)"
)
_PASSAGE_SELECT = (
    "SELECT p.id, p.file_id, f.path, p.seq, p.page, p.text FROM passages p JOIN files f ON f.id = p.file_id"
)
