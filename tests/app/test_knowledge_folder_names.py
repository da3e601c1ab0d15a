"""A folder's name from the disk in Project settings ▸ Knowledge (its source's row, the row's tooltip and
Show skipped files…) is shown on one line and in its order: a line break or a control character as its
escape, a right-to-left override left out ("a\\u202egpj.exe" read as "aexe.jpg"); the tooltip names the
first folders and counts the rest. A real index holding what a walk could not list, the real window."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QTableView
from pytestqt.qtbot import QtBot

from ember_chat.app.projects.knowledge_rows import TIP_FOLDERS, finished_text, progress_text, shown
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.indexer import IndexProgress, IndexRun
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.projects_window import WAIT_MS, settings_dialog

HOSTILE = "a\nb\u202egpj.exe\x1b[2J"


def test_a_name_is_shown_on_one_line_in_its_order_and_a_joiner_that_spells_it_is_kept() -> None:
    assert shown(HOSTILE) == "a\\nbgpj.exe\\x1b[2J"
    assert shown("x\u2028y\tz\u00a0w") == "x\\u2028y\\tz\u00a0w"  # (a no-break space is a space)
    assert shown("क्\u200dष notes") == "क्\u200dष notes" and shown("plain/path") == "plain/path"


@pytest.mark.usefixtures("nothing_blocks")
def test_folders_named_to_mislead_are_shown_escaped_and_the_tooltip_names_ten(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    w = make_window()
    k = w.projects.indexing
    store = ProjectStore(w.store)
    fid = store.create("Notes").folder_id
    source = store.add_source(fid, notes)
    k.pause(fid)  # (no run: the index holds what a walk of folders so named could not list)
    folders = [str(notes / f"{HOSTILE}{i:02}") for i in range(TIP_FOLDERS + 2)]
    index = KnowledgeIndex(k.index_path(fid))
    try:
        said = [(source.id, f, "permission denied", f"{Path(f).name} cannot be listed.", False) for f in folders]
        index.set_unread({source.id}, said)
    finally:
        index.close()

    w.projects.open_settings(fid)
    panel = settings_dialog(w).knowledge
    row = panel.sources.topLevelItem(0)
    qtbot.waitUntil(lambda: "could not be read" in row.text(1), timeout=WAIT_MS)
    name = shown(HOSTILE)
    assert row.text(1) == (
        f"Paused · 12 folders could not be read: {name}00 (permission denied), {name}01 (permission denied), "
        f"{name}02 (permission denied) and 9 more"
    )
    tip = row.toolTip(1)
    assert tip.isprintable() and f"{name}09 cannot be listed." in tip and f"{name}10" not in tip
    assert tip.endswith(" And 2 more.")
    panel.open_skipped()
    dialog = panel.skipped_list
    assert dialog is not None
    model = dialog.findChild(QTableView).model()
    cells = [model.index(r, 0).data() for r in range(model.rowCount())]
    assert cells[0] == shown(str(notes)) + "/" + name + "00/" and all(c.isprintable() for c in cells)
    assert [path for path, _ in panel.skipped_files()] == [f + "/" for f in sorted(folders)]  # (Try again: as is)
    dialog.close()


def test_the_run_lines_say_one_of_a_thing_in_the_singular_and_the_file_as_shown() -> None:
    one = IndexProgress(1, 1, 1, 1, "/docs/a\nb.md")
    assert progress_text(one) == "Indexing: 1 of 1 file to read, 1 page, 1 passage — a\\nb.md"
    many = IndexProgress(3, 1200, 0, 12, None)
    assert progress_text(many) == "Indexing: 3 of 1,200 files to read, 0 pages, 12 passages"
    assert finished_text(IndexRun(read=1)) == "Up to date: 1 file read."
    assert finished_text(IndexRun(read=2, skipped=1)) == "Up to date: 2 files read, 1 skipped."
    assert finished_text(IndexRun(dropped=1_500)) == "Up to date: 1,500 gone from disk."


def test_a_run_that_reads_nothing_says_so_without_zero_counts() -> None:
    """(Issue 34: after Confirm the row said "33 files, 3 pages, 33 passages" while the line said
    "Indexing: 0 of 0 files to read, 0 pages, 0 passages", then "Up to date: 0 files read, 0 skipped, 0 gone
    from disk.": the run after the one that read them had nothing to read.)"""
    assert progress_text(IndexProgress(0, 0, 0, 0, None)) == "Checking for changes…"
    assert finished_text(IndexRun()) == "Up to date."
    assert finished_text(IndexRun(pages=0, passages=0, walked=True)) == "Up to date."
