"""A knowledge folder deleted from disk (or on a drive unplugged) is shown as not there in Project settings ▸
Knowledge, its passages kept (the engine keeps them until it is back or removed): the watcher sees its path
go, the indexer (off the GUI thread) says it is not there, and the row says so, its counts kept; when it is
back it is indexed again and the row is as before. Real folders, removed and put back."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.index import KnowledgeIndex
from tests.helpers.projects_window import WAIT_MS, indexed, settings_dialog

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def test_a_folder_deleted_from_disk_is_said_not_there_its_passages_kept_until_it_is_back(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "herons.txt").write_text("The grey heron nests in colonies by the river.\n")
    w = make_window()
    k = w.projects.indexing
    k.watch_interval_s = 0.1
    project = w.projects.new_project("Herons")
    assert project is not None
    fid = project.folder_id
    panel = settings_dialog(w).knowledge
    panel.add_paths([str(docs)])
    indexed(qtbot, w, fid)
    row = panel.sources.topLevelItem(0)
    qtbot.waitUntil(lambda: row.text(1) == "1 file, 1 passage", timeout=WAIT_MS)
    assert panel.progress_text.text().startswith("Up to date")
    qtbot.waitUntil(lambda: k.watching(fid), timeout=WAIT_MS)

    shutil.rmtree(docs)  # (as an unplugged drive: its path is not there)
    qtbot.waitUntil(lambda: row.text(1).startswith("Not there"), timeout=WAIT_MS)
    indexed(qtbot, w, fid)
    assert row.text(1) == "Not there — 1 file, 1 passage kept until it is back or removed"
    assert "is not there (a disconnected drive, or moved or deleted?)" in row.toolTip(1)
    assert row.data(1, Qt.ItemDataRole.ForegroundRole) == panel.palette().link()
    assert not panel.progress_text.text().startswith("Up to date") and "is not there" in panel.progress_text.text()
    index = KnowledgeIndex(k.index_path(fid))
    try:  # its passages are kept: answers may still cite them
        assert [Path(f.path).name for f in index.files()] == ["herons.txt"]
        assert index.bm25("heron colonies", 5)
    finally:
        index.close()

    # the dialog opened again says the same (the state is the window's, not the dialog's)
    settings_dialog(w).reject()
    qtbot.waitUntil(lambda: w.projects.settings_dialog is None, timeout=WAIT_MS)
    w.projects.open_settings(fid)
    panel = settings_dialog(w).knowledge
    indexed(qtbot, w, fid)
    row = panel.sources.topLevelItem(0)
    assert row.text(1) == "Not there — 1 file, 1 passage kept until it is back or removed"
    assert "is not there" in panel.progress_text.text()
    panel.sources.setCurrentItem(row)
    assert panel.remove.isEnabled()  # (the user can take it out of the project)

    # back (the drive plugged in again): indexed again, the row as before
    docs.mkdir()
    (docs / "herons.txt").write_text("The grey heron nests in colonies by the river.\n")
    qtbot.waitUntil(lambda: row.text(1) == "1 file, 1 passage", timeout=WAIT_MS)
    indexed(qtbot, w, fid)
    assert row.data(1, Qt.ItemDataRole.ForegroundRole) is None
    assert panel.progress_text.text().startswith("Up to date")
    settings_dialog(w).reject()
