"""The Knowledge tab's buttons in the real window (issue 34): Show skipped files… and Pause indexing are
enabled only when they can act (something skipped in the files listed; a run under way, or indexing
paused), and kept right as runs start and end and sources come and go; pausing the indexing says Paused on
the rows, and the rows follow the run's progress (files read, waiting) as the status line does. Real
SQLite files, real folders, real readers."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.indexer import IndexProgress
from tests.helpers.projects_window import answer, knowledge_tab
from tests.helpers.projects_window import indexed as _indexed
from tests.helpers.projects_window import settings_dialog as _dialog

pytestmark = pytest.mark.usefixtures("nothing_blocks")
WAIT_MS = 30_000
MANY = 3000  # files of the pause test: a run long enough for the rows to be read again while it goes


def test_show_skipped_and_pause_indexing_are_enabled_only_when_they_can_act(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia.\n")
    (docs / "broken.txt").write_bytes(bytes(range(256)) * 64)  # (skipped: not text)
    w = make_window()
    k = w.projects.indexing
    fid, dialog, panel = knowledge_tab(w)
    _indexed(qtbot, w, fid)
    assert not panel.show_skipped.isEnabled() and not panel.pause_indexing.isEnabled()  # (nothing at all)

    enabled_while_running: list[bool] = []
    k.progress.connect(lambda _fid, _p: enabled_while_running.append(panel.pause_indexing.isEnabled()))
    panel.add_paths([str(docs)])
    assert k.running(fid) and panel.pause_indexing.isEnabled()
    _indexed(qtbot, w, fid)
    assert enabled_while_running and all(enabled_while_running)
    qtbot.waitUntil(panel.show_skipped.isEnabled, timeout=WAIT_MS)
    assert not panel.pause_indexing.isEnabled()  # (the run over: nothing to pause)

    # the source removed: its skipped file with it, at once (not when the index is read again)
    panel.sources.topLevelItem(0).setSelected(True)
    panel.remove.click()
    answer(panel, "Remove")  # (its passages are forgotten: asked first)
    assert not panel.show_skipped.isEnabled() and panel.skipped_files() == []
    _indexed(qtbot, w, fid)
    assert not panel.show_skipped.isEnabled() and not panel.pause_indexing.isEnabled()
    dialog.reject()


def _counts(row: str) -> tuple[int, int]:
    """(files read, files waiting) a row says ("Paused · 1,024 files, 3 passages, 976 waiting")."""
    numbers = dict((word, int(n.replace(",", ""))) for n, word in re.findall(r"([\d,]+) (files?|waiting)", row))
    return numbers.get("files", numbers.get("file", 0)), numbers.get("waiting", 0)


def test_pausing_says_paused_on_the_rows_and_they_follow_the_run_after_resume(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "many"
    docs.mkdir()
    for n in range(MANY):
        (docs / f"note-{n}.txt").write_text(f"Note {n}: site {n} has {n % 5} herons.\n")
    w = make_window()
    k = w.projects.indexing
    project = w.projects.new_project("Survey")
    assert project is not None
    fid = project.folder_id
    dialog = _dialog(w)
    panel = dialog.knowledge
    dialog.tabs.setCurrentWidget(panel)
    row = panel.sources.topLevelItem

    def pause_once_some_are_read(_fid: int, p: IndexProgress) -> None:
        if p.files_done and fid not in k.paused:
            panel.toggle_indexing()

    k.progress.connect(pause_once_some_are_read)
    panel.add_paths([str(docs)])
    assert panel.pause_indexing.isEnabled()
    qtbot.waitUntil(lambda: fid in k.paused and not k.running(fid), timeout=WAIT_MS)
    k.progress.disconnect(pause_once_some_are_read)
    _indexed(qtbot, w, fid)  # (the index read again after the run stopped)
    assert panel.pause_indexing.isEnabled() and panel.pause_indexing.text() == "Resume indexing"
    qtbot.waitUntil(lambda: row(0).text(1).startswith("Paused · "), timeout=WAIT_MS)
    read, waiting = _counts(row(0).text(1))
    assert read + waiting == MANY and 0 < read < MANY, row(0).text(1)

    # resumed: the status counts the files left to read, the rows follow as they are read
    seen: list[tuple[str, str]] = []

    def look(_fid: int, _p: IndexProgress) -> None:
        seen.append((row(0).text(1), panel.progress_text.text()))

    k.progress.connect(look)
    panel.toggle_indexing()
    _indexed(qtbot, w, fid)
    during = [(_counts(r), status) for r, status in seen if "waiting" in r]
    assert f"of {waiting:,} files to read" in seen[0][1]
    assert all(done + left == MANY for (done, left), _status in during), during
    assert len({left for (_done, left), _status in during}) >= 2, seen  # (the rows moved while it ran)
    qtbot.waitUntil(lambda: row(0).text(1).startswith(f"{MANY:,} files"), timeout=WAIT_MS)
    assert panel.progress_text.text().startswith("Up to date") and not panel.pause_indexing.isEnabled()
    dialog.reject()
