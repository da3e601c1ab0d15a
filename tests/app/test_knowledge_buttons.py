"""The Knowledge tab's buttons in the real window (issue 34): Show skipped files… and Pause indexing are
enabled only when they can act (something skipped in the files listed; a run under way, or indexing
paused), and kept right as runs start and end and sources come and go; pausing the indexing says Paused on
the rows, and the rows follow the run's progress (files read, waiting) as the status line does. Real
SQLite files, real folders, real readers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.projects_window import indexed as _indexed
from tests.helpers.projects_window import settings_dialog as _dialog

pytestmark = pytest.mark.usefixtures("nothing_blocks")
WAIT_MS = 30_000


def test_show_skipped_and_pause_indexing_are_enabled_only_when_they_can_act(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia.\n")
    (docs / "broken.txt").write_bytes(bytes(range(256)) * 64)  # (skipped: not text)
    w = make_window()
    k = w.projects.indexing
    project = w.projects.new_project("Rivers")
    assert project is not None
    fid = project.folder_id
    dialog = _dialog(w)
    panel = dialog.knowledge
    dialog.tabs.setCurrentWidget(panel)
    _indexed(qtbot, w, fid)
    assert not panel.show_skipped.isEnabled() and not panel.pause_indexing.isEnabled()  # (nothing at all)
    dialog.grab().save("/tmp/ember/shots-knowledge/empty_buttons.png")

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
    assert not panel.show_skipped.isEnabled() and panel.skipped_files() == []
    _indexed(qtbot, w, fid)
    assert not panel.show_skipped.isEnabled() and not panel.pause_indexing.isEnabled()
    dialog.grab().save("/tmp/ember/shots-knowledge/removed_buttons.png")
    dialog.reject()
