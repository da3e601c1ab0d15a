"""Backups in the real window (pytest-qt) over a real SQLite file: the daily copy at start runs off the GUI
thread, Settings ▸ Backups… lists (date, size, chats, why), backs up now, keeps the `backups_keep`
setting, shows a damaged file as damaged, and a restore (asked first) puts the old chats back in the
window, with no chat from before the restore left on screen, and the restored chats work (open, search,
their tool records and attachments)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QDateTime, Qt, QUrl
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from ember_chat.app.backups.dialog import DAILY_KEY
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments import read_attachment_bytes
from ember_chat.engine.core.tools import ToolResult
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import SettingsFile
from tests.helpers.backup_schemas import _schema_4_database
from tests.helpers.backups_window import ADD, _cells, _dialog, _open, _restore_row


@pytest.fixture
def paths(chats_paths: AppPaths) -> AppPaths:
    """A data folder whose chat database holds two chats: tests/app/conftest.py's chats_paths."""
    return chats_paths


def test_the_daily_backup_is_made_off_the_gui_thread_at_start_and_once_a_day(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    # the window is built and shown while the copy is still out: it is a task on a worker thread whose
    # result only the GUI thread's event loop can deliver (a copy made on the GUI thread has no task)
    assert w.tasks.pending(DAILY_KEY)
    with qtbot.waitSignal(w.backups.backed_up, timeout=10_000) as made:
        pass
    info = made.args[0]
    assert (info.reason, info.chats) == ("daily", 2) and info.path.parent == paths.data_dir / "backups"
    w.close()
    assert w.join_background(30)
    w.store.close()
    windows.remove(w)

    again = _open(qtbot, paths, windows)  # the same day: no second copy
    qtbot.waitUntil(lambda: not again.tasks.pending(DAILY_KEY))
    assert [b.path for b in again.backups.manager.backups()] == [info.path]


def test_settings_backups_lists_backs_up_now_and_keeps_the_setting(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    dialog = _dialog(qtbot, w)
    assert [row[2:] for row in _cells(dialog)] == [["2", "Daily"]]
    assert dialog.table.item(0, 1).text().endswith(("KB", "KiB", "MB", "MiB"))

    with qtbot.waitSignal(w.backups.listed, timeout=10_000):
        qtbot.mouseClick(dialog.back_up, Qt.MouseButton.LeftButton)
    assert [row[2:] for row in _cells(dialog)] == [["2", "By you"], ["2", "Daily"]]
    assert dialog.status.text().startswith("Backed up 2 chats")

    dialog.keep.setValue(1)
    assert SettingsFile(paths.settings_file).load().backups_keep == 1 and w.backups.manager.keep == 1
    with qtbot.waitSignal(w.backups.listed, timeout=10_000):
        dialog.back_up.click()
    assert [row[3] for row in _cells(dialog)] == ["By you"]  # only the newest kept

    opened: list[QUrl] = []
    w.url_opener = opened.append
    dialog.open_folder.click()
    assert [u.toLocalFile() for u in opened] == [str(paths.data_dir / "backups")]


def test_a_damaged_backup_is_shown_as_damaged_and_cannot_be_restored(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    (daily,) = w.backups.manager.backups()
    broken = daily.path.with_name(daily.path.name.replace("-daily", "-manual").replace("chats-2", "chats-3"))
    broken.write_bytes(b"not a database at all " * 50)
    dialog = _dialog(qtbot, w)
    rows = _cells(dialog)
    assert [r[2] for r in rows] == ["Damaged", "2"]
    dialog.table.selectRow(0)
    assert not dialog.restore.isEnabled() and dialog.ask_restore() is None
    dialog.table.selectRow(1)
    assert dialog.restore.isEnabled()


def test_a_restore_asks_then_shows_the_restored_chats_and_no_stale_chat(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    herons, owls = sorted(c.id for c in w.store.conversations())
    # after the backup: a new chat, open on screen, and one of the old ones deleted for good
    later = w.store.create_conversation("Made after the backup")
    w.store.add_message(later.id, "user", "this chat is newer than the backup")
    w.store.delete_conversation(herons)
    w.chats.reload_conversations()
    w.chats.open_conversation(later.id)
    assert w.controller.conversation_id == later.id

    dialog = _dialog(qtbot, w)
    dialog.table.selectRow(0)
    dialog.restore.click()
    box = dialog.question
    assert box is not None and box.isVisible() and "kept aside" in box.informativeText()
    (cancel,) = [b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.RejectRole]
    cancel.click()
    assert w.controller.conversation_id == later.id  # nothing changed

    dialog.restore.click()
    (yes,) = [b for b in dialog.question.buttons() if b.text() == "Restore"]
    with qtbot.waitSignal(w.backups.restored, timeout=10_000) as restored:
        yes.click()
    aside = restored.args[0]
    assert aside.reason == "before restore" and aside.chats == 2

    assert w.controller.conversation_id is None  # the chat made after the backup is not on screen
    assert sorted(w.conversations.chat_ids()) == [herons, owls]
    assert "restored" in w.banner.text() and "kept as the backup" in w.banner.text()
    qtbot.waitUntil(lambda: not w.tasks.busy)
    assert [r[3] for r in _cells(dialog)] == ["Before a restore", "Daily"]
    dialog.close()

    # the restored chats work: open one, search, their tool records, a new attachment
    w.chats.open_conversation(owls)
    answer = w.store.thread(owls)[-1]
    assert [t.content for t in answer.tool_results] == ["5"]
    w.store.set_tool_result(answer.id, ToolResult(ADD.id, ADD.name, "6"), source="Built-in", decision="once")
    assert [t.content for t in w.store.message(answer.id).tool_results] == ["6"]
    assert [h.conversation_id for h in w.store.search("herons")] == [herons, herons]
    note = w.attach.store.save(read_attachment_bytes("notes.txt", b"owls hunt at night"))
    w.attach.store.link(answer.id, [note.id])
    assert [a.name for a in w.attach.store.of_message(answer.id)] == ["notes.txt"]


def test_undoing_a_restore_with_keep_1_brings_the_chats_back_and_keeps_every_copy_needed(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    """Issue 27, item 3: restoring the "Before a restore" copy (the undo the question promises) failed with
    Keep the newest 1 — the copy was pruned before it was read — and the chats it held were gone."""
    w = _open(qtbot, paths, windows)
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    later = w.store.create_conversation("Made after the backup")
    w.store.add_message(later.id, "user", "this chat is newer than the backup")
    dialog = _dialog(qtbot, w)
    dialog.keep.setValue(1)

    _restore_row(qtbot, w, dialog, 0)  # the daily copy: the chat made since goes (kept aside)
    assert "Made after the backup" not in [c.title for c in w.store.conversations()]
    assert [r[2:] for r in _cells(dialog)] == [["3", "Before a restore"], ["2", "Daily"]]

    _restore_row(qtbot, w, dialog, 0)  # the undo
    assert sorted(c.title for c in w.store.conversations()) == ["Herons", "Made after the backup", "Owls"]
    assert "kept as the backup" in w.banner.text()
    # the copy just restored stays (it is no candidate), beside the one this restore set aside
    assert [r[2:] for r in _cells(dialog)] == [["2", "Before a restore"], ["3", "Before a restore"], ["2", "Daily"]]


def test_a_daily_backup_that_cannot_be_written_is_said_in_words_and_the_window_works(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    (paths.data_dir / "backups").write_text("a file where the backups folder would go")
    w = _open(qtbot, paths, windows)
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    text = w.banner.text()
    assert text.startswith("Today's backup of your chats could not be made. The chats could not be backed up to")
    assert "Settings ▸ Backups… can try again." in text and "Error" not in text
    assert sorted(c.title for c in w.store.conversations()) == ["Herons", "Owls"]
    dialog = _dialog(qtbot, w)
    with qtbot.waitSignal(w.backups.failed, timeout=10_000):
        dialog.back_up.click()
    assert dialog.status.text().startswith("The chats could not be backed up") and dialog.back_up.isEnabled()


def test_a_database_from_before_an_update_is_backed_up_at_start_and_that_backup_restores_in_the_window(
    qtbot: QtBot, tmp_path: Path, windows: list[MainWindow]
) -> None:
    old = AppPaths(tmp_path / "old" / "data", tmp_path / "old" / "config")
    _schema_4_database(old.database, chats=3)  # written by an Ember with schema 4
    w = _open(qtbot, old, windows)
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    dialog = _dialog(qtbot, w)
    assert [row[2:] for row in _cells(dialog)] == [["3", "Before an update"]]  # (so no daily copy today)
    for cid in [c.id for c in w.store.conversations()]:
        w.store.delete_conversation(cid)
    w.chats.reload_conversations()
    assert w.conversations.chat_ids() == []

    dialog.table.selectRow(0)
    dialog.restore.click()
    (yes,) = [b for b in dialog.question.buttons() if b.text() == "Restore"]
    with qtbot.waitSignal(w.backups.restored, timeout=10_000):
        yes.click()
    assert sorted(w.conversations.chat_ids()) == [1, 2, 3]
    w.chats.open_conversation(2)
    assert [m.content for m in w.store.thread(2)] == ["old question 2 about herons"]
    assert w.controller.conversation_id == 2


def test_a_backups_date_reads_as_a_date_in_every_locale(qtbot: QtBot) -> None:
    """The C locale's short format wrote "4 12 2026 21:50:55"; a named locale writes its own, with seconds."""
    from PySide6.QtCore import QLocale

    from ember_chat.app.backups.dialog import when

    before = QLocale()
    try:
        QLocale.setDefault(QLocale(QLocale.Language.C))
        assert when(1764880000.0) == QDateTime.fromSecsSinceEpoch(1764880000).toString("yyyy-MM-dd HH:mm:ss")
        QLocale.setDefault(QLocale("de_DE"))
        assert when(1764880000.0).endswith(QDateTime.fromSecsSinceEpoch(1764880000).toString("HH:mm:ss"))
        assert "." in when(1764880000.0)  # (German dates: 04.12.25)
    finally:
        QLocale.setDefault(before)
