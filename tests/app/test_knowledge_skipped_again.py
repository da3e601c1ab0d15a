"""Skipped files tried again in the real window (issue 34): the first run of a project after Ember starts
reads again the files skipped for a cause not their own (a reader that could not start or stopped
unexpectedly), once; a file skipped for its content stays skipped; Show skipped files…' Try again reads
the chosen files (all, or those selected) again now. Real SQLite files, real folders, real readers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QItemSelectionModel
from PySide6.QtWidgets import QPushButton, QTableView
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.index import INDEXED, SKIPPED, KnowledgeIndex
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.projects_window import indexed as _indexed
from tests.helpers.projects_window import settings_dialog as _dialog

pytestmark = pytest.mark.usefixtures("nothing_blocks")
STOPPED = "could not be read: the reader stopped unexpectedly."


def _skip(index_path: Path, source_id: int, file: Path, reason: str, reader_failed: bool) -> None:
    """`file` (unchanged since) kept in the index as skipped, as a run before this start left it."""
    index = KnowledgeIndex(index_path)
    try:
        info = file.stat()
        index.skip_file(source_id, file, info.st_size, info.st_mtime_ns, f"{file.name} {reason}", reader_failed)
    finally:
        index.close()


def _states(index_path: Path) -> dict[str, str]:
    index = KnowledgeIndex(index_path)
    try:
        return {Path(f.path).name: f.state for f in index.files()}
    finally:
        index.close()


def test_reader_failures_are_read_at_the_first_run_and_try_again_reads_the_rest(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("rivers.md", "lakes.md", "notes.txt", "hills.txt"):
        (docs / name).write_text(f"# {name}\n\nThe survey of {name} starts in May.\n")
    w = make_window()
    k = w.projects.indexing
    store = ProjectStore(w.store)
    project = store.create("Survey")
    fid = project.folder_id
    source = store.add_source(fid, docs)
    path = k.index_path(fid)
    for name in ("rivers.md", "lakes.md"):  # the reader died on them: not their fault
        _skip(path, source.id, docs / name, STOPPED, True)
    for name in ("notes.txt", "hills.txt"):  # as if their content could not be read then
        _skip(path, source.id, docs / name, "is not text (it looks like a binary file).", False)

    w.projects.open_settings(fid)
    panel = _dialog(w).knowledge
    _dialog(w).tabs.setCurrentWidget(panel)  # (as the user sees it: the screenshots)
    k.run(fid)  # (the first run since this Ember started)
    _indexed(qtbot, w, fid)
    assert _states(path) == {"hills.txt": SKIPPED, "lakes.md": INDEXED, "notes.txt": SKIPPED, "rivers.md": INDEXED}
    qtbot.waitUntil(lambda: "2 skipped" in panel.sources.topLevelItem(0).text(1), timeout=10_000)

    # a reader failure in this session waits for the next start: runs after the first do not retry it
    _skip(path, source.id, docs / "rivers.md", STOPPED, True)
    k.run(fid)
    _indexed(qtbot, w, fid)
    assert _states(path)["rivers.md"] == SKIPPED

    # Show skipped files…: Try again, the selected one, then all
    qtbot.waitUntil(panel.show_skipped.isEnabled, timeout=10_000)
    panel.show_skipped.click()
    skipped = panel.skipped_list
    assert skipped is not None
    qtbot.waitUntil(skipped.isVisible, timeout=10_000)
    view = skipped.findChild(QTableView)
    again = skipped.findChild(QPushButton, "try-again")
    assert view.model().rowCount() == 3 and again.text() == "Try all again" and again.isEnabled()
    row = [view.model().index(r, 0).data() for r in range(3)].index(str(docs / "notes.txt"))
    view.selectionModel().select(
        view.model().index(row, 0), QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
    )
    assert again.text() == "Try selected again"
    runs: list[int] = []
    k.run_changed.connect(runs.append)
    again.click()
    assert not skipped.isVisible() and runs  # (closed; the run under way, its progress on the tab)
    _indexed(qtbot, w, fid)
    assert _states(path) == {"hills.txt": SKIPPED, "lakes.md": INDEXED, "notes.txt": INDEXED, "rivers.md": SKIPPED}

    qtbot.waitUntil(lambda: "2 skipped" in panel.sources.topLevelItem(0).text(1), timeout=10_000)
    panel.show_skipped.click()
    skipped = panel.skipped_list
    assert skipped is not None
    skipped.findChild(QPushButton, "try-again").click()
    _indexed(qtbot, w, fid)
    assert set(_states(path).values()) == {INDEXED}
    qtbot.waitUntil(lambda: not panel.show_skipped.isEnabled(), timeout=10_000)  # (nothing skipped now)
    assert "4 files" in panel.sources.topLevelItem(0).text(1) and "skipped" not in panel.sources.topLevelItem(0).text(1)
    _dialog(w).reject()


def test_try_again_on_a_paused_or_missing_folder_s_file_waits_for_it_and_says_so(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    """Its file cannot be read while its folder is paused or not there: the request is kept (the tab says
    so) and read when the folder is resumed or back; a run of the other sources does not drop it."""
    docs, held = tmp_path / "docs", tmp_path / "held"
    docs.mkdir()
    held.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is long.\n")
    (held / "lakes.md").write_text("# Lakes\n\nLake Ohrid is old.\n")
    w = make_window()
    k = w.projects.indexing
    store = ProjectStore(w.store)
    fid = store.create("Survey").folder_id
    store.add_source(fid, docs)
    away = store.add_source(fid, held)
    path = k.index_path(fid)
    _skip(path, away.id, held / "lakes.md", "is not text (it looks like a binary file).", False)
    store.set_paused(away.id, True)
    w.projects.open_settings(fid)
    panel = _dialog(w).knowledge
    _dialog(w).tabs.setCurrentWidget(panel)  # (as the user sees it: the screenshot)
    _indexed(qtbot, w, fid)
    qtbot.waitUntil(
        lambda: (
            panel.skipped_files() == [(str(held / "lakes.md"), "lakes.md is not text (it looks like a binary file).")]
        ),
        timeout=10_000,
    )

    panel.retry_skipped([str(held / "lakes.md")])  # (Try again, on the paused folder's file)
    _indexed(qtbot, w, fid)
    assert _states(path)["lakes.md"] == SKIPPED and k.retry_waiting(fid) == 1
    said = "1 file to try again waits for its folder to be resumed or to be back: it is read then."
    assert said in panel.progress_text.text()
    k.run(fid)  # (a run of the other sources, as a change on disk makes one)
    _indexed(qtbot, w, fid)
    assert k.retry_waiting(fid) == 1

    held.rename(tmp_path / "moved")  # resumed while it is not there: still waiting
    panel.sources.topLevelItem(1).setSelected(True)
    panel.toggle_selected()
    _indexed(qtbot, w, fid)
    assert k.unreachable[fid].keys() == {away.id} and k.retry_waiting(fid) == 1
    assert said in panel.progress_text.text()
    (tmp_path / "moved").rename(held)  # back: read
    k.run(fid)
    _indexed(qtbot, w, fid)
    assert _states(path) == {"rivers.md": INDEXED, "lakes.md": INDEXED} and k.retry_waiting(fid) == 0
    assert "to try again" not in panel.progress_text.text()
    _dialog(w).reject()
