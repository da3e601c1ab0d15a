"""Saved conversation caches (KV snapshots), the window's side: Settings ▸ Conversation caches… shows
"In memory: N conversations, X MB (written to disk when Ember quits)" over "On disk: M files, Y MB" (apart: the
latest have no file until they leave RAM) with Clear, and the disk space they may take (the setting
`kv_snapshot_cap_mb`; 0: off). The store itself (engine/inference/kv/snapshots.py) is made by
app/main.py and given to the engine service, which hands it to the model; its tiers() and clear() read
and delete files, so they run on the window's task runner (engine_link/tasks.py), never on the GUI thread.

A cap of 0 turns snapshots off: the service gets no store and the saved files are deleted; a cap set
again later makes a new store."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.context import AppContext
from ember_chat.app.qt.settings_page import show_settings_page
from ember_chat.engine.inference.kv.snapshots import SnapshotStore, SnapshotUsage, open_snapshot_store
from ember_chat.engine.storage.settings import Settings

MB = 2**20


class WindowKvCaches(QObject):
    """The store the engine service holds (`service.snapshot_store`), its usage and Clear, and its cap;
    built from the context (the bridge's service, the settings, the task runner, the notifier, the data
    folder) and the widget its dialog stays over (`parent`). The composition connects the conversation's
    `generating_changed` to `on_generating`: what went wrong is said once an answer has ended."""

    usage_known = Signal(object)  # SnapshotUsage: what tiers() said (GUI thread; tests wait on it)
    cleared = Signal()  # Clear has deleted every saved cache (GUI thread)
    failed = Signal(str)  # usage or Clear went wrong, in words

    def __init__(self, ctx: AppContext, parent: QWidget) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.parent_widget = parent
        self.dialog: KvCachesDialog | None = None
        self._retired: list[SnapshotStore] = []  # turned off: closed on a worker, and at quit if not yet
        self._said: tuple[SnapshotStore | None, int] = (None, 0)  # the store, and how many of its problems were said

    @property
    def store(self) -> SnapshotStore | None:
        return self.ctx.bridge.service.snapshot_store

    # ----- what went wrong (a damaged file, a full disk): said once an answer has ended
    def on_generating(self, on: bool) -> None:
        if not on:
            self.say_problems()

    def say_problems(self) -> None:
        """The store's new sentences in the window's banner (a list in memory: nothing read from disk)."""
        store = self.store
        if store is None:
            return
        said = self._said[1] if self._said[0] is store else 0
        new = store.problems[said:]
        self._said = (store, said + len(new))
        if new:
            self.ctx.notifier.show_notice(" ".join(new))

    # ----- what the dialog asks for
    def open_dialog(self) -> KvCachesDialog:
        if self.dialog is None:
            self.dialog = KvCachesDialog(self, self.parent_widget)
        show_settings_page(self.parent_widget, "kv_caches", self.dialog)  # Settings ▸ Conversation caches
        self.refresh()
        return self.dialog

    def refresh(self) -> None:
        store = self.store
        if store is None:
            self.usage_known.emit(SnapshotUsage())
            return
        self.ctx.tasks.run(store.tiers, self.usage_known.emit, self.failed.emit, key="kv-caches-usage")

    def clear(self) -> None:
        store = self.store
        if store is None:
            return
        # (a key of its own: a usage asked meanwhile must not make the clear stale, latest wins per key)
        self.ctx.tasks.run(store.clear, self._cleared, self.failed.emit, key="kv-caches-clear")

    def _cleared(self, _result: object) -> None:
        self.cleared.emit()
        self.refresh()

    def set_cap(self, cap_mb: int) -> None:
        """The new cap, saved; 0 turns snapshots off (the files are deleted), a cap again on."""
        ctx = self.ctx
        ctx.save_settings(ctx.settings.with_changes(kv_snapshot_cap_mb=cap_mb))
        service, store = ctx.bridge.service, self.store
        if cap_mb == 0:
            if store is None:
                return
            service.snapshot_store = None
            self._retired.append(store)
            ctx.tasks.run(lambda: self._retire(store), lambda _r: self.refresh(), self.failed.emit)
        elif store is None:
            service.snapshot_store = open_snapshot_store(ctx.data_dir, cap_mb)
            self.refresh()
        else:  # (over the new cap: the least recently used files are deleted, on the worker)
            ctx.tasks.run(lambda: self._set_cap(store, cap_mb), lambda _r: self.refresh(), self.failed.emit)

    @staticmethod
    def _set_cap(store: SnapshotStore, cap_mb: int) -> None:
        store.set_cap(cap_mb * MB)
        store.wait_idle(10)  # (its writer deletes what is over the cap: counted after that)

    @staticmethod
    def _retire(store: SnapshotStore) -> None:
        # Closed first (puts ignored from then on, nothing flushed), then the files deleted: cleared first,
        # a put meanwhile would be written by close() and stay on disk, no store being made again.
        store.close(flush=False)
        store.clear()

    def close(self) -> None:
        """At quit, after the engine service has closed (the model saved its caches into the store):
        the store writes what it holds and its writer ends. That may take what the disk needs (the
        store bounds it), so the window hides itself first (its closeEvent, before the shutdown that
        calls this): no frozen window on screen meanwhile."""
        store = self.store
        for s in [*self._retired, *([store] if store is not None else [])]:
            s.close()
        self._retired.clear()


class KvCachesDialog(QDialog):
    def __init__(self, caches: WindowKvCaches, parent: QWidget) -> None:
        super().__init__(parent)
        self.caches = caches
        self.setWindowTitle(self.tr("Conversation caches"))
        intro = QLabel(
            self.tr(
                "Ember keeps what the model has already read of your recent chats (their KV cache), in memory "
                "and then on disk, so going back to a long chat, even after a restart, answers at once instead "
                "of reading it all again. The least recently used are deleted when they take more than the "
                "space below. Clearing them only costs time: a chat is read again when it comes back."
            )
        )
        intro.setWordWrap(True)
        self.cap = QSpinBox()
        self.cap.setRange(0, Settings.describe()["kv_snapshot_cap_mb"]["max"])
        self.cap.setSingleStep(256)
        self.cap.setGroupSeparatorShown(True)
        self.cap.setSuffix(self.tr(" MB"))
        self.cap.setSpecialValueText(self.tr("Off"))  # shown for 0
        self.cap.setKeyboardTracking(False)  # typing "500" is not 5, then 50 (a 0 on the way would delete them)
        self.cap.setValue(caches.ctx.settings.kv_snapshot_cap_mb)
        self.cap.setAccessibleName(self.tr("Disk space for conversation caches"))
        self.cap.setToolTip(self.tr("Disk space the saved conversation caches may take, in MB (Off: none are saved)"))
        self.cap.valueChanged.connect(caches.set_cap)
        self.usage = QLabel(self.tr("Saved conversation caches: counting…"))
        self.usage.setWordWrap(True)  # (memory and disk in one sentence: two lines in a narrow dialog)
        self.usage.setAccessibleName(self.tr("Saved conversation caches"))
        self.usage.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.clear_button = QPushButton(self.tr("&Clear"))
        self.clear_button.setToolTip(self.tr("Delete every saved conversation cache (your chats stay)"))
        self.clear_button.setAccessibleName(self.tr("Clear saved conversation caches"))
        self.clear_button.clicked.connect(self._clear)
        row = self._usage_row = QHBoxLayout()
        row.addWidget(self.usage, 1)
        row.addWidget(self.clear_button)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        form.addRow(self.tr("&Disk space"), self.cap)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addSpacing(6)
        layout.addLayout(form)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        caches.usage_known.connect(self.show_usage)
        caches.failed.connect(self.show_failure)
        self.setMinimumWidth(520)  # (the wrapped introduction's height follows the width)
        self.close_button = buttons.button(QDialogButtonBox.StandardButton.Close)

    def showEvent(self, event: QShowEvent) -> None:
        """Each time it opens, the focus starts on Close, not on the disk space (a key typed there would
        change it; 0 deletes every cache)."""
        super().showEvent(event)
        self.close_button.setFocus()
        self._fit_height()

    def _fit_height(self) -> None:
        """As tall as the wrapped sentences need at the width it got (a small screen: narrower, more lines;
        a status sentence shown later: one more; the usage's second line)."""
        # (a label's new text only posts a request to the layouts: their cached heights are stale until then)
        self._usage_row.invalidate()
        layout = self.layout()
        layout.invalidate()
        needed = layout.totalHeightForWidth(self.width())
        if needed > self.height():
            self.resize(self.width(), needed)

    def _clear(self) -> None:
        self.clear_button.setEnabled(False)  # until the files are gone and counted again
        self.usage.setText(self.tr("Saved conversation caches: clearing…"))
        self.caches.clear()

    def show_usage(self, usage: SnapshotUsage) -> None:
        self.status.hide()
        if self.caches.store is None:
            self.usage.setText(self.tr("Saved conversation caches: off (no disk space for them)"))
            self.clear_button.setEnabled(False)
            return
        # RAM and disk apart: the latest caches have no file until RAM is full or Ember quits, so one
        # total called "files" read as files that were not on disk.
        self.usage.setText(f"{self._in_memory(usage)}\n{self._on_disk(usage)}")
        self.clear_button.setEnabled(usage.ram_count + usage.disk_count > 0)
        self._fit_height()
        if self.caches.store.blocked is not None:  # (why none can be saved: a file in the way, a full disk)
            self.status.setText(self.caches.store.blocked)
            self.status.show()
            self._fit_height()

    def _in_memory(self, usage: SnapshotUsage) -> str:
        n = usage.ram_count
        if n == 0:
            return self.tr("In memory: none")
        text = (
            self.tr("In memory: 1 conversation, {size} MB (written to disk when Ember quits)")
            if n == 1
            else self.tr("In memory: {n} conversations, {size} MB (written to disk when Ember quits)")
        )
        return text.format(n=f"{n:,}", size=f"{usage.ram_bytes / MB:,.1f}")

    def _on_disk(self, usage: SnapshotUsage) -> str:
        n = usage.disk_count
        if n == 0:
            return self.tr("On disk: none")
        text = self.tr("On disk: 1 file, {size} MB") if n == 1 else self.tr("On disk: {n} files, {size} MB")
        return text.format(n=f"{n:,}", size=f"{usage.disk_bytes / MB:,.1f}")

    def show_failure(self, message: str) -> None:
        self.status.setText(message)
        self.status.show()
        self._fit_height()
        self.clear_button.setEnabled(self.caches.store is not None)
