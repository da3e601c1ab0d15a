"""A project's knowledge index (projects/index.py) on a real SQLite file, and the walk of its sources
(projects/scan.py) on real folders: hidden folders, symlink loops, the file cap, pipes, files over the
size limit, a source that is not there, a folder gone while it is walked."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ember_chat.engine.attachments.chunking import Chunk, chunk_text
from ember_chat.engine.attachments.kinds import Limits
from ember_chat.engine.errors import StoreError
from ember_chat.engine.projects import scan as scanning
from ember_chat.engine.projects.index import (
    COMMON_MIN,
    LEAD_BOOST,
    UNREAD_QUERY,
    IndexCounts,
    KnowledgeIndex,
    knowledge_path,
)
from ember_chat.engine.projects.index_layout import FORMAT
from ember_chat.engine.projects.scan import FoundFile, ScanProblem, scan
from ember_chat.engine.storage.paths import AppPaths

HARBOUR = "The harbour master keeps the tide tables.\n\nPELICAN-42 is the code for the east gate."


def _chunks(*texts: str) -> list[Chunk]:
    return [Chunk(i, 0, None, text) for i, text in enumerate(texts)]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[KnowledgeIndex]:
    made = KnowledgeIndex(knowledge_path(AppPaths(tmp_path / "data", tmp_path / "config"), 7))
    yield made
    made.close()


def test_the_index_lives_under_the_data_folder_per_project(tmp_path: Path) -> None:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    assert knowledge_path(paths, 7) == tmp_path / "data" / "projects" / "7" / "knowledge.sqlite3"


def test_a_file_put_is_searchable_and_putting_it_again_replaces_its_passages(index: KnowledgeIndex) -> None:
    first = index.put_file(1, "/docs/harbour.txt", 90, 1_000, 0, chunk_text(HARBOUR, (), size=60))
    hits = index.bm25("What is the code for the east gate?", 5)
    assert len(hits) == 1 and "PELICAN-42" in index.passage(hits[0][0]).text
    assert index.file("/docs/harbour.txt").passages == 2
    again = index.put_file(1, "/docs/harbour.txt", 95, 2_000, 0, _chunks("The gate code changed to HERON-7."))
    assert again == first
    assert index.bm25("PELICAN", 5) == []  # (the old passages are gone from the FTS index too)
    assert [index.passage(pid).text for pid, _ in index.bm25("heron", 5)] == ["The gate code changed to HERON-7."]
    stored = index.file("/docs/harbour.txt")
    assert (stored.size, stored.mtime_ns, stored.state, stored.passages) == (95, 2_000, "indexed", 1)


def test_skipped_pending_and_dropped_files_and_the_counts(index: KnowledgeIndex) -> None:
    index.put_file(1, "/a/report.pdf", 500, 1, 3, _chunks("one", "two", "three"))
    index.skip_file(1, "/a/locked.pdf", 400, 2, "locked.pdf is protected by a password.")
    index.pend_files([(2, "/b/notes.md", 10, 3), (1, "/a/report.pdf", 501, 4)])
    assert index.file("/a/report.pdf").state == "indexed"  # (a file the index has keeps its row till re-read)
    assert index.counts() == IndexCounts(files=3, indexed=1, skipped=1, pending=1, pages=3, passages=3)
    assert index.file("/a/locked.pdf").reason == "locked.pdf is protected by a password."
    index.drop_file("/a/report.pdf")
    assert index.bm25("three", 5) == [] and index.file("/a/report.pdf") is None
    index.drop_source(1)
    assert [f.path for f in index.files()] == ["/b/notes.md"]


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


@pytest.mark.parametrize("removal", ["file", "source"])
def test_removed_knowledge_is_not_left_in_the_index_files(index: KnowledgeIndex, removal: str) -> None:
    secret = "Quokkazebra the payroll passphrase is xylophonequartz."
    index.put_file(1, "/a/secret.txt", 10, 1, 0, _chunks(secret, "another quokkazebra line"))
    index.put_file(2, "/b/kept.txt", 10, 1, 0, _chunks("The lighthouse keeper's notes."))
    words = [b"Quokkazebra", b"quokkazebra", b"xylophonequartz", b"passphrase"]
    assert all(w in _file_bytes(index.path) for w in words[1:])  # (in the WAL and/or the file: FTS terms too)
    if removal == "file":
        index.drop_file("/a/secret.txt")
    else:
        index.drop_source(1)
    stored = _file_bytes(index.path)
    assert [w for w in words if w in stored] == []
    assert [index.passage(pid).text for pid, _ in index.bm25("lighthouse keeper", 5)] == [
        "The lighthouse keeper's notes."
    ]


def test_an_index_of_this_format_is_opened_without_a_write(tmp_path: Path) -> None:
    """Opening never waits on the indexer's transaction: with another connection holding the write lock,
    a second connection opens and reads at once (no busy timeout)."""
    path = tmp_path / "knowledge.sqlite3"
    KnowledgeIndex(path).close()
    writer = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    try:
        writer.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        reader = KnowledgeIndex(path)
        try:
            assert reader.counts().files == 0 and reader.generation() == 1
        finally:
            reader.close()
        assert time.monotonic() - started < 1.0
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_the_generation_moves_with_a_write_through_any_connection(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.sqlite3"
    indexer, reader = KnowledgeIndex(path), KnowledgeIndex(path)
    try:
        before = reader.generation()
        indexer.put_file(1, "/a/x.txt", 10, 1, 0, _chunks("alpha"))
        fresh = KnowledgeIndex(path)
        assert fresh.generation() == reader.generation() > before
        fresh.close()
        moved = reader.generation()
        indexer.pend_files([(1, "/a/y.txt", 10, 1)])  # (no passage changed: the generation stays)
        assert reader.generation() == moved
        indexer.drop_file("/a/x.txt")
        assert reader.generation() > moved
    finally:
        indexer.close()
        reader.close()


def test_neighbours_and_a_passage_that_is_gone(index: KnowledgeIndex) -> None:
    index.put_file(1, "/a/story.txt", 10, 1, 0, _chunks("alpha", "bravo", "charlie"))
    ids = {index.passage(pid).text: pid for pid, _ in index.bm25("alpha bravo charlie", 5)}
    assert [p.text for p in index.neighbours(ids["bravo"])] == ["alpha", "charlie"]
    assert [p.text for p in index.neighbours(ids["alpha"])] == ["bravo"]
    index.drop_file("/a/story.txt")
    with pytest.raises(StoreError, match="no longer in the project's knowledge"):
        index.passage(ids["alpha"])


def test_vectors_are_kept_for_one_model_and_never_searched_with_another(index: KnowledgeIndex) -> None:
    index.put_file(1, "/a/x.txt", 10, 1, 0, _chunks("alpha", "bravo"))
    ids = [pid for pid, _ in index.passages_without_vectors(10)]
    assert index.vectors_for("model-a") is None
    assert index.use_embedding_model("model-a") is False  # (there were no vectors to delete)
    before = index.generation()
    index.put_vectors("model-a", ids, np.array([[3.0, 4.0], [0.0, 2.0]], dtype=np.float32))
    assert index.generation() != before
    stored = index.vectors_for("model-a")
    assert stored is not None and stored.passage_ids.tolist() == ids
    np.testing.assert_allclose(stored.matrix, [[0.6, 0.8], [0.0, 1.0]], rtol=1e-6)
    assert stored.matrix.dtype == np.float32
    assert index.vectors_for("model-b") is None
    with pytest.raises(StoreError):
        index.put_vectors("model-b", ids, np.ones((2, 2), dtype=np.float32))
    with pytest.raises(StoreError, match="vectors of 3 numbers, the index holds 2"):
        index.put_vectors("model-a", ids, np.ones((2, 3), dtype=np.float32))
    assert index.use_embedding_model("model-b") is True  # (model-a's vectors deleted)
    assert index.vectors_for("model-a") is None and len(index.passages_without_vectors(10)) == 2
    index.put_vectors("model-b", ids, np.ones((2, 3), dtype=np.float32))
    index.put_file(1, "/a/x.txt", 11, 2, 0, _chunks("delta"))  # (re-read: the old passages' vectors go)
    assert index.vectors_for("model-b").passage_ids.tolist() == []


def test_the_index_is_kept_in_its_file(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    first = KnowledgeIndex(path)
    first.put_file(1, "/a/x.txt", 10, 1, 0, _chunks("kept across opens"))
    first.close()
    second = KnowledgeIndex(path)
    try:
        assert [second.passage(pid).text for pid, _ in second.bm25("kept", 3)] == ["kept across opens"]
    finally:
        second.close()


def test_a_file_that_is_not_an_index_is_a_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "knowledge.sqlite3"
    bad.write_bytes(b"not a database at all " * 100)
    with pytest.raises(StoreError, match="knowledge index"):
        KnowledgeIndex(bad)


def test_words_match_their_stems_and_a_heading_ranks_its_passages(index: KnowledgeIndex) -> None:
    index.put_file(
        1, "/docs/manual.txt", 10, 1, 0,
        _chunks("Options change the order of lines in the output.", "It copies lines to the output."),
        ["Sorting the output", "Concatenate and write files in reverse"],
    )  # fmt: skip
    best = index.bm25("lines in reverse order", 5)[0][0]
    assert index.passage(best).text == "It copies lines to the output."  # (its heading says 'reverse')
    index.put_file(1, "/docs/tac.txt", 10, 1, 0, _chunks("It copies each file, reversing the records."))
    assert "reversing" in index.passage(index.bm25("reverse records", 5)[0][0]).text  # (porter stemming)
    assert index.bm25("manual", 5) and index.bm25("tac", 5)  # (the file's name is in the title too)
    with pytest.raises(ValueError, match="headings"):
        index.put_file(1, "/docs/x.txt", 1, 1, 0, _chunks("a", "b"), ["one heading"])


def test_a_sections_first_passage_wins_a_near_tie(index: KnowledgeIndex) -> None:
    deeper = "The tool prints the gate codes."
    lead = "The tool prints all of the gate codes."  # (longer: its own bm25 score is a little worse)
    index.put_file(
        1, "/docs/manual.txt", 10, 1, 0,
        _chunks("About the harbour.", deeper, lead, "Then it stops."),
        ["Harbour", "Harbour", "Locks", "Locks"],
    )  # fmt: skip
    ids = {index.passage(pid).text: pid for pid, _ in index.bm25("gate codes", 5)}
    assert index.section_leads(list(ids.values())) == {ids[lead]}
    opening = index.passages_of(index.file("/docs/manual.txt").id)[0].id  # (no passage before it: a heading)
    assert index.section_leads([opening]) == {opening}
    (first, first_score), (second, second_score) = index.bm25("gate codes", 5)
    assert (first, second) == (ids[lead], ids[deeper])
    assert first_score / (1 + LEAD_BOOST) > second_score  # (bm25 is negative: before the boost it was behind)


def test_a_file_without_headings_has_no_section_leads(index: KnowledgeIndex) -> None:
    index.put_file(1, "/docs/a.txt", 10, 1, 0, _chunks("The gate code is HERON.", "Nothing else."))
    index.put_file(1, "/docs/b.txt", 10, 1, 0, _chunks("Nothing here.", "The gate code is HERON."))
    found = index.bm25("gate code", 5)
    assert index.section_leads([pid for pid, _ in found]) == set()
    assert found[0][1] == pytest.approx(found[1][1])  # (the first passage of a.txt is not boosted)


def test_a_word_in_most_passages_of_a_big_index_is_left_out_of_the_search(index: KnowledgeIndex) -> None:
    common = COMMON_MIN + 500  # (in more than COMMON_SHARE of the passages and more than COMMON_MIN of them)
    texts = [f"Passage {n} says the gate is shut." for n in range(common)]
    texts += ["The heron gate is open at dawn.", "A heron nests by the mill."]
    index.put_file(1, "/docs/gates.txt", 1, 1, 0, _chunks(*texts))
    assert index.search_words("When is the heron gate open?") == ["heron", "open"]  # ('gate' left out)
    best = [index.passage(pid).text for pid, _ in index.bm25("When is the heron gate open?", 2)]
    assert best == ["The heron gate is open at dawn.", "A heron nests by the mill."]
    assert index.search_words("Is the gate shut?") == ["shut"]  # (all common: the rarest one searched)
    assert index.search_words("gates") == ["gates"]  # (a common word alone is searched)
    assert index.search_words("What about zebras?") == []  # (in no passage: nothing to search)


def test_a_small_index_searches_every_word(index: KnowledgeIndex) -> None:
    index.put_file(1, "/docs/gates.txt", 1, 1, 0, _chunks("The gate is shut.", "The gate is open.", "A gate."))
    assert index.search_words("Is the gate open or shut?") == ["gate", "open", "shut"]
    assert len(index.bm25("Is the gate open or shut?", 5)) == 3


_FORMAT_1 = """
CREATE TABLE files (id INTEGER PRIMARY KEY, source_id INTEGER NOT NULL, path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, state TEXT NOT NULL, reason TEXT,
    pages INTEGER NOT NULL DEFAULT 0, passages INTEGER NOT NULL DEFAULT 0, indexed_at REAL);
CREATE TABLE passages (id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, page INTEGER, text TEXT NOT NULL);
CREATE VIRTUAL TABLE passages_fts USING fts5(text, content='passages', content_rowid='id');
CREATE TRIGGER passages_ai AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TABLE vectors (passage_id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO files VALUES (1, 1, '/a/old.txt', 10, 5, 'indexed', NULL, 0, 1, 0.0);
INSERT INTO files VALUES (2, 1, '/a/locked.pdf', 10, 5, 'skipped', 'locked.pdf is protected by a password.', 0, 0, 0.0);
INSERT INTO passages VALUES (1, 1, 0, NULL, 'an old passage about herons');
INSERT INTO vectors VALUES (1, zeroblob(16));
INSERT INTO meta VALUES ('embedding_model', 'm:1'), ('dim', '4');
"""


def test_an_index_of_the_older_format_is_emptied_and_its_files_read_again(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(_FORMAT_1)
    old.close()
    index = KnowledgeIndex(path)
    try:
        assert index.bm25("herons", 5) == []
        assert index.file("/a/old.txt").state == "pending"  # (the indexer's next run reads it again)
        assert index.file("/a/locked.pdf").state == "skipped"  # (nothing to read again)
        assert index.counts() == IndexCounts(files=2, indexed=0, skipped=1, pending=1, pages=0, passages=0)
        assert index.vectors_for("m:1") is None
        index.put_file(1, "/a/old.txt", 10, 5, 0, _chunks("a new passage about herons"))
        assert len(index.bm25("heron", 5)) == 1
    finally:
        index.close()
    again = KnowledgeIndex(path)  # (opened at the current format: nothing emptied)
    try:
        assert len(again.bm25("heron", 5)) == 1 and again.file("/a/old.txt").state == "indexed"
    finally:
        again.close()


def test_an_index_of_a_newer_format_is_a_sentence_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.sqlite3"
    KnowledgeIndex(path).close()
    newer = sqlite3.connect(path)
    newer.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(FORMAT + 1),))
    newer.commit()
    newer.close()
    with pytest.raises(StoreError, match="newer Ember"):
        KnowledgeIndex(path)
    check = sqlite3.connect(path)
    assert check.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (str(FORMAT + 1),)
    check.close()


# ----- the walk
def _found(items: list[FoundFile | ScanProblem]) -> dict[str, FoundFile]:
    return {str(f.path): f for f in items if isinstance(f, FoundFile)}


def _problems(items: list[FoundFile | ScanProblem]) -> list[ScanProblem]:
    return [p for p in items if isinstance(p, ScanProblem)]


def test_the_walk_finds_the_files_ember_reads_and_leaves_hidden_and_tool_folders(tmp_path: Path) -> None:
    for name in ("a.txt", "b.md", "c.pdf", "d.docx", "e.py", "sub/f.csv", "Makefile"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    for name in ("photo.png", "song.mp3", "binary", ".hidden.txt", ".git/HEAD.txt", "node_modules/m.js"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    items = list(scan(tmp_path))
    assert _problems(items) == []
    names = sorted(Path(p).relative_to(tmp_path).as_posix() for p in _found(items))
    assert names == ["Makefile", "a.txt", "b.md", "c.pdf", "d.docx", "e.py", "sub/f.csv"]
    one = _found(items)[str(tmp_path / "a.txt")]
    stat = (tmp_path / "a.txt").stat()
    assert (one.size, one.mtime_ns, one.skip) == (1, stat.st_mtime_ns, None)


def test_a_symlink_loop_is_reported_and_a_linked_folder_is_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "deep").mkdir(parents=True)
    (root / "deep" / "note.txt").write_text("x")
    (root / "deep" / "up").symlink_to(root, target_is_directory=True)  # a loop
    shared = root / "deep" / "shared"
    shared.mkdir()
    (shared / "shared.md").write_text("y")
    (root / "later").mkdir()  # (walked after deep)
    (root / "later" / "linked").symlink_to(shared, target_is_directory=True)  # (a folder inside the source's)
    items = list(scan(root))
    found = sorted(Path(p).relative_to(root).as_posix() for p in _found(items))
    assert found == ["deep/note.txt", "deep/shared/shared.md"]
    reasons = {p.path.name: p.reason for p in _problems(items)}
    assert set(reasons) == {"up", "linked"}
    assert "already indexed (a link loop?)" in reasons["up"]


def test_a_link_leading_outside_the_source_s_folder_is_listed_and_not_followed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "x").mkdir(parents=True)
    (home / "x" / "key.json").write_text('{"secret": "hunter2"}')
    (home / "diary.txt").write_text("private")
    root = home / "project" / "src"
    (root / "inner").mkdir(parents=True)
    (root / "inner" / "plan.md").write_text("the plan")
    (root / "docs").symlink_to(home, target_is_directory=True)  # src/docs -> ~/
    (root / "notes.json").symlink_to(home / "x" / "key.json")  # notes.json -> ~/x/key.json
    (root / "up").symlink_to(home / "project", target_is_directory=True)  # (above the source: outside too)
    (root / "plan-link.md").symlink_to(root / "inner" / "plan.md")  # inside: followed
    items = list(scan(root))
    found = _found(items)
    names = sorted(Path(p).relative_to(root).as_posix() for p in found)
    assert names == ["inner/plan.md", "notes.json", "plan-link.md"]
    assert found[str(root / "plan-link.md")].skip is None
    skipped = found[str(root / "notes.json")].skip
    assert skipped == f"notes.json is a link to {home / 'x' / 'key.json'}, outside the folder: not followed."
    problems = {p.path.name: p for p in _problems(items)}
    assert set(problems) == {"docs", "up"} and not problems["docs"].unlisted
    assert problems["docs"].reason == f"{root / 'docs'} is a link to {home}, outside the folder: not followed."
    # a source that is itself a link the user added to a file elsewhere is read (the user chose it)
    [chosen] = list(scan(root / "notes.json"))
    assert isinstance(chosen, FoundFile) and chosen.skip is None


def test_past_the_file_cap_one_problem_says_the_rest_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scanning, "MAX_FILES", 5)
    for i in range(12):
        (tmp_path / f"n{i:02}.txt").write_text("x")
    items = list(scan(tmp_path))
    assert len(_found(items)) == 5
    [problem] = _problems(items)
    assert "more files than a project indexes (5)" in problem.reason and problem.path == tmp_path


def test_two_thousand_files_are_walked_quickly(tmp_path: Path) -> None:
    for d in range(20):
        folder = tmp_path / f"d{d}"
        folder.mkdir()
        for i in range(100):
            (folder / f"f{i}.txt").write_text("x")
    started = time.monotonic()
    items = list(scan(tmp_path))
    took = time.monotonic() - started
    assert len(_found(items)) == 2000 and _problems(items) == []
    assert took < 2.0, f"walking 2,000 files took {took:.2f} s"


def test_a_pipe_a_file_too_big_an_empty_file_and_a_link_that_cannot_be_followed(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.txt")  # (opening it to read would wait for a writer forever)
    (tmp_path / "big.txt").write_text("x" * 5000)
    (tmp_path / "empty.md").write_text("")
    (tmp_path / "a.txt").symlink_to(tmp_path / "b.txt")
    (tmp_path / "b.txt").symlink_to(tmp_path / "a.txt")  # (stat: too many levels of symbolic links)
    items = list(scan(tmp_path, Limits(max_bytes=1000)))
    found = _found(items)
    assert "not a plain file" in found[str(tmp_path / "pipe.txt")].skip
    assert "5 KB; files can be at most 1000 B" in found[str(tmp_path / "big.txt")].skip
    assert "empty" in found[str(tmp_path / "empty.md")].skip
    problems = {p.path.name: p.reason for p in _problems(items)}
    assert set(problems) == {"a.txt", "b.txt"} and "symbolic links" in problems["a.txt"]


def test_a_source_that_is_not_there_or_not_a_folder_and_a_folder_gone_mid_walk(tmp_path: Path) -> None:
    [gone] = list(scan(tmp_path / "unplugged-drive"))
    assert isinstance(gone, ScanProblem) and gone.unlisted and "disconnected drive" in gone.reason
    (tmp_path / "note.txt").write_text("x")
    [under_a_file] = list(scan(tmp_path / "note.txt" / "inside"))
    assert isinstance(under_a_file, ScanProblem) and "cannot be read (not a directory)" in under_a_file.reason
    assert under_a_file.cause == "not a directory" and gone.cause == "not there"
    [one] = list(scan(tmp_path / "note.txt"))
    assert isinstance(one, FoundFile) and one.path == tmp_path / "note.txt"
    (tmp_path / "photo.png").write_bytes(b"x")
    [refused] = list(scan(tmp_path / "photo.png"))
    assert isinstance(refused, ScanProblem) and "not a kind of file" in refused.reason
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.txt").write_text("x")
    walked: list[bool] = []

    def remove_sub_once() -> bool:  # (called at each folder: the second is sub, removed just before it)
        walked.append(True)
        if len(walked) == 2:
            (tmp_path / "sub" / "inner.txt").unlink()
            (tmp_path / "sub").rmdir()
        return False

    items = list(scan(tmp_path, stopped=remove_sub_once))
    assert str(tmp_path / "note.txt") in _found(items)
    [problem] = _problems(items)
    assert problem.path == tmp_path / "sub" and "no longer there" in problem.reason and problem.unlisted
    assert not problem.missing  # (a folder inside the source: the source itself is there)
    assert gone.missing

    # the source's own folder gone between its stat and its listing (a drive unplugged just then): missing too
    drive = tmp_path / "drive"
    drive.mkdir()

    def unplug_once() -> bool:  # (called before the first folder, the source's own, is listed)
        if drive.exists():
            drive.rmdir()
        return False

    [unplugged] = list(scan(drive, stopped=unplug_once))
    assert isinstance(unplugged, ScanProblem) and unplugged.path == drive and unplugged.missing


def test_files_kept_under_unread_folders_are_counted_through_the_path_index(index: KnowledgeIndex) -> None:
    sep = os.sep
    paths = [f"{sep}src{sep}locked{sep}a.md", f"{sep}src{sep}locked{sep}deep{sep}b.md", f"{sep}src{sep}locked"]
    paths += [f"{sep}src{sep}locked-x{sep}c.md", f"{sep}src{sep}locked0{sep}d.md", f"{sep}src{sep}lockedx.md"]
    for i, path in enumerate(paths):
        index.put_file(1, path, 10, i, 1, _chunks(f"passage {i}"))
    index.set_unread({1}, [(1, f"{sep}src{sep}locked", "permission denied", "r", False)])
    [unread] = index.unread_folders()
    assert (unread.files, unread.passages) == (3, 3)  # (the folder, a file in it and deeper; not its neighbours)
    with sqlite3.connect(index.path) as db:
        plan = [str(r[-1]) for r in db.execute("EXPLAIN QUERY PLAN " + UNREAD_QUERY, (sep, chr(ord(sep) + 1)))]
    assert not [step for step in plan if step.startswith("SCAN f")], plan  # (not every file for each folder)
    assert [step for step in plan if step.startswith("SEARCH f USING INDEX sqlite_autoindex_files_1 (path")], plan


def test_a_folder_unread_by_two_nested_sources_is_kept_for_each(index: KnowledgeIndex) -> None:
    folder = os.path.join(os.sep, "x", "y", "locked")
    index.set_unread(
        {1, 2}, [(1, folder, "permission denied", "r1", False), (2, folder, "permission denied", "r2", False)]
    )
    assert [(u.source_id, u.reason) for u in index.unread_folders()] == [(1, "r1"), (2, "r2")]
    index.set_unread({2}, [])  # (the inner source walked again, the outer one paused: its row stays)
    assert [(u.source_id, u.reason) for u in index.unread_folders()] == [(1, "r1")]


def test_an_index_whose_unread_folders_were_keyed_by_path_alone_is_opened_with_them_made_again(
    tmp_path: Path,
) -> None:
    where = tmp_path / "knowledge.sqlite3"
    made = KnowledgeIndex(where)
    made.put_file(1, os.path.join(os.sep, "s", "a.md"), 1, 1, 1, _chunks(HARBOUR))
    made.close()
    with sqlite3.connect(where) as db:  # (the table as an earlier build made it, with a row)
        db.execute("DROP TABLE unread_folders")
        db.execute(
            "CREATE TABLE unread_folders (path TEXT PRIMARY KEY, source_id INTEGER NOT NULL, cause TEXT NOT NULL, "
            "reason TEXT NOT NULL, missing INTEGER NOT NULL DEFAULT 0)"
        )
        db.execute("INSERT INTO unread_folders VALUES ('/s/locked', 1, 'permission denied', 'r', 0)")
    opened = KnowledgeIndex(where)
    try:
        assert opened.unread_folders() == [] and opened.counts().passages == 1  # (its passages kept)
        opened.set_unread(
            {1, 2}, [(1, "/s/locked", "permission denied", "r", False), (2, "/s/locked", "c", "r", False)]
        )
        assert [u.source_id for u in opened.unread_folders()] == [1, 2]
    finally:
        opened.close()
    again = KnowledgeIndex(where)  # (opened again: nothing made again)
    try:
        assert [u.source_id for u in again.unread_folders()] == [1, 2]
    finally:
        again.close()
