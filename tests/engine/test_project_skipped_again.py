"""Skipped files read again (issue 34): a file skipped because no reader process could start (not the
file's fault) is marked so in the index and read at the next run that retries reader failures (the
window's first after Ember starts, the CLI's); a file skipped for its content stays skipped until it
changes or the user's Try again names it. The failure is real: the indexer runs in a child Python whose
open-file limit leaves no room for the reader's pipe once the folder is walked; the files are real."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from ember_chat.engine.projects.index import INDEXED, SKIPPED, KnowledgeIndex
from ember_chat.engine.projects.indexer import Indexer, Retry
from tests.helpers.knowledge_sources import Root

# the indexer with room for one file's bytes to be opened but not for a reader's pipe (two descriptors)
_NO_READER = textwrap.dedent(
    """
    import os, resource, sys
    from ember_chat.engine.projects.index import KnowledgeIndex
    from ember_chat.engine.projects.indexer import Indexer
    from tests.helpers.knowledge_sources import Root

    index = KnowledgeIndex(sys.argv[1])
    index.files()  # (its WAL open before the limit)
    limited = []

    def progress(_p):
        if not limited:  # (walked: the first file is about to be read)
            free = os.open(os.devnull, os.O_RDONLY)
            os.close(free)
            resource.setrlimit(resource.RLIMIT_NOFILE, (free + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
            limited.append(free)

    run = Indexer(index, [Root(1, sys.argv[2])]).run(progress)
    print(run.read, run.skipped)
    """
)


def _index_without_readers(index_path: Path, folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _NO_READER, str(index_path), str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_files_a_reader_could_not_start_for_are_read_at_the_next_start_and_content_skips_stay(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia.\n")
    (docs / "notes.txt").write_text("Meeting notes: the survey starts in May.\n")
    path = tmp_path / "knowledge.sqlite3"
    assert _index_without_readers(path, docs) == "0 2"
    index = KnowledgeIndex(path)
    try:
        files = index.files()
        assert [(f.state, f.reader_failed) for f in files] == [(SKIPPED, True), (SKIPPED, True)]
        assert all("no process could start to read it" in (f.reason or "") for f in files)

        # a binary file under a text name: skipped for its content
        (docs / "broken.txt").write_bytes(bytes(range(256)) * 64)
        source = [Root(1, str(docs))]
        run = Indexer(index, source).run()  # (a run that retries nothing: as every run after the first)
        assert (run.read, run.skipped) == (0, 1)
        assert {Path(f.path).name: (f.state, f.reader_failed) for f in index.files()} == {
            "broken.txt": (SKIPPED, False),
            "notes.txt": (SKIPPED, True),
            "rivers.md": (SKIPPED, True),
        }

        # the next start: the reader's failures are read, the file skipped for its content is not
        run = Indexer(index, source, retry=Retry(reader_failed=True)).run()
        assert (run.read, run.skipped) == (2, 0)
        states = {Path(f.path).name: (f.state, f.reason, f.reader_failed) for f in index.files()}
        assert states["notes.txt"] == (INDEXED, None, False) and states["rivers.md"] == (INDEXED, None, False)
        assert states["broken.txt"][0] == SKIPPED and states["broken.txt"][1]
        assert index.counts().passages >= 2

        # the user's Try again reads it again, whatever the reason: still not text, still skipped
        before = index.file(docs / "broken.txt")
        assert before is not None and before.indexed_at is not None
        run = Indexer(index, source, retry=Retry(paths=frozenset({str(docs / "broken.txt")}))).run()
        assert (run.read, run.skipped) == (0, 1)
        after = index.file(docs / "broken.txt")
        assert after is not None and after.state == SKIPPED and (after.indexed_at or 0) > before.indexed_at
    finally:
        index.close()


def test_an_index_made_before_skips_said_whose_they_were_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.sqlite3"
    index = KnowledgeIndex(path)
    index.skip_file(1, "/docs/a.pdf", 10, 1, "a.pdf is protected by a password.")
    said = (  # (a reader's failure, as an Ember before the column said it: tried again once at the next start)
        "c.md could not be read: the reader stopped unexpectedly.",
        "d.md could not be read: its reader crashed.",
        "e.md could not be read: no process could start to read it ([Errno 24] Too many open files).",
        "f.md was not read: Ember reads at most 2 files at once for API requests, and other files kept them busy "
        "for 5 seconds.",
    )
    for reason in said:
        index.skip_file(1, f"/docs/{reason[0]}.md", 10, 1, reason)
    index.skip_file(1, "/docs/g.md", 10, 1, "g.md is not text: the reader stopped unexpectedly. at 3")
    index.close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE files DROP COLUMN reader_failed")
    db.commit()
    db.close()
    index = KnowledgeIndex(path)
    try:
        old, *failed, other = index.files()
        assert old.state == SKIPPED and not old.reader_failed and old.reason == "a.pdf is protected by a password."
        assert [(f.reason, f.reader_failed) for f in failed] == [(r, True) for r in said]
        assert not other.reader_failed  # (the sentence must end as the reader's does)
        index.close()
        db = sqlite3.connect(path)  # (once: a flag cleared later is not set again at the next open)
        db.execute("UPDATE files SET reader_failed = 0")
        db.commit()
        db.close()
        index = KnowledgeIndex(path)
        assert not any(f.reader_failed for f in index.files())
        index.skip_file(1, "/docs/b.md", 10, 1, "b.md could not be read: the reader stopped unexpectedly.", True)
        new = index.file("/docs/b.md")
        assert new is not None and new.reader_failed
    finally:
        index.close()
