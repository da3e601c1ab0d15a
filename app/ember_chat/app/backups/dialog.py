"""The window's chat backups: the daily copy made at start on a worker thread (a big database never
holds up the window), and Settings ▸ Backups…: the list (date, size, chats, why), "Back up now",
"Restore…" (asks first; the current chats are kept aside as a backup), "Open folder" and how many to
keep (the setting `backups_keep`). After a restore the window shows the restored chat list and no chat
from before it. Copying and listing run on the window's task runner (engine_link/tasks.py), never on the GUI
thread; the engine side is engine/storage/backups.py."""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QDateTime, QLocale, QObject, Qt, QUrl, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.context import AppContext
from ember_chat.app.qt.plain_text import plain_message
from ember_chat.app.qt.settings_page import show_settings_page
from ember_chat.engine.storage.backup_files import BEFORE_MIGRATION, BEFORE_RESTORE, DAILY, MANUAL, BackupInfo
from ember_chat.engine.storage.backups import BackupManager

DAILY_KEY = "daily-backup"  # the task key of the daily copy made at start


class WindowBackups(QObject):
    """Owns the window's BackupManager. Built from the context (the chat store, the settings, the task
    runner, the notifier, the URL opener), the widget its Settings page stays over (`parent`) and two
    callables the composition gives: `after_stop` runs an action once an answer that streams has stopped
    (the conversation's), and `show_restored` makes the window show the restored chat list and no chat
    from before the restore, saying whether files attached to the message being written were removed.
    `restoring` tells a comparison that runs to stop (the composition connects it), with the sentence
    it says."""

    listed = Signal(list)  # the backups, newest first (GUI thread)
    backed_up = Signal(object)  # a BackupInfo just written (daily or manual)
    restored = Signal(object)  # the BackupInfo of the chats set aside before the restore
    failed = Signal(str)  # a backup, restore or listing that failed, in words
    restoring = Signal(str)  # a restore starts: a comparison running stops, saying this (it writes by id)

    def __init__(
        self,
        ctx: AppContext,
        parent: QWidget,
        after_stop: Callable[[Callable[[], None]], None],
        show_restored: Callable[[], bool],
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.dialog_parent = parent
        self._after_stop = after_stop
        self._show_restored = show_restored
        self.manager = BackupManager(ctx.store, keep=ctx.settings.backups_keep)
        self.dialog: BackupsDialog | None = None
        self._cancel = threading.Event()  # set when the window closes (tasks.shutdown): the copy stops between steps
        if not self.manager.in_memory:
            ctx.tasks.run(
                lambda: self.manager.daily(cancel=self._cancel),
                self._daily_done,
                self._daily_failed,
                key=DAILY_KEY,
                cancel=self._cancel.set,
            )

    # ----- the daily copy
    def _daily_done(self, info: BackupInfo | None) -> None:
        if info is not None:
            self.backed_up.emit(info)
            if self.dialog is not None and self.dialog.isVisible():
                self.refresh()

    def _daily_failed(self, message: str) -> None:
        text = self.tr("Today's backup of your chats could not be made. {message} Settings ▸ Backups… can try again.")
        self.ctx.notifier.show_notice(text.format(message=message))

    # ----- what the dialog asks for
    def open_dialog(self) -> BackupsDialog:
        if self.dialog is None:
            self.dialog = BackupsDialog(self, self.dialog_parent)
        show_settings_page(self.dialog_parent, "backups", self.dialog)  # Settings ▸ Backups
        self.refresh()
        return self.dialog

    def refresh(self) -> None:
        self.ctx.tasks.run(self.manager.backups, self.listed.emit, self.failed.emit, key="backups-list")

    def back_up_now(self) -> None:
        self.ctx.tasks.run(lambda: self.manager.backup(MANUAL), self._backed_up, self.failed.emit, key="backup-now")

    def _backed_up(self, info: BackupInfo) -> None:
        self.backed_up.emit(info)
        self.refresh()

    def restore(self, info: BackupInfo) -> None:
        """Stop an answer that streams, then restore on a worker thread; the window shows the result."""

        def start() -> None:
            # a comparison running writes its answers by id: none after this
            self.restoring.emit(self.tr("The comparison stopped: another backup of your chats was restored."))
            self.ctx.tasks.run(lambda: self.manager.restore(info), self._restored, self._restore_failed, key="restore")

        self._after_stop(start)

    def _restore_failed(self, message: str) -> None:
        self.failed.emit(message)
        self.refresh()

    def _restored(self, aside: BackupInfo) -> None:
        attached = self._show_restored()  # (no chat from before the restore stays on screen)
        text = self.tr("The backup was restored. The chats you had before are kept as the backup of {date}.")
        if attached:
            text += " " + self.tr("The files attached to the message you were writing were removed: attach them again.")
        # (the notice goes when a chat opens)
        self.ctx.notifier.show_notice(text.format(date=when(aside.created_at)), cause="restore")
        self.restored.emit(aside)
        self.refresh()

    def set_keep(self, keep: int) -> None:
        self.manager.keep = keep
        self.ctx.save_settings(self.ctx.settings.with_changes(backups_keep=keep))

    def open_folder(self) -> None:
        self.manager.folder.mkdir(parents=True, exist_ok=True)
        self.ctx.url_opener(QUrl.fromLocalFile(str(self.manager.folder)))


class BackupsDialog(QDialog):
    def __init__(self, backups: WindowBackups, parent: QWidget) -> None:
        super().__init__(parent)
        self.backups = backups
        self.setWindowTitle(self.tr("Backups"))
        self.shown: list[BackupInfo] = []
        self.question: QMessageBox | None = None  # "Restore …?", while open

        intro = QLabel(
            self.tr(
                "Ember backs up your chats once a day and before an update changes the chat database. "
                "Restoring a backup first keeps your current chats aside as a backup of their own."
            )
        )
        intro.setWordWrap(True)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels([self.tr("Date"), self.tr("Size"), self.tr("Chats"), self.tr("Made")])
        self.table.setAccessibleName(self.tr("Backups"))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._enable)
        self.table.itemDoubleClicked.connect(lambda _item: self.ask_restore())

        self.back_up = QPushButton(self.tr("&Back up now"))
        self.restore = QPushButton(self.tr("&Restore…"))
        self.open_folder = QPushButton(self.tr("&Open folder"))
        self.back_up.clicked.connect(self._back_up)
        self.restore.clicked.connect(lambda: self.ask_restore())
        self.open_folder.clicked.connect(backups.open_folder)
        buttons = QHBoxLayout()
        for b in (self.back_up, self.restore, self.open_folder):
            buttons.addWidget(b)
        buttons.addStretch(1)

        self.keep = QSpinBox()
        self.keep.setRange(1, 1000)
        self.keep.setValue(backups.manager.keep)
        self.keep.setAccessibleName(self.tr("Backups to keep"))
        self.keep.valueChanged.connect(backups.set_keep)
        keep_label = QLabel(self.tr("&Keep the newest"))
        keep_label.setBuddy(self.keep)
        keep_row = QHBoxLayout()
        keep_row.addWidget(keep_label)
        keep_row.addWidget(self.keep)
        kept = QLabel(
            self.tr("backups (older ones go at the next backup; the copies set aside before a restore are kept apart)")
        )
        kept.setWordWrap(True)  # (the dialog keeps its width)
        keep_row.addWidget(kept, 1)

        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addLayout(keep_row)
        layout.addWidget(self.status)
        layout.addWidget(close)
        self.resize(620, 400)

        backups.listed.connect(self.show_backups)
        backups.backed_up.connect(self._backed_up)
        backups.restored.connect(self._restored)
        backups.failed.connect(self._failed)
        if backups.manager.in_memory:
            self.status.setText(
                self.tr(
                    "Your chats are kept in memory only in this session (the chat database could not be opened), "
                    "so they cannot be backed up or restored."
                )
            )
        self.busy = False
        self._enable()

    # ----- the list
    def show_backups(self, infos: list[BackupInfo]) -> None:
        selected = self.selected()
        self.shown = list(infos)
        self.table.setRowCount(len(infos))
        locale = QLocale()
        for row, info in enumerate(infos):
            chats = self.tr("Damaged") if info.in_file is None else locale.toString(info.in_file)
            cells = [when(info.created_at), locale.formattedDataSize(info.size), chats, self.reason(info.reason)]
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column in (1, 2):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if info.chats is None:
                    item.setToolTip(self.tr("This file cannot be read; it cannot be restored."))
                elif column == 2 and info.trashed:
                    item.setToolTip(self.tr("{n:,} of them in the Trash").format(n=info.trashed))
                self.table.setItem(row, column, item)
        if not infos and not self.backups.manager.in_memory:
            self.status.setText(self.tr("No backups yet."))
        paths = [i.path for i in infos]
        if selected is not None and selected.path in paths:
            self.table.selectRow(paths.index(selected.path))
        self._enable()

    def reason(self, reason: str) -> str:
        return {
            MANUAL: self.tr("By you"),
            DAILY: self.tr("Daily"),
            BEFORE_MIGRATION: self.tr("Before an update"),
            BEFORE_RESTORE: self.tr("Before a restore"),
        }.get(reason, reason)

    def selected(self) -> BackupInfo | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self.shown):
            return None
        return self.shown[rows[0].row()]

    def _enable(self) -> None:
        usable = not self.backups.manager.in_memory and not self.busy
        chosen = self.selected()
        self.back_up.setEnabled(usable)
        self.restore.setEnabled(usable and chosen is not None and chosen.chats is not None)
        self.open_folder.setEnabled(not self.backups.manager.in_memory)

    def _set_busy(self, busy: bool, text: str = "") -> None:
        self.busy = busy
        if text:
            self.status.setText(text)
        self._enable()

    # ----- actions
    def _back_up(self) -> None:
        self._set_busy(True, self.tr("Backing up…"))
        self.backups.back_up_now()

    def _backed_up(self, info: BackupInfo) -> None:
        self._set_busy(False, self.backed_up_text(info))

    def chats_in(self, info: BackupInfo) -> str:
        """What the file holds: "7 chats", or "7 chats, 1 of them in the Trash"."""
        total = info.in_file or 0
        chats = self.tr("1 chat") if total == 1 else self.tr("{n:,} chats").format(n=total)
        if info.trashed:
            chats = self.tr("{chats}, {n:,} of them in the Trash").format(chats=chats, n=info.trashed)
        return chats

    def backed_up_text(self, info: BackupInfo) -> str:
        """What the file written holds, counted in it: the chats in the Trash are in it too (a restore
        brings them back there), said apart ("Backed up 6 chats" of a file of 7 read as one lost)."""
        size = QLocale().formattedDataSize(info.size)
        return self.tr("Backed up {chats} ({size}).").format(chats=self.chats_in(info), size=size)

    def ask_restore(self) -> QMessageBox | None:
        """The question before a restore (window-modal, kept in `question` while open)."""
        info = self.selected()
        if info is None or info.chats is None or self.busy:
            return None
        box = plain_message(QMessageBox(self))
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle(self.tr("Restore this backup?"))
        question = self.tr("Restore the backup of {date} ({chats})?")
        box.setText(question.format(date=when(info.created_at), chats=self.chats_in(info)))
        box.setInformativeText(
            self.tr(
                "The chats you have now are replaced by the ones in the backup. They are not lost: they are kept "
                "aside as a backup first, which you can restore in the same way."
            )
        )
        restore = box.addButton(self.tr("Restore"), QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(restore)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.buttonClicked.connect(lambda button: self._answered(info) if button is restore else None)
        box.destroyed.connect(lambda: setattr(self, "question", None))
        self.question = box
        box.open()
        return box

    def _answered(self, info: BackupInfo) -> None:
        self._set_busy(True, self.tr("Restoring…"))
        self.backups.restore(info)

    def _restored(self, aside: BackupInfo) -> None:
        self._set_busy(False, self.tr("Restored. Your chats from before are kept as the backup of {date}.").format(
            date=when(aside.created_at)
        ))  # fmt: skip

    def _failed(self, message: str) -> None:
        self._set_busy(False, message)


def when(timestamp: float) -> str:
    """A backup's date and time in the user's locale, to the second (two backups a minute apart differ)."""
    locale = QLocale()
    if locale.language() == QLocale.Language.C:  # (the C locale's short format reads "4 12 2026 21:50:55")
        return QDateTime.fromSecsSinceEpoch(int(timestamp)).toString("yyyy-MM-dd HH:mm:ss")
    form = locale.dateTimeFormat(QLocale.FormatType.ShortFormat)
    if "ss" not in form:
        form = form.replace("mm", "mm:ss", 1)  # (minutes are lower case, months upper case)
    return locale.toString(QDateTime.fromSecsSinceEpoch(int(timestamp)), form)
