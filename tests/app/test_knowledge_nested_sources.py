"""A folder or file inside a knowledge folder of the project, added in the real window (issue 34): refused
with a sentence naming the folder that holds it, as the same folder twice is; and a folder around sources
of the project added: the sources inside are taken out of the list with a note, their files given to it
without being read again. Real SQLite files, real folders, real readers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.index import INDEXED, KnowledgeIndex
from ember_chat.engine.projects.indexer import IndexRun
from tests.helpers.projects_window import indexed as _indexed
from tests.helpers.projects_window import settings_dialog as _dialog

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def test_a_path_inside_a_folder_is_refused_and_a_parent_takes_the_folders_place(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    top = tmp_path / "work"
    docs = top / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia.\n")
    (docs / "sub" / "budget.md").write_text("# Budget\n\nThe survey costs 400 euros.\n")
    w = make_window()
    k = w.projects.indexing
    project = w.projects.new_project("Survey")
    assert project is not None
    fid = project.folder_id
    panel = _dialog(w).knowledge
    _dialog(w).tabs.setCurrentWidget(panel)  # (as the user sees it: the screenshots)
    panel.add_paths([str(docs)])
    _indexed(qtbot, w, fid)
    runs: list[IndexRun] = []
    k.finished.connect(lambda _fid, run: runs.append(run))

    for inner in (docs / "sub", docs / "sub" / "budget.md"):
        panel.add_paths([str(inner)])
        assert not panel.add_problems.isHidden()
        assert panel.add_problems.text() == (
            f"{inner} is inside {docs}, which is in the project “Survey” already: its files are read from there."
        )
        assert [panel.sources.topLevelItem(i).text(0) for i in range(panel.sources.topLevelItemCount())] == [str(docs)]
        assert not k.running(fid)  # (nothing added: no run)

    # a folder beside it, added after it: the folder around docs gets an id of its own (not docs' again)
    beside = tmp_path / "beside"
    beside.mkdir()
    (beside / "hills.md").write_text("# Hills\n\nThe Serra da Estrela is the highest.\n")
    panel.add_paths([str(beside)])
    _indexed(qtbot, w, fid)
    (inner_source,) = [s for s in panel.listed() if s.path == str(docs)]

    # the folder around it: taken in its place, the two files handed over unread, the new one read
    (top / "lakes.txt").write_text("Lake Alqueva is a reservoir.\n")
    panel.add_paths([str(top)])
    assert panel.add_problems.text() == (
        f"{docs} is inside {top}: it was taken out of the list, its files are read from there."
    )
    _indexed(qtbot, w, fid)
    assert [panel.sources.topLevelItem(i).text(0) for i in range(panel.sources.topLevelItemCount())] == [
        str(beside),
        str(top),
    ]
    (parent,) = [s for s in panel.listed() if s.path == str(top)]
    assert parent.id > inner_source.id + 1  # (a new id: the files are given over, not kept under the same one)
    assert [(r.read, r.dropped, r.stopped) for r in runs] == [(1, 0, False), (1, 0, False)]  # (beside, then lakes)
    index = KnowledgeIndex(k.index_path(fid))
    try:
        held = {Path(f.path).name: (f.source_id, f.state) for f in index.files()}
    finally:
        index.close()
    assert held == {
        "rivers.md": (parent.id, INDEXED),
        "budget.md": (parent.id, INDEXED),
        "lakes.txt": (parent.id, INDEXED),
        "hills.md": (held["hills.md"][0], INDEXED),
    }
    qtbot.waitUntil(lambda: panel.sources.topLevelItem(1).text(1).startswith("3 files"), timeout=10_000)
    _dialog(w).reject()
