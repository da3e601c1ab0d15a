"""A restore in the real window over a real SQLite file forgets what the composer held from the database
before it: a file attached (kept in the old database under an id) but not sent would name another
file, or none, in the restored one (review finding 3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.backups.dialog import DAILY_KEY
from ember_chat.app.main import build_window
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    p = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(p.database)
    conv = store.create_conversation("Report")
    store.add_message(conv.id, "user", "see the report")
    store.close()
    return p


@pytest.fixture
def window(qtbot: QtBot, paths: AppPaths) -> Iterator[MainWindow]:
    w = build_window(paths)
    qtbot.addWidget(w)
    w.show()
    yield w
    w.close()
    assert w.join_background(30)
    w.store.close()


def test_a_restore_clears_the_files_attached_in_the_composer(qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    w = window
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))  # the daily backup: one chat, no file kept
    assert len(w.backups.manager.backups()) == 1
    holiday = tmp_path / "holiday.txt"
    holiday.write_text("my holiday notes\n", encoding="utf-8")
    bar = w.composer.attachments
    w.composer.attach_paths([holiday])
    qtbot.waitUntil(lambda: bool(bar.items) and not bar.busy, timeout=10_000)
    (chip,) = bar.attachments()

    dialog = w.backups.open_dialog()
    qtbot.waitUntil(lambda: not w.tasks.busy)
    dialog.table.selectRow(0)  # the only backup
    dialog.restore.click()
    (yes,) = [b for b in dialog.question.buttons() if b.text() == "Restore"]
    with qtbot.waitSignal(w.backups.restored, timeout=10_000):
        yes.click()
    dialog.close()

    assert bar.items == [] and bar.attachments() == [] and bar.isHidden()
    with pytest.raises(AttachmentError):  # the id the chip held names no file in the restored database
        w.attach.store.get(chip.id)
    assert "attach them again" in w.banner.text()
