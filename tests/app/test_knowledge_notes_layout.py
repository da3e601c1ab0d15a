"""The Knowledge tab's notes and the Show skipped files… list at the dialog's minimum size, in the dark
theme (issue 34, a new user's findings): each note of a run (two link loops) on a line of its own, not
run together as one paragraph; each skipped file's whole reason readable in the list (under it, for the
row chosen, and in the cell's tooltip), its columns resizable. The real window, real folders, real
readers; screenshots in the test's folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QHeaderView, QLabel, QTableView
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.attachment_files import write_encrypted_pdf
from tests.helpers.projects_window import indexed as _indexed
from tests.helpers.projects_window import knowledge_tab

pytestmark = pytest.mark.usefixtures("nothing_blocks")
WAIT_MS = 30_000


def test_link_loop_notes_are_one_a_line_and_a_skipped_reason_is_shown_whole(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia.\n")
    (docs / "loop-a.txt").symlink_to(docs / "loop-b.txt")
    (docs / "loop-b.txt").symlink_to(docs / "loop-a.txt")
    write_encrypted_pdf(docs / "annual report of the river authority, final version.pdf", ["Secret."])
    w = make_window()
    w.set_theme("dark")
    fid, dialog, panel = knowledge_tab(w)
    dialog.resize(dialog.minimumSizeHint())
    panel.add_paths([str(docs)])
    _indexed(qtbot, w, fid)
    qtbot.waitUntil(panel.show_skipped.isEnabled, timeout=WAIT_MS)

    lines = panel.progress_text.text().split("\n")
    assert len(lines) == 2 and all("symbolic links" in line for line in lines), lines
    assert {"loop-a.txt" in lines[0] or "loop-a.txt" in lines[1], "loop-b.txt" in "".join(lines)} == {True}
    dialog.grab().save(str(tmp_path / "knowledge_tab_minimum_dark.png"))

    panel.show_skipped.click()
    listed = panel.skipped_list
    assert isinstance(listed, QDialog)
    qtbot.waitExposed(listed)
    view = listed.findChild(QTableView)
    whole = listed.findChild(QLabel, "skipped-reason")
    assert isinstance(view, QTableView) and isinstance(whole, QLabel)
    ((path, reason),) = panel.skipped_files()
    assert "use that instead." in reason
    # the first row is chosen: its whole path and reason under the list, wrapped, never cut
    assert whole.wordWrap() and whole.textFormat() == Qt.TextFormat.PlainText
    assert whole.text() == f"{path}\n{reason}" and whole.isVisible()
    cell = view.model().index(0, 1)
    assert view.model().data(cell, Qt.ItemDataRole.ToolTipRole) == reason
    header = view.horizontalHeader()
    assert header.sectionResizeMode(0) == QHeaderView.ResizeMode.Interactive
    assert header.sectionResizeMode(1) == QHeaderView.ResizeMode.Interactive or header.stretchLastSection()
    listed.grab().save(str(tmp_path / "skipped_files_dark.png"))
    listed.reject()
    dialog.reject()
