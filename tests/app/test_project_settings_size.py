"""The Project settings dialog at its least size, in the dark theme in a small (1024x640) window: it fits
the window with room, its Knowledge tab lists at least four sources under the header, and the State
column is shown beside the names, not cut by the list's edge. Real window, real dialog."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.projects_window import indexed, settings_dialog

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def test_the_settings_dialog_at_its_least_size_shows_four_sources_and_their_state(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    folders = []
    for n in range(6):
        folder = tmp_path / f"notes-{n}"
        folder.mkdir()
        (folder / "a.md").write_text(f"# Notes {n}\n\nHerons nest in colonies.\n")
        folders.append(str(folder))
    w = make_window()
    w.set_theme("dark")
    w.resize(1024, 640)
    project = w.projects.new_project("Birds")
    assert project is not None
    dialog = settings_dialog(w)
    panel = dialog.knowledge
    dialog.tabs.setCurrentWidget(panel)
    panel.add_paths(folders)
    indexed(qtbot, w, project.folder_id)
    dialog.resize(1, 1)  # as small as it goes
    qtbot.waitUntil(lambda: dialog.width() == dialog.minimumWidth(), timeout=5000)

    assert dialog.width() <= 1024 - 200 and dialog.height() <= 640 - 100
    sources = panel.sources
    rows = [sources.visualItemRect(sources.topLevelItem(i)) for i in range(sources.topLevelItemCount())]
    seen = [r for r in rows if r.isValid() and r.bottom() <= sources.viewport().height()]
    assert len(seen) >= 4, (len(seen), sources.viewport().height())
    header = sources.header()
    assert header.sectionPosition(1) + header.sectionSize(1) <= sources.viewport().width() + 1  # (State not cut)
