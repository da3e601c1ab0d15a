"""The backups tests' window on a data folder, its Backups dialog and the dialog's rows."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ember_chat.app.backups.dialog import BackupsDialog
from ember_chat.app.main import build_window
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.tools import ToolCall
from ember_chat.engine.storage.backup_files import BackupInfo
from ember_chat.engine.storage.paths import AppPaths

ADD = ToolCall("call00001", "calculator", {"expression": "2+3"}, '{"expression": "2+3"}')


def _open(qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]) -> MainWindow:
    w = build_window(paths)
    qtbot.addWidget(w)
    w.show()
    windows.append(w)
    return w


def _dialog(qtbot: QtBot, w: MainWindow) -> BackupsDialog:
    """Settings ▸ Backups…, as the user opens it; its list filled."""
    (settings,) = [a.menu() for a in w.menuBar().actions() if a.text() == "&Settings"]
    (entry,) = [a for a in settings.actions() if a.text() == "&Backups…"]
    entry.trigger()
    dialog = w.backups.dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: not w.tasks.busy)
    return dialog


def _cells(dialog: BackupsDialog) -> list[list[str]]:
    t = dialog.table
    return [[t.item(r, c).text() for c in range(t.columnCount())] for r in range(t.rowCount())]


def _restore_row(qtbot: QtBot, w: MainWindow, dialog: BackupsDialog, row: int) -> BackupInfo:
    """Select a row, Restore…, Restore: the copy the restore set aside (a failure fails the test)."""
    dialog.table.selectRow(row)
    dialog.restore.click()
    (yes,) = [b for b in dialog.question.buttons() if b.text() == "Restore"]
    with qtbot.waitSignal(w.backups.restored, timeout=10_000) as restored:
        yes.click()
    qtbot.waitUntil(lambda: not w.tasks.busy)
    return restored.args[0]
