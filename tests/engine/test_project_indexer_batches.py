"""Small text files of a project's knowledge read many to a child process (projects/indexer.py,
attachments/isolated.py `FileReader.read_batch`): the same passages and sentences as one child per
file, and a file that is not plain text, is not UTF-8, hangs or inflates gets its own sentence while
the others of its batch are indexed; a stop ends a batch under way. Real files, real child processes
with their real limits (the hang and the inflation: tests/hostile/hanging_text_reader.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.attachments import isolated
from ember_chat.engine.attachments.kinds import MB, Limits
from ember_chat.engine.projects.index import PENDING, KnowledgeIndex
from ember_chat.engine.projects.indexer import Indexer, IndexProgress, IndexRun
from tests.helpers.attachment_files import reading_processes
from tests.helpers.knowledge_sources import Root
from tests.hostile import hanging_text_reader
from tests.hostile.slow_or_inflating_files import pdf_flate_bomb

WAIT_S = 20.0
LIMITS = Limits(max_seconds=2, max_memory_bytes=1024 * MB)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[KnowledgeIndex]:
    made = KnowledgeIndex(tmp_path / "knowledge.sqlite3")
    yield made
    made.close()


def _notes(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"note{i:02d}.md").write_text(f"# Note {i}\n\nThe word token{i}x only stands in note {i}.\n")


def _reasons(index: KnowledgeIndex) -> dict[str, str]:
    return {Path(f.path).name: f.reason or "" for f in index.files() if f.state == "skipped"}


def _found(index: KnowledgeIndex, word: str) -> list[str]:
    return [index.passage(pid).text for pid, _ in index.bm25(word, 3)]


def _reading_processes_named(patch: pytest.MonkeyPatch) -> list[str]:
    """The names the reading processes are started for, as they start (the real ones run)."""
    children: list[str] = []
    real_run_child = isolated.FileReader._run_child

    def counted(self: isolated.FileReader, name: str, *args: object, **kwargs: object) -> None:
        children.append(name)
        real_run_child(self, name, *args, **kwargs)  # type: ignore[arg-type]

    patch.setattr(isolated.FileReader, "_run_child", counted)
    return children


def test_a_batch_reads_as_one_child_per_file_does(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _notes(docs, 30)
    (docs / "latin1.txt").write_bytes("Café crème, señor: déjà vu à Zürich.\n".encode("latin-1"))  # (not UTF-8)
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 40)
    (docs / "table.csv").write_text("ship,berth\nAurora,4\n")
    seen: dict[int, tuple[dict[str, str], list[tuple[str, int, int]]]] = {}
    for batch_files in (1, 64):
        index = KnowledgeIndex(tmp_path / f"knowledge{batch_files}.sqlite3")
        try:
            with pytest.MonkeyPatch.context() as patch:  # (counts the reading processes: the real ones run)
                children = _reading_processes_named(patch)
                run = Indexer(index, [Root(1, str(docs))], batch_files=batch_files).run()
            assert len(children) == (33 if batch_files == 1 else 1), children  # (one process for the 33 files)
            assert (run.read, run.skipped, run.stopped) == (32, 1, False)
            files = sorted((Path(f.path).name, f.pages, f.passages) for f in index.files() if f.state == "indexed")
            seen[batch_files] = (_reasons(index), files)
            assert "Zürich" in _found(index, "zürich")[0] and "token7x" in _found(index, "token7x")[0]
        finally:
            index.close()
    assert seen[1] == seen[64]
    assert "is a binary file" in seen[64][0]["binary.txt"]
    assert reading_processes() == []


def test_progress_counts_each_file_of_a_batch_as_its_answer_is_stored(tmp_path: Path, index: KnowledgeIndex) -> None:
    """`files_done` is the files read or skipped, each counted as its answer comes: never one still waiting
    in its batch, and the last batch's files each as they come, so the count reaches the total as the last
    file is stored (not only with the run's last word, after the batch's wait)."""
    docs = tmp_path / "docs"
    _notes(docs, 12)
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 40)  # (skipped with its sentence, in the batch)
    seen: list[tuple[IndexProgress, int]] = []

    def progress(p: IndexProgress) -> None:
        counts = index.counts()
        seen.append((p, counts.indexed + counts.skipped))  # (the files done, as the index has them then)

    run = Indexer(index, [Root(1, str(docs))]).run(progress)
    assert (run.read, run.skipped) == (12, 1)
    assert [p.files_done for p, _ in seen] == [stored for _, stored in seen]  # (never ahead, never behind)
    done = [p.files_done for p, _ in seen]
    assert done == sorted(done) and set(done) == set(range(14)) and all(p.files_total == 13 for p, _ in seen)
    at_total = [p for p, _ in seen if p.files_done == 13]
    assert at_total[0].current is not None  # (the last file stored, before the run's last word)
    assert at_total[-1] == IndexProgress(13, 13, run.pages, run.passages, None)
    assert reading_processes() == []


def test_a_pdf_named_md_is_not_parsed_in_the_batch_and_gets_its_own_sentence(
    tmp_path: Path, index: KnowledgeIndex
) -> None:
    """A PDF whose content stream inflates, named .md: the batch's process sees its bytes are a PDF and
    leaves it (it would take the batch's whole time); read alone, it stops at the time limit."""
    docs = tmp_path / "docs"
    _notes(docs, 10)
    (docs / "bomb.md").write_bytes(pdf_flate_bomb(8 * MB))
    run = Indexer(index, [Root(1, str(docs))], LIMITS).run()
    assert (run.read, run.skipped) == (10, 1)
    assert _reasons(index)["bomb.md"].startswith(("bomb.md took longer than 2 seconds", "bomb.md needs more than"))
    assert "token9x" in _found(index, "token9x")[0]
    assert reading_processes() == []


def test_a_file_that_hangs_or_inflates_in_a_batch_gets_its_own_sentence(
    tmp_path: Path, index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file that hangs had its whole time limit in the batch (its clock started when the file before
    it was answered): it is said too slow there, never read again alone (a second full wait), and the
    files after it are read in a new batch; the one that inflates is read again alone (the memory limit
    is the batch's process's)."""
    monkeypatch.setattr(isolated, "_read_in_child", hanging_text_reader.reads_one)
    monkeypatch.setattr(isolated, "_read_batch_in_child", hanging_text_reader.reads_a_batch)
    children = _reading_processes_named(monkeypatch)
    docs = tmp_path / "docs"
    _notes(docs, 20)
    (docs / "note05.md").write_bytes(b"# Stuck\n\nHANG: the reader never finishes this one.\n")
    (docs / "note12.md").write_bytes(b"# Huge\n\nINFLATE: the reader allocates without end.\n")
    run = Indexer(index, [Root(1, str(docs))], LIMITS).run()
    reasons = _reasons(index)
    assert (run.read, run.skipped) == (18, 2), reasons
    assert reasons["note05.md"].startswith("note05.md took longer than 2 seconds to read")
    assert reasons["note12.md"].startswith("note12.md needs more than 1024.0 MB of memory to read")
    assert all(f"token{i}x" in _found(index, f"token{i}x")[0] for i in (0, 4, 6, 11, 13, 19))
    assert children == ["note00.md and 19 more", "note06.md and 13 more", "note12.md"]  # (none for note05 alone)
    assert reading_processes() == []


def test_each_file_of_a_batch_has_its_own_time_limit(
    tmp_path: Path, index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files that each take most of the limit, together more than it: none is said too slow (the clock
    of each starts when the one before it is answered), all in one process."""
    monkeypatch.setattr(isolated, "_read_batch_in_child", hanging_text_reader.reads_a_batch)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"slow{i}.md").write_bytes(f"# Slow {i}\n\nSLOW: the word slow{i}x stands here.\n".encode())
    run = Indexer(index, [Root(1, str(docs))], Limits(max_seconds=2, max_memory_bytes=1024 * MB)).run()
    assert (run.read, run.skipped) == (3, 0), _reasons(index)
    assert all(f"slow{i}x" in _found(index, f"slow{i}x")[0] for i in range(3))
    assert reading_processes() == []


def test_the_time_an_answer_takes_to_store_is_not_the_next_file_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next file's clock starts as the answer before it arrives, not once `answered` has stored it: a
    slow store (a busy disk) beside files that each take most of the limit kills no process."""
    monkeypatch.setattr(isolated, "_read_batch_in_child", hanging_text_reader.reads_a_batch)
    children = _reading_processes_named(monkeypatch)
    files = [(f"slow{i}.md", f"# Slow {i}\n\nSLOW {i}\n".encode()) for i in range(3)]
    told: list[int] = []

    def answered(at: int, answer: object) -> None:
        told.append(at)
        if at == 0:  # (the file before took SLOW_S of the 2 s: with this, more than its limit)
            time.sleep(2.0 - hanging_text_reader.SLOW_S + 0.6)

    answers = isolated.FileReader(LIMITS).read_batch(files, answered)
    assert [type(a).__name__ for a in answers] == ["Extracted"] * 3 and told == [0, 1, 2]
    assert children == ["slow0.md and 2 more"]  # (none killed, none read again alone)
    assert reading_processes() == []


def test_a_stop_ends_a_batch_under_way_and_leaves_its_files_not_answered_pending(
    tmp_path: Path, index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolated, "_read_batch_in_child", hanging_text_reader.reads_a_batch)
    docs = tmp_path / "docs"
    _notes(docs, 20)
    (docs / "note10.md").write_bytes(b"# Stuck\n\nHANG: the reader never finishes this one.\n")
    stop = threading.Event()
    before_the_hang = threading.Event()  # (note00-note09 answered and stored: the batch's child is on note10)
    result: list[IndexRun] = []

    def progress(p: IndexProgress) -> None:
        if p.files_done == 10:
            before_the_hang.set()

    worker = threading.Thread(
        target=lambda: result.append(
            Indexer(index, [Root(1, str(docs))], Limits(max_seconds=60)).run(progress, stopped=stop.is_set)
        )
    )
    worker.start()
    assert before_the_hang.wait(WAIT_S)
    assert reading_processes()
    stopped_at = time.monotonic()
    stop.set()
    worker.join(WAIT_S)
    assert not worker.is_alive() and time.monotonic() - stopped_at < 5
    [done] = result
    assert done.stopped and done.read == 10 and index.counts().pending == 10  # (those answered before: stored)
    states = {Path(f.path).name: f.state for f in index.files()}
    assert states["note10.md"] == states["note19.md"] == PENDING
    assert reading_processes() == []
    monkeypatch.undo()
    again = Indexer(index, [Root(1, str(docs))]).run()
    assert (again.read, again.stopped) == (20 - done.read, False) and index.counts().pending == 0


def test_a_batch_reader_that_lies_never_writes_another_file_s_text_nor_makes_ember_hold_its_memory(
    tmp_path: Path, index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's child exploited by one file: one that answers another file's text for it, one that
    answers 64 MB for a few bytes. Neither answer is believed (its digest is not the file's; its size is
    more than the file could decode to, refused before a byte of it is read): the files from there on
    are read again alone, each to its own text."""
    monkeypatch.setattr(isolated, "_read_batch_in_child", hanging_text_reader.lies_in_a_batch)
    docs = tmp_path / "docs"
    _notes(docs, 4)
    (docs / "note01.md").write_text("# Swapped\n\nSWAP: the word swapword stands only here.\n")
    (docs / "note02.md").write_text("# Huge\n\nHUGE: the word hugeword stands only here.\n")
    run = Indexer(index, [Root(1, str(docs))]).run()
    assert (run.read, run.skipped) == (4, 0)
    for word, file in (("token0x", "note00.md"), ("swapword", "note01.md"), ("hugeword", "note02.md"),
                       ("token3x", "note03.md")):  # fmt: skip
        [(pid, _score)] = index.bm25(word, 3)  # (in one passage only: no file was given another's text)
        passage = index.passage(pid)
        assert Path(passage.file_path).name == file and word in passage.text
    assert reading_processes() == []
