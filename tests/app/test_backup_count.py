""" "Backed up 6 chats" when the file holds 7 (issue 28, item 15): the count left out the chats in the
Trash, which the backup file holds (a restore brings them back there). The sentence now says what the
file written holds, counted in that file, the Trash's chats said apart: in Settings ▸ Backups… of the
real window and from `ember-chat chats backup` (the installed entry point)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.backups.dialog import DAILY_KEY
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.backups_window import _cells, _dialog, _open
from tests.helpers.chats_cli import cli


@pytest.fixture
def paths(chats_paths: AppPaths) -> AppPaths:
    """A data folder whose chat database holds two chats: tests/app/conftest.py's chats_paths."""
    return chats_paths


def _with_one_archived_and_one_in_the_trash(paths: AppPaths) -> None:
    """Herons, Owls (archived) and Gulls (in the Trash): four chats in the file, one of them in the Trash."""
    store = ConversationStore(paths.database)
    try:
        owls = next(c.id for c in store.conversations() if c.title == "Owls")
        store.organise.archive_chats([owls], True)
        for title in ("Gulls", "Terns"):
            store.create_conversation(title)
        gulls = next(c.id for c in store.conversations() if c.title == "Gulls")
        store.organise.trash_chats([gulls])
    finally:
        store.close()


def _chats_in(backup: Path) -> int:
    db = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM conversations").fetchone()[0])
    finally:
        db.close()


def test_back_up_now_in_the_window_counts_the_chats_in_the_trash_the_file_holds(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    _with_one_archived_and_one_in_the_trash(paths)
    w = _open(qtbot, paths, windows)
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    dialog = _dialog(qtbot, w)
    with qtbot.waitSignal(w.backups.backed_up, timeout=10_000) as made:
        qtbot.mouseClick(dialog.back_up, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not w.tasks.busy)
    info = made.args[0]
    assert _chats_in(info.path) == 4
    assert dialog.status.text().startswith("Backed up 4 chats, 1 of them in the Trash (")  # was "3 chats"
    assert [row[2] for row in _cells(dialog)] == ["4", "4"]  # the list says the same of each file
    assert dialog.table.item(0, 2).toolTip() == "1 of them in the Trash"
    dialog.table.selectRow(0)
    question = dialog.ask_restore()
    assert question is not None and "(4 chats, 1 of them in the Trash)?" in question.text()
    question.close()


def test_chats_backup_on_the_command_line_counts_the_chats_in_the_trash_the_file_holds(paths: AppPaths) -> None:
    _with_one_archived_and_one_in_the_trash(paths)
    out = cli(paths.data_dir, "backup")
    assert out.returncode == 0, out.stderr
    (backup,) = (paths.data_dir / "backups").glob("chats-*-manual.sqlite3")
    assert _chats_in(backup) == 4
    assert out.stdout.startswith(f"Backed up 4 chats, 1 of them in the Trash to {backup} (")  # was "3 chats"
    listed = cli(paths.data_dir, "backup", "--list")
    assert listed.stdout.splitlines()[1].split()[4] == "4"
