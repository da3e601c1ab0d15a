"""An index of an older format (projects/index_layout.py FORMAT) brought up to date by the indexer: opened, it
keeps its files as pending and no passages; the next run reads every file again, in real child
processes, into the current layout (each passage's section heading searchable)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.index_layout import FORMAT
from ember_chat.engine.projects.indexer import Indexer
from tests.helpers.knowledge_sources import Root

FILLER = "".join(f"Paragraph {n} is about boats, ropes and the weather at the quay.\n\n" for n in range(30))
GUIDE = f"# Harbour guide\n\n{FILLER}## Tide tables\n\n{FILLER}The master pins them on the door.\n"


def test_an_older_index_is_read_again_by_the_next_run(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(GUIDE)
    (docs / "notes.txt").write_text("The pier was rebuilt in spring.\n")
    path = tmp_path / "knowledge.sqlite3"
    index = KnowledgeIndex(path)
    try:
        assert Indexer(index, [Root(1, str(docs))]).run().read == 2
    finally:
        index.close()
    older = sqlite3.connect(path)  # (as an Ember of the previous format left it)
    older.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(FORMAT - 1),))
    older.commit()
    older.close()

    index = KnowledgeIndex(path)
    try:
        assert {f.state for f in index.files()} == {"pending"} and index.counts().passages == 0
        again = Indexer(index, [Root(1, str(docs))]).run()
        assert (again.read, again.skipped, again.dropped) == (2, 0, 0)
        assert {f.state for f in index.files()} == {"indexed"}
        under = [index.passage(pid) for pid, _ in index.bm25("tides", 5)]  # (found by their heading alone)
        last = next(p for p in under if "pins them" in p.text)
        assert last.file_path == str(docs / "guide.md") and "tide" not in last.text.lower()
        assert index.bm25("pier", 1) and Indexer(index, [Root(1, str(docs))]).run().read == 0
    finally:
        index.close()
    check = sqlite3.connect(path)
    assert check.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (str(FORMAT),)
    check.close()
