"""Indexing a project's knowledge (projects/indexer.py) from real folders, each file read in a real child
process: incremental runs, stop and resume, every kind of bad input reported per file while the rest is
indexed, a source on a drive that is gone; and the watcher (projects/watch.py) noticing new, changed and
deleted files."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from ember_chat.engine.attachments.kinds import Limits
from ember_chat.engine.projects import scan as scanning
from ember_chat.engine.projects.active import ActiveIndex
from ember_chat.engine.projects.index import IndexCounts, KnowledgeIndex, UnreadFolder
from ember_chat.engine.projects.indexer import Indexer, IndexProgress, IndexRun, Retry
from ember_chat.engine.projects.watch import Changes, KnowledgeWatcher, compare, snapshot
from tests.helpers.attachment_files import reading_processes, write_docx, write_encrypted_pdf, write_pdf
from tests.helpers.knowledge_sources import Root
from tests.helpers.many_files import make_files, memory_mb, reset_peak_rss
from tests.helpers.permissions import locked, permissions_enforced

WAIT_S = 20.0
GATE = "The east gate's code is PELICAN-42; the west gate has none."


@pytest.fixture
def index(tmp_path: Path) -> Iterator[KnowledgeIndex]:
    made = KnowledgeIndex(tmp_path / "knowledge.sqlite3")
    yield made
    made.close()


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "notes.txt").write_text("Tide tables are kept by the harbour master.\n")
    (docs / "sub" / "gate.md").write_text(f"# Gates\n\n{GATE}\n")
    write_pdf(docs / "report.pdf", ["Page one: budgets.", "Page two: meetings.", "Page three: the lighthouse."])
    write_docx(docs / "minutes.docx", ["Minutes", "The committee approved the new pier."])
    return docs


def _texts(index: KnowledgeIndex, question: str) -> list[str]:
    return [index.passage(pid).text for pid, _ in index.bm25(question, 5)]


def test_a_folder_is_indexed_then_only_what_changed_is_read_again(tmp_path: Path, index: KnowledgeIndex) -> None:
    docs = _docs(tmp_path)
    seen: list[IndexProgress] = []
    first = Indexer(index, [Root(1, str(docs))]).run(seen.append)
    assert (first.read, first.skipped, first.dropped, first.stopped, first.problems) == (4, 0, 0, False, [])
    assert first.pages == 3 and first.passages == 6  # (a passage for each page of the PDF)
    assert index.counts() == IndexCounts(files=4, indexed=4, skipped=0, pending=0, pages=3, passages=6)
    assert sorted(set(p.files_done for p in seen)) == [0, 1, 2, 3, 4] and seen[-1].current is None
    assert {p.current for p in seen[:-1]} == {str(p) for p in docs.rglob("*.*")}
    assert [index.passage(pid).page for pid, _ in index.bm25("lighthouse", 3)] == [3]
    assert GATE in _texts(index, "Which code opens the east gate?")[0]
    assert "pier" in _texts(index, "pier")[0]

    again = Indexer(index, [Root(1, str(docs))]).run()
    assert (again.read, again.skipped, again.dropped) == (0, 0, 0)

    (docs / "sub" / "gate.md").write_text("# Gates\n\nThe east gate's code changed to HERON-7.\n")
    (docs / "notes.txt").unlink()
    (docs / "new.csv").write_text("ship,berth\nAurora,4\n")
    third = Indexer(index, [Root(1, str(docs))]).run()
    assert (third.read, third.skipped, third.dropped) == (2, 0, 1)
    assert _texts(index, "PELICAN") == [] and "HERON-7" in _texts(index, "heron")[0]
    assert index.file(docs / "notes.txt") is None and _texts(index, "tide") == []
    assert "Aurora" in _texts(index, "aurora")[0]
    assert reading_processes() == []


def test_bad_files_are_each_skipped_with_a_reason_and_the_rest_is_indexed(
    tmp_path: Path, index: KnowledgeIndex
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(GATE)
    write_encrypted_pdf(docs / "locked.pdf", ["A secret page."])
    (docs / "huge.log").write_text("log line\n" * 20_000)  # 180 KB, over the 64 KB limit below
    os.mkfifo(docs / "pipe.txt")
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 40)
    (docs / "damaged.pdf").write_bytes(b"%PDF-1.4\n this is not really a PDF")
    (docs / "loop-a.txt").symlink_to(docs / "loop-b.txt")
    (docs / "loop-b.txt").symlink_to(docs / "loop-a.txt")
    (docs / "vanishing.md").write_text("read soon, gone sooner")
    (docs / "swapped.txt").write_text("a plain file when the folder is listed, a pipe when it is read")

    def delete_when_its_turn_comes(progress: IndexProgress) -> None:
        if progress.current == str(docs / "vanishing.md"):
            (docs / "vanishing.md").unlink()
        if progress.current == str(docs / "swapped.txt"):  # (a plain open of it would wait forever)
            (docs / "swapped.txt").unlink()
            os.mkfifo(docs / "swapped.txt")

    run = Indexer(index, [Root(1, str(docs))], Limits(max_bytes=64 * 1024)).run(delete_when_its_turn_comes)
    reasons = {Path(f.path).name: f.reason for f in index.files() if f.state == "skipped"}
    assert set(reasons) == {
        "locked.pdf",
        "huge.log",
        "pipe.txt",
        "binary.txt",
        "damaged.pdf",
        "vanishing.md",
        "swapped.txt",
    }
    assert "protected by a password" in reasons["locked.pdf"]
    assert "files can be at most 64 KB" in reasons["huge.log"]
    assert "not a plain file" in reasons["pipe.txt"] and "not a plain file" in reasons["swapped.txt"]
    assert "is a binary file" in reasons["binary.txt"]
    assert "cannot be read as a PDF" in reasons["damaged.pdf"]
    assert "is gone (deleted or moved" in reasons["vanishing.md"]
    assert {p.path.name for p in run.problems} == {"loop-a.txt", "loop-b.txt"}
    assert all("symbolic links" in p.reason for p in run.problems)
    assert run.read == 1 and run.skipped == 7 and GATE in _texts(index, "east gate")[0]
    assert index.counts().pending == 0
    # the next run reads none of them again (they did not change) but the pipe now in swapped.txt's
    # place (another file: found as one at once), and drops the file that is gone
    again = Indexer(index, [Root(1, str(docs))], Limits(max_bytes=64 * 1024)).run()
    assert (again.read, again.skipped, again.dropped) == (0, 1, 1)
    assert reading_processes() == []


def test_a_skipped_files_reason_does_not_speak_of_attaching(tmp_path: Path, index: KnowledgeIndex) -> None:
    """The reasons are the attachments' readers' (one reader for both), worded for either: a project's
    files are added, not attached."""
    docs = tmp_path / "docs"
    docs.mkdir()
    write_encrypted_pdf(docs / "locked.pdf", ["A secret page."])
    write_pdf(docs / "scan.pdf", ["", ""])
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 40)
    run = Indexer(index, [Root(1, str(docs))]).run()
    reasons = {Path(f.path).name: f.reason for f in index.files() if f.state == "skipped"}
    assert run.skipped == 3 and set(reasons) == {"locked.pdf", "scan.pdf", "binary.txt"}
    assert reasons["locked.pdf"] == (
        "locked.pdf is protected by a password; save a copy without the password and use that instead."
    )
    assert reasons["scan.pdf"].startswith("scan.pdf has no text layer")
    assert reasons["binary.txt"].startswith("binary.txt is a binary file; Ember reads text, source code")
    assert not [r for r in reasons.values() if "attach" in r.lower()]
    assert reading_processes() == []


def test_a_stopped_run_leaves_the_rest_pending_and_the_next_run_resumes(tmp_path: Path, index: KnowledgeIndex) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"part{i}.txt").write_text(f"Part {i} of the manual: chapter word{i}.")
    calls: list[IndexProgress] = []
    # (read two at a time: the first two are read together — taken, taken, answered, answered — the third,
    # taken, is left pending by the stop)
    first = Indexer(index, [Root(1, str(docs))], batch_files=2).run(calls.append, stopped=lambda: len(calls) >= 5)
    assert first.stopped and first.read == 2 and first.walked  # (stopped while reading: every source walked)
    assert index.counts() == IndexCounts(files=6, indexed=2, skipped=0, pending=4, pages=0, passages=2)
    at_once = Indexer(index, [Root(1, str(docs))]).run(stopped=lambda: True)
    assert at_once.stopped and not at_once.walked  # (stopped in the walk: what it found of the sources is partial)
    second = Indexer(index, [Root(1, str(docs))]).run()
    assert not second.stopped and second.read == 4 and index.counts().indexed == 6


def test_a_stop_kills_a_read_under_way(tmp_path: Path, index: KnowledgeIndex) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_pdf(docs / "long.pdf", [f"Page {p}\n" + "A long line of the report to extract.\n" * 60 for p in range(400)])
    stop = threading.Event()
    result: list[IndexRun] = []
    reading = threading.Event()

    def run() -> None:
        result.append(Indexer(index, [Root(1, str(docs))]).run(lambda p: reading.set(), stopped=stop.is_set))

    worker = threading.Thread(target=run)
    worker.start()
    assert reading.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while not reading_processes() and time.monotonic() < deadline:  # (its child, started: no event tells)
        time.sleep(0.01)
    stop.set()
    worker.join(WAIT_S)
    assert not worker.is_alive()
    [done] = result
    assert done.stopped and done.read == 0 and index.counts().pending == 1
    assert reading_processes() == []


def test_a_source_on_a_drive_that_is_gone_keeps_its_files_until_it_is_back(
    tmp_path: Path, index: KnowledgeIndex
) -> None:
    docs = _docs(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "kept.txt").write_text("The other source is still indexed.")
    sources = [Root(1, str(docs)), Root(2, str(other))]
    Indexer(index, sources).run()
    docs.rename(tmp_path / "unplugged")
    gone = Indexer(index, sources).run()
    [problem] = gone.problems
    assert problem.path == docs and "disconnected drive" in problem.reason
    assert (gone.read, gone.dropped) == (0, 0) and index.counts().indexed == 5
    assert gone.walked and set(gone.unreachable) == {1} and gone.unreachable[1].missing
    (tmp_path / "unplugged").rename(docs)
    back = Indexer(index, sources).run()
    assert (back.read, back.dropped, back.problems) == (0, 0, [])


def test_the_file_cap_holds_per_project(tmp_path: Path, index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scanning, "MAX_FILES", 4)
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        for i in range(3):
            (tmp_path / name / f"{i}.txt").write_text(f"file {name}{i}")
    sources = [Root(1, str(tmp_path / "a")), Root(2, str(tmp_path / "b")), Root(3, str(tmp_path / "c"))]
    run = Indexer(index, sources).run()
    assert run.read == 4 and index.counts().files == 4
    [problem] = run.problems  # said once, where the cap was reached (not again for "c")
    assert problem.path == tmp_path / "b" and "more files than a project indexes (4)" in problem.reason


def test_two_thousand_small_files_index_in_reasonable_time(tmp_path: Path, index: KnowledgeIndex) -> None:
    for d in range(20):
        folder = tmp_path / "many" / f"d{d}"
        folder.mkdir(parents=True)
        for i in range(100):
            (folder / f"note{i}.txt").write_text(f"Note {d}-{i}: the word token{d}x{i} is only here.")
    started = time.monotonic()
    run = Indexer(index, [Root(1, str(tmp_path / "many"))]).run()
    took = time.monotonic() - started
    assert run.read == 2000 and run.problems == [] and index.counts().passages == 2000
    assert "token7x42" in _texts(index, "token7x42")[0]
    assert took < 120, f"indexing 2,000 small files took {took:.1f} s"
    again = time.monotonic()
    assert Indexer(index, [Root(1, str(tmp_path / "many"))]).run().read == 0
    assert time.monotonic() - again < 5


@pytest.mark.slow
def test_a_folder_of_100050_files_is_capped_once_and_listed_in_seconds(tmp_path: Path, index: KnowledgeIndex) -> None:
    """The real cap (scan.MAX_FILES) over 100,050 tiny files in nested folders: the walk, then the
    indexer's first phase (the walk, the comparison with the index, every file found listed as pending)
    up to its first progress report, where it is stopped; the files themselves are not read. Measured
    (bench/many_files.py, the development machine's 2 shared cores): the walk 1.2 s, +46 MiB peak RSS;
    the first phase 2.0 s."""
    root = tmp_path / "many"
    make_files(root, scanning.MAX_FILES + 50)
    said = (
        f"The project's knowledge holds more files than a project indexes ({scanning.MAX_FILES:,}): from {root} "
        "on, the rest are left out (add the subfolders you need instead)."
    )
    capped = scanning.ScanProblem(root, said, unlisted=False, capped=True)
    before = memory_mb("VmRSS")
    reset_peak_rss()
    started = time.monotonic()
    items = list(scanning.scan(root))
    took, grew = time.monotonic() - started, memory_mb("VmHWM") - before
    assert [i for i in items if isinstance(i, scanning.ScanProblem)] == [capped]
    assert sum(isinstance(i, scanning.FoundFile) for i in items) == scanning.MAX_FILES
    assert took < 10, f"walking 100,050 files took {took:.1f} s"
    assert grew < 150, f"walking 100,050 files grew the peak RSS by {grew:.0f} MiB"
    del items

    folders = 0

    def after_ten_folders() -> bool:
        nonlocal folders
        folders += 1
        return folders > 10

    stopped_walk = list(scanning.scan(root, stopped=after_ten_folders))
    assert len(stopped_walk) == 7 * 50  # (the folders listed before the stop: many, a000, b00, c00-c06)

    listed = threading.Event()
    first: list[IndexProgress] = []

    def progress(p: IndexProgress) -> None:
        first.append(p)
        listed.set()

    started = time.monotonic()
    run = Indexer(index, [Root(1, str(root))]).run(progress, stopped=listed.is_set)
    took = time.monotonic() - started
    assert run.stopped and run.problems == [capped]
    assert first[0].files_total == scanning.MAX_FILES and run.read <= 1
    assert index.counts().pending >= scanning.MAX_FILES - 1
    assert took < 30, f"listing 100,050 files as pending took {took:.1f} s"


class WordEmbedder:
    """A generated embedding model: each word hashed into one of 64 dimensions (texts sharing words are
    near); `model_id` names the variant, so a changed model is another id."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, hashlib.sha256(f"{self.model_id}{word}".encode()).digest()[0] % 64] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_passages_get_vectors_and_a_new_model_makes_them_again(tmp_path: Path, index: KnowledgeIndex) -> None:
    docs = _docs(tmp_path)
    first = Indexer(index, [Root(1, str(docs))], embedder=WordEmbedder("words-v1")).run()
    stored = index.vectors_for("words-v1")
    assert first.embedded == 6 and stored is not None and stored.matrix.shape == (6, 64)
    assert index.vectors_for("words-v2") is None
    second = Indexer(index, [Root(1, str(docs))], embedder=WordEmbedder("words-v2")).run()
    assert second.read == 0 and second.embedded == 6
    assert index.vectors_for("words-v1") is None and index.vectors_for("words-v2").matrix.shape == (6, 64)


def test_links_leading_outside_the_folder_are_never_read_nor_found(tmp_path: Path, index: KnowledgeIndex) -> None:
    home = tmp_path / "home"
    (home / "x").mkdir(parents=True)
    (home / "x" / "key.json").write_text('{"token": "SECRET-OSPREY-77"}')
    (home / "diary.txt").write_text("SECRET-HERON-12 is my password.")
    (home / "swapped-in.txt").write_text("SECRET-EGRET-3 lies here.")
    src = home / "project" / "src"
    src.mkdir(parents=True)
    (src / "plan.md").write_text(GATE)
    (src / "docs").symlink_to(home, target_is_directory=True)  # src/docs -> ~/
    (src / "notes.json").symlink_to(home / "x" / "key.json")  # notes.json -> ~/x/key.json
    (src / "later.txt").write_text("a plain file when the folder is listed, a link out when it is read")

    def swap_when_its_turn_comes(progress: IndexProgress) -> None:
        if progress.current == str(src / "later.txt"):
            (src / "later.txt").unlink()
            (src / "later.txt").symlink_to(home / "swapped-in.txt")

    run = Indexer(index, [Root(1, str(src))]).run(swap_when_its_turn_comes)
    assert [p.path.name for p in run.problems] == ["docs"] and "outside the folder: not followed" in run.problems[
        0
    ].reason
    for secret in ("SECRET-OSPREY-77", "SECRET-HERON-12", "SECRET-EGRET-3"):
        assert index.bm25(secret, 5) == []
    files = {Path(f.path).name: f for f in index.files()}
    assert set(files) == {"plan.md", "notes.json", "later.txt"}
    assert files["notes.json"].state == "skipped" and "outside the folder: not followed" in files["notes.json"].reason
    assert files["later.txt"].state == "skipped" and "link leading outside the folder" in files["later.txt"].reason
    assert GATE in _texts(index, "east gate")[0]


def test_a_file_also_under_an_active_source_leaves_a_paused_one_without_being_read_again(
    tmp_path: Path, index: KnowledgeIndex
) -> None:
    docs = _docs(tmp_path)
    gate = str(docs / "sub" / "gate.md")
    both = Indexer(index, [Root(1, str(docs)), Root(2, str(docs / "sub"))]).run()
    assert both.read == 4 and index.file(gate).source_id == 1  # (the first source naming it has it)
    # source 1 paused: its files stay in the index (left out of retrieval); gate.md is source 2's now
    only_sub = Indexer(index, [Root(2, str(docs / "sub"))]).run()
    assert (only_sub.read, only_sub.dropped) == (0, 0)  # unchanged on disk: not read again
    assert index.file(gate).source_id == 2 and index.file(gate).state == "indexed"
    assert index.file(docs / "notes.txt").source_id == 1
    active = ActiveIndex(index, frozenset({2}))
    assert [index.passage(pid).file_path for pid, _ in active.bm25("east gate", 5)] == [gate]


def test_passages_are_embedded_a_batch_of_files_at_a_time(tmp_path: Path, index: KnowledgeIndex) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(100):
        (folder / f"note{i:03}.txt").write_text(f"Note {i}: the word token{i} is only here.")
    embedder = WordEmbedder("words-v1")
    run = Indexer(index, [Root(1, str(folder))], embedder=embedder).run()
    assert run.read == 100 and run.embedded == 100 and index.vectors_for("words-v1").matrix.shape == (100, 64)
    assert embedder.calls <= 6, f"{embedder.calls} embeddings for 100 one-passage files (one a file?)"


# ----- the watcher
def test_the_watcher_notices_a_new_a_changed_and_a_deleted_file(tmp_path: Path) -> None:
    docs = _docs(tmp_path)
    seen: list[Changes] = []
    noticed = threading.Event()

    def on_change(changes: Changes) -> None:
        seen.append(changes)
        noticed.set()

    watcher = KnowledgeWatcher(lambda: [Root(1, str(docs))], on_change, interval_s=0.05)
    watcher.start()
    try:
        assert watcher.ready.wait(WAIT_S)
        for act, expected in (
            (lambda: (docs / "added.md").write_text("new"), Changes((str(docs / "added.md"),), (), ())),
            (
                lambda: (docs / "notes.txt").write_text("changed, and longer"),
                Changes((), (str(docs / "notes.txt"),), ()),
            ),
            (lambda: (docs / "sub" / "gate.md").unlink(), Changes((), (), (str(docs / "sub" / "gate.md"),))),
        ):
            noticed.clear()
            act()
            assert noticed.wait(WAIT_S)
            assert seen[-1] == expected
    finally:
        watcher.stop()
    assert not watcher.running


def test_the_watcher_says_a_drive_went_and_came_back_and_no_file_deleted_or_added(tmp_path: Path) -> None:
    """Its files are neither reported deleted while it is away nor added when it is back as it was: only
    that the source's path went and came back (the app runs the indexer, which says it is not there)."""
    docs = _docs(tmp_path)
    polled = threading.Event()
    polls: list[int] = []
    seen: list[Changes] = []

    def sources() -> list[Root]:
        polls.append(1)
        if len(polls) >= 4:
            polled.set()
        return [Root(1, str(docs))]

    watcher = KnowledgeWatcher(sources, seen.append, interval_s=0.02)
    watcher.start()
    try:
        assert watcher.ready.wait(WAIT_S)
        docs.rename(tmp_path / "away")
        assert polled.wait(WAIT_S)
        polled.clear()
        polls.clear()
        (tmp_path / "away").rename(docs)
        assert polled.wait(WAIT_S)
    finally:
        watcher.stop()
    assert seen == [Changes((), (), (), away=(str(docs),)), Changes((), (), (), back=(str(docs),))]


def test_a_folder_that_cannot_be_listed_keeps_its_files_is_said_and_is_read_again_once_it_can(
    tmp_path: Path, index: KnowledgeIndex
) -> None:
    notes = tmp_path / "notes"
    (notes / "locked" / "inner").mkdir(parents=True)
    (notes / "heron.md").write_text("# Herons\nThe heron count is 11.\n")
    secret = notes / "locked" / "inner" / "secret.md"
    secret.write_text("# Secret\nThe vault opens with the word MARIGOLD.\n")
    sources = [Root(1, str(notes))]
    first = Indexer(index, sources).run()
    assert (first.read, first.problems, index.unread_folders()) == (2, [], [])
    (notes / "new_note.md").write_text("# New\nA note added while locked: the egret count is 12.\n")
    (notes / "private.txt").write_text("Nobody may read this one.")
    with locked(notes / "locked"), locked(notes / "private.txt"), permissions_enforced():
        run = Indexer(index, sources).run()
    [problem] = run.problems
    assert problem.path == notes / "locked" and problem.unlisted and problem.cause == "permission denied"
    assert "cannot be listed (permission denied)" in problem.reason and not run.unreachable
    assert (run.read, run.skipped, run.dropped) == (1, 1, 0)  # (the new note read, private.txt skipped)
    assert index.skipped_files() == [(1, str(notes / "private.txt"), "private.txt cannot be read: permission denied.")]
    [unread] = index.unread_folders()
    assert unread == UnreadFolder(1, str(notes / "locked"), "permission denied", problem.reason, False, 1, 1)
    assert index.file(secret) is not None and "MARIGOLD" in " ".join(_texts(index, "vault word"))  # (kept)

    secret.write_text("# Secret\nThe vault now opens with the word TULIP.\n")  # (changed while it was locked)
    back = Indexer(index, sources).run()
    assert (back.read, back.dropped, back.problems, index.unread_folders()) == (1, 0, [], [])  # (secret.md)
    assert "TULIP" in " ".join(_texts(index, "vault word")) and "MARIGOLD" not in " ".join(_texts(index, "vault"))
    private = str(notes / "private.txt")  # (unchanged: skipped until it changes or the user asks: Try again)
    again = Indexer(index, sources, retry=Retry(paths=frozenset({private}))).run()
    assert again.read == 1 and index.file(private) is not None and index.file(private).state == "indexed"


def test_the_watcher_reports_a_folder_that_can_no_longer_be_listed_and_when_it_can_again(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "locked").mkdir(parents=True)
    (notes / "locked" / "secret.md").write_text("kept")
    sources = [Root(1, str(notes))]
    before, away_before = snapshot(sources)
    with locked(notes / "locked"), permissions_enforced():
        during, away = snapshot(sources, last=before)
    changes = compare(before, during, away_before, away)
    assert changes == Changes((), (), (), away=(str(notes / "locked"),)) and during == before
    after, away_after = snapshot(sources, last=during)
    assert compare(during, after, away, away_after) == Changes((), (), (), back=(str(notes / "locked"),))


def test_what_a_removed_source_could_not_list_is_forgotten_even_when_it_had_no_files(
    tmp_path: Path, index: KnowledgeIndex
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "heron.md").write_text("# Herons\nThe heron count is 11.\n")
    (tmp_path / "boxes" / "locked").mkdir(parents=True)  # (a source whose only folder cannot be listed)
    kept, boxes, away = Root(1, str(notes)), Root(2, str(tmp_path / "boxes")), Root(3, str(tmp_path / "not_there"))
    with locked(tmp_path / "boxes" / "locked"), permissions_enforced():
        Indexer(index, [kept, boxes, away], known={1, 2, 3}).run()
    assert [(u.source_id, u.files) for u in index.unread_folders()] == [(2, 0), (3, 0)]
    Indexer(index, [kept], known={1}).run()  # (both removed from the project)
    assert index.unread_folders() == [] and [f.source_id for f in index.files()] == [1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="capabilities and /proc are Linux's")
def test_the_readers_fork_server_is_started_before_permissions_are_taken_away(tmp_path: Path) -> None:
    script = (  # (a process of its own: this one's fork server may be running already)
        "import psutil\n"
        "from tests.helpers.permissions import permissions_enforced\n"
        "def caps(pid):\n"
        "    return [x.split()[1] for x in open(f'/proc/{pid}/status') if x.startswith('CapEff')][0]\n"
        "before = caps('thread-self')\n"
        "with permissions_enforced():\n"
        "    servers = [p for p in psutil.Process().children() if 'forkserver' in ' '.join(p.cmdline())]\n"
        "    print(len(servers), [caps(p.pid) for p in servers] == [before] * len(servers))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True"]  # (one, with every capability the test thread had)
