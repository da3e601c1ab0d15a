"""A folder inside a knowledge source that cannot be listed (permission denied: chmod 000) is said in Project
settings ▸ Knowledge (issue 34): its row says which folder and why, and that the files indexed in it are
kept; Show skipped files… has a row for the folder with its reason; when it can be listed again, the next
run walks it and the report goes. Real folders made unlistable for real (tests/helpers/permissions.py: as
root too), a real index, the real window."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTableView
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.indexer import Indexer
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.permissions import locked, permissions_enforced
from tests.helpers.projects_window import WAIT_MS, indexed, settings_dialog

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def test_a_folder_that_cannot_be_listed_is_said_with_its_files_kept_and_goes_once_it_can(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    (notes / "locked" / "inner").mkdir(parents=True)
    (notes / "heron.md").write_text("# Herons\nThe heron count is 11.\n")
    (notes / "locked" / "inner" / "secret.md").write_text("# Secret\nThe vault opens with MARIGOLD.\n")
    w = make_window()
    k = w.projects.indexing
    store = ProjectStore(w.store)
    fid = store.create("Notes").folder_id
    source = store.add_source(fid, notes)
    k.pause(fid)  # (the window's runs wait: this test's run below is the one that meets the locked folder)
    index = KnowledgeIndex(k.index_path(fid))
    try:
        Indexer(index, [source]).run()
        (notes / "new_note.md").write_text("# New\nAn egret was seen.\n")
        with locked(notes / "locked"), permissions_enforced():  # (a real refusal, as the watcher's run meets it)
            run = Indexer(index, [source]).run()
    finally:
        index.close()
    assert run.read == 1 and [p.cause for p in run.problems] == ["permission denied"]

    w.projects.open_settings(fid)
    panel = settings_dialog(w).knowledge
    row = panel.sources.topLevelItem(0)
    qtbot.waitUntil(lambda: "could not be read" in row.text(1), timeout=WAIT_MS)
    assert row.text(1) == (
        "Paused · 3 files, 3 passages · 1 folder could not be read: locked (permission denied), 1 file kept"
    )
    kept = "locked cannot be listed (permission denied); the files indexed in it are kept until it can be read again"
    assert kept in row.toolTip(1)
    assert row.data(1, Qt.ItemDataRole.ForegroundRole) == panel.palette().link()
    assert panel.show_skipped.isEnabled()
    panel.open_skipped()
    dialog = panel.skipped_list
    assert dialog is not None
    model = dialog.findChild(QTableView).model()
    assert model.rowCount() == 1 and model.index(0, 0).data() == str(notes / "locked") + "/"
    assert model.index(0, 1).data() == (
        "Folder cannot be read (permission denied); the 1 file indexed in it is kept, not read again, until it "
        "can be read or is removed."
    )
    dialog.close()

    k.resume(fid)  # (the folder can be listed now: walked and indexed as usual, the report gone)
    qtbot.waitUntil(lambda: row.text(1) == "3 files, 3 passages", timeout=WAIT_MS)
    indexed(qtbot, w, fid)
    assert row.data(1, Qt.ItemDataRole.ForegroundRole) is None and not panel.show_skipped.isEnabled()
    assert panel.progress_text.text().startswith("Up to date")
