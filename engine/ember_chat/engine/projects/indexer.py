"""Bringing a project's knowledge index up to date with its sources, incrementally: a file new or changed
(its size or mtime_ns differ from the index's) is read again, a file gone is dropped, the rest is left
as it is. Run it again to resume after a stop (`stopped()` is checked between files, and kills a read
under way), after a crash, or when the watcher (watch.py) saw something change.

Each file is read in a child process with the attachments' time and memory limits (one `FileReader` for
the run: attachments/isolated.py); small files of the kinds whose reading is decoding (text, Markdown,
code, CSV, JSON: up to BATCH_FILE_BYTES each) are read BATCH_FILES at a time (or BATCH_BYTES) in one
child (`FileReader.read_batch`: a file that fails there is named or read again alone), as a child costs
~10 ms, most of a small note's time (bench/index_small_files.py: 102-105 files/s -> 1,604-1,652). A stop
leaves the batch being gathered pending, and the files of the batch being read that had no answer yet:
each file is stored as its answer comes, and counted in the progress then (`IndexProgress.files_done`
counts files read or skipped, never one still waiting in a batch). Then chunked like attachments
(attachments/chunking.py) and stored (index.py). The bytes are taken with attachments' `read_plain_file`:
opened non-blocking and checked to be a plain file within the size limit before anything is read (a pipe
put in a file's place would block a plain open); and a file that became, since the folder was listed, a
link leading outside its source's folder is not read (scan.py lists such links without following them).
Passages get their vectors (with an embedding model) every EMBED_FILES files read and at the end: the
passages without one are found with one query over the index, not one per file.
A file that cannot be read — a password-protected or damaged PDF, a binary file named .txt, a file gone
since the folder was listed, one over the size limit — is kept as skipped with the reader's sentence;
the rest goes on. One skipped for a cause not its own (errors.ReaderFailed) is marked so, and read again
when a run is asked to (`Retry`: the window's first run after Ember starts, and the CLI's); any skipped
file is read again when the user asks (Try again). A source that is not there (a disconnected drive)
or a folder that cannot be listed (permission denied, an I/O error) keeps what the index has of it (its
files neither read again nor dropped) and is reported (`IndexRun.problems`), and kept in the index with
its cause (`KnowledgeIndex.unread_folders`: the window's Knowledge tab and `projects list` say it) until
a walk lists it again."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from ember_chat.engine.attachments.extract import kind_by_name, read_plain_file
from ember_chat.engine.attachments.isolated import DECODED_KINDS, FileReader, ReadingStopped
from ember_chat.engine.attachments.kinds import DEFAULT_LIMITS, MB, Extracted, Limits
from ember_chat.engine.errors import AttachmentError, EmberError, ReaderFailed
from ember_chat.engine.projects import scan as scanning
from ember_chat.engine.projects.headings import section_chunks
from ember_chat.engine.projects.index import PENDING, SKIPPED, IndexedFile, KnowledgeIndex
from ember_chat.engine.projects.scan import FoundFile, ScanProblem, scan, under

log = logging.getLogger(__name__)

EMBED_BATCH = 32  # passages embedded at once
EMBED_FILES = 64  # files read between two embeddings of the passages without vectors (and at the end)
EMBED_PASSAGES = 8 * EMBED_BATCH  # ... or sooner, once this many passages wait
BATCH_FILES = 64  # small files of the kinds whose reading is decoding read in one child process (FileReader.read_batch)
BATCH_BYTES = 1 * MB  # ... until their bytes reach this
BATCH_FILE_BYTES = 256 * 1024  # a file larger than this is read alone
GONE = "is gone (deleted or moved while the project's knowledge was indexed)."


class KnowledgeRoot(Protocol):
    """What indexing needs of a knowledge source (records.py's KnowledgeSource): its id and its path."""

    @property
    def id(self) -> int: ...
    @property
    def path(self) -> str: ...


class Embed(Protocol):
    """An embedding model: texts -> float32 (n, dim); `model_id` names it (the index's meta)."""

    model_id: str

    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Retry:
    """Skipped files a run reads again though they did not change: those skipped for a cause not their
    own (`reader_failed`: no reader could start, none was free, it stopped unexpectedly: once per start of
    Ember, not at every run), and `paths` (the user's Try again, whatever the reason). A file skipped for
    its content (a password-protected PDF, a binary file named .txt, over the size limit) is otherwise
    read again only when it changes."""

    reader_failed: bool = False
    paths: frozenset[str] = frozenset()

    def wants(self, file: IndexedFile) -> bool:
        return file.state == SKIPPED and ((self.reader_failed and file.reader_failed) or file.path in self.paths)


@dataclass(frozen=True)
class IndexProgress:
    files_done: int
    files_total: int  # the files to read in this run (new or changed)
    pages: int  # read in this run
    passages: int  # stored in this run
    current: str | None  # the file being read now (or just read); None once the run is over


@dataclass
class IndexRun:
    """What a run did: files read, skipped (each with its reason in the index), dropped (gone from
    disk), the paths that could not be walked (`problems`: a source not there, a folder that cannot be
    listed, a link loop, the file cap; `unreachable`: those of them that are a source's own path, by its
    id: not there, or that cannot be read — every such source when `walked`: the walk of all its sources
    ended, as it does before a file is read), and whether it was stopped before the end."""

    read: int = 0
    skipped: int = 0
    dropped: int = 0
    pages: int = 0
    passages: int = 0
    embedded: int = 0
    problems: list[ScanProblem] = field(default_factory=list)
    unreachable: dict[int, ScanProblem] = field(default_factory=dict)  # by source id: its own path not walked
    unread: list[tuple[int, ScanProblem]] = field(default_factory=list)  # (source id, path not listed): files kept
    embedding_problem: str | None = None  # the embedding model failed: the passages serve BM25 meanwhile
    stopped: bool = False
    walked: bool = False
    seconds: float = 0.0


@dataclass(frozen=True)
class _Taken:
    """A file's bytes, taken to be read: its size and mtime_ns as read; `batched`: read with others."""

    source_id: int
    file: FoundFile
    data: bytes
    size: int
    mtime_ns: int
    batched: bool


class Indexer:
    """`batch_files`: at most this many small text files read in one child process (1: each alone);
    `retry`: the skipped files read again though unchanged (none by default); `known`: the ids of every
    source of the project (paused ones too): the files of any other source (removed from the project)
    are dropped once the walk is over, those of its files that a source here names (a folder added
    around it) given to that source first, unchanged and not read again."""

    def __init__(
        self,
        index: KnowledgeIndex,
        sources: Sequence[KnowledgeRoot],
        reader_limits: Limits = DEFAULT_LIMITS,
        embedder: Embed | None = None,
        batch_files: int = BATCH_FILES,
        retry: Retry | None = None,
        known: Collection[int] | None = None,
    ) -> None:
        self.retry = retry or Retry()
        self.known = None if known is None else frozenset(known)
        self.index = index
        self.sources = list(sources)
        self.limits = reader_limits
        self.embedder = embedder
        self.batch_files = batch_files

    def run(
        self,
        progress: Callable[[IndexProgress], None] | None = None,
        stopped: Callable[[], bool] = lambda: False,
    ) -> IndexRun:
        started = time.monotonic()
        result = IndexRun()
        found, kept = self._scan(result, stopped)
        if stopped():
            result.stopped = True
            return self._done(result, started)
        result.walked = True
        said = [(sid, str(p.path), p.cause, p.reason, p.missing) for sid, p in result.unread]
        self.index.set_unread({s.id for s in self.sources}, said)
        indexed_files = {f.path: f for f in self.index.files()}
        ours = {s.id for s in self.sources}
        gone = [p for p, f in indexed_files.items() if f.source_id in ours and p not in found and not under(p, kept)]
        self.index.drop_files(gone)  # (one transaction, then the removed text purged from the file)
        result.dropped += len(gone)
        to_read: list[tuple[int, FoundFile]] = []
        moved: list[tuple[int, str]] = []  # unchanged files another (paused, removed) source had: now this one's
        for path, (source_id, file) in found.items():
            indexed = indexed_files.get(path)
            if (
                indexed is None
                or indexed.state == PENDING
                or (indexed.size, indexed.mtime_ns) != (file.size, file.mtime_ns)
                or self.retry.wants(indexed)
            ):
                to_read.append((source_id, file))
            elif indexed.source_id != source_id:
                moved.append((source_id, path))
        self.index.move_files(moved)
        if self.known is not None:  # (after the move: a folder added around a source keeps its files, unread)
            for gone_source in {f.source_id for f in self.index.files()} - self.known:
                self.index.drop_source(gone_source)
            self.index.keep_unread_of(self.known)
        self.index.pend_files([(sid, str(f.path), f.size, f.mtime_ns) for sid, f in to_read])
        if self.embedder is not None and not self._embed_missing(result, stopped):
            result.stopped = True
            return self._done(result, started)
        reader = FileReader(self.limits, cancelled=stopped)
        roots = {s.id: s.path for s in self.sources}
        total = len(to_read)
        finished = 0  # files read and stored, or skipped: a batch's each as its answer comes

        def stored(path: str) -> None:
            nonlocal finished
            finished += 1
            if progress is not None:
                progress(IndexProgress(finished, total, result.pages, result.passages, path))

        batch: list[_Taken] = []  # small files of the kinds whose reading is decoding, read together
        unembedded = (0, 0)  # (files, passages) read since the passages were last embedded
        for source_id, file in to_read:
            if stopped():
                result.stopped = True
                break
            if progress is not None:
                progress(IndexProgress(finished, total, result.pages, result.passages, str(file.path)))
            taken = self._take(roots[source_id], source_id, file, result)
            if taken is None:
                finished += 1
                continue
            if self.batch_files > 1 and taken.batched:
                batch.append(taken)
                if len(batch) < self.batch_files and sum(len(t.data) for t in batch) < BATCH_BYTES:
                    continue
                group, batch = batch, []
            else:
                group = [taken]
            passages = result.passages
            try:
                self._read(reader, group, result, stored)
            except ReadingStopped:
                result.stopped = True
                break
            unembedded = (unembedded[0] + len(group), unembedded[1] + result.passages - passages)
            if self.embedder is not None and (unembedded[0] >= EMBED_FILES or unembedded[1] >= EMBED_PASSAGES):
                unembedded = (0, 0)
                if not self._embed_missing(result, stopped):
                    result.stopped = True
                    break
        else:
            passages = result.passages
            try:
                if batch:
                    self._read(reader, batch, result, stored)
            except ReadingStopped:
                result.stopped = True
                return self._done(result, started)
            unembedded = (unembedded[0], unembedded[1] + result.passages - passages)
            if self.embedder is not None and unembedded[1] and not self._embed_missing(result, stopped):
                result.stopped = True
                return self._done(result, started)
            if progress is not None:
                progress(IndexProgress(finished, total, result.pages, result.passages, None))
        return self._done(result, started)

    def _scan(
        self, result: IndexRun, stopped: Callable[[], bool]
    ) -> tuple[dict[str, tuple[int, FoundFile]], list[str]]:
        """{path: (source id, file)} of every source (the first source naming a path has it), and the
        paths whose files are unknown now (a source not there, a folder that cannot be listed)."""
        found: dict[str, tuple[int, FoundFile]] = {}
        kept: list[str] = []
        budget = scanning.MAX_FILES  # (per project: read at each run)
        for source in self.sources:
            for item in scan(source.path, self.limits, max(0, budget), stopped):
                if isinstance(item, ScanProblem):
                    if item.capped and any(p.capped for p in result.problems):
                        continue  # (the cap is the project's: said once, where it was reached)
                    result.problems.append(item)
                    if item.unlisted:
                        kept.append(str(item.path))
                        result.unread.append((source.id, item))
                        if item.path == Path(os.path.abspath(source.path)):
                            result.unreachable[source.id] = item
                    continue
                key = str(item.path)
                if key not in found:
                    found[key] = (source.id, item)
                    budget -= 1
            if stopped():
                break
        return found, kept

    def _take(self, root: str, source_id: int, file: FoundFile, result: IndexRun) -> _Taken | None:
        """The file's bytes, to be read; None when it is skipped (kept with its sentence)."""
        reason = file.skip
        if reason is None:
            try:
                data, info = _file_bytes(file.path, root, self.limits)
            except AttachmentError as exc:
                reason = str(exc)
            else:
                batched = len(data) <= BATCH_FILE_BYTES and kind_by_name(file.path.name) in DECODED_KINDS
                return _Taken(source_id, file, data, info.st_size, info.st_mtime_ns, batched)
        self.index.skip_file(source_id, str(file.path), file.size, file.mtime_ns, reason)
        result.skipped += 1
        return None

    def _read(self, reader: FileReader, group: list[_Taken], result: IndexRun, stored: Callable[[str], None]) -> None:
        """The files read in child processes (a batch in one: FileReader.read_batch), each stored (or
        skipped with its sentence) as its answer comes, then `stored(path)`. ReadingStopped leaves those
        not answered yet pending."""

        def store(at: int, answer: Extracted | AttachmentError) -> None:
            self._store(group[at], answer, result)
            stored(str(group[at].file.path))

        if len(group) > 1:
            reader.read_batch([(t.file.path.name, t.data) for t in group], store)
            return
        try:
            answer: Extracted | AttachmentError = reader.read_bytes(group[0].file.path.name, group[0].data)
        except ReadingStopped:
            raise
        except AttachmentError as exc:
            answer = exc
        store(0, answer)

    def _store(self, taken: _Taken, answer: Extracted | AttachmentError, result: IndexRun) -> None:
        path = str(taken.file.path)
        if isinstance(answer, AttachmentError):
            failed = isinstance(answer, ReaderFailed)  # (not the file's: tried again at the next start)
            self.index.skip_file(taken.source_id, path, taken.file.size, taken.file.mtime_ns, str(answer), failed)
            result.skipped += 1
            return
        chunks, headings = section_chunks(answer.text, answer.pages)
        self.index.put_file(taken.source_id, path, taken.size, taken.mtime_ns, len(answer.pages), chunks, headings)
        result.read += 1
        result.pages += len(answer.pages)
        result.passages += len(chunks)

    def _embed_missing(self, result: IndexRun, stopped: Callable[[], bool]) -> bool:
        """Vectors for every passage without one (all of them when the model changed); False if stopped."""
        embed = self.embedder
        if embed is None:
            return True
        self.index.use_embedding_model(embed.model_id)
        while batch := self.index.passages_without_vectors(EMBED_BATCH):
            if stopped():
                return False
            try:
                vectors = embed([text for _, text in batch])
            except EmberError as exc:  # (the model cannot embed: the passages serve BM25 meanwhile)
                result.embedding_problem = f"The project's embedding model could not embed its passages: {exc}"
                return True
            self.index.put_vectors(embed.model_id, [pid for pid, _ in batch], vectors)
            result.embedded += len(batch)
        return True

    @staticmethod
    def _done(result: IndexRun, started: float) -> IndexRun:
        result.seconds = time.monotonic() - started
        return result


def _file_bytes(path: Path, root: str, limits: Limits) -> tuple[bytes, os.stat_result]:
    """The file's bytes and its stat as read (it may have changed since the folder was listed), when it
    is, as read, inside its source `root` (a link leading outside put in its place since: AttachmentError)."""
    outside = f"{path.name} is now a link leading outside the folder: not followed."
    if not scanning.inside_folder(path, root):
        raise AttachmentError(outside)
    data, info = read_plain_file(path, limits, gone=GONE)
    try:  # (what was opened is the file inside the folder: not one a link swapped in meanwhile)
        now = os.stat(os.path.realpath(path))
    except OSError:
        raise AttachmentError(f"{path.name} {GONE}") from None
    if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino) or not scanning.inside_folder(path, root):
        raise AttachmentError(outside)
    return data, info
