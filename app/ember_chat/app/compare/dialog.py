"""The comparison dialog: pick 2–4 models, then one column per model streaming its answer with its
metrics line, a diff toggle against the first column, and "Keep this one". Earlier comparisons of the
same prompt are listed at the top and shown again as they were kept.

The dialog shows; CompareActions (actions.py) runs, stores and keeps. Events of a run arrive
through `show_event` on the GUI thread."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.compare.column import CompareColumn
from ember_chat.app.style.theme import Colors
from ember_chat.engine.inference.compare import MAX_MODELS, MIN_MODELS, CompareAnswer
from ember_chat.engine.storage.comparisons import Comparison

PROMPT_CHARS = 240
_THEME_EVENTS = (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange, QEvent.Type.StyleChange)


class CompareDialog(QDialog):
    start_requested = Signal(list)  # the chosen model names, in column order
    keep_requested = Signal(int)  # a column's index
    stop_requested = Signal()
    earlier_shown = Signal(int)  # a stored comparison's id (tests)

    def __init__(
        self,
        parent: QWidget,
        colors: Colors,
        prompt: str,
        choices: list[tuple[str, str]],
        preselect: list[str],
        earlier: list[Comparison],
        theme: Callable[[], Colors] | None = None,
    ) -> None:
        """`theme`: the window's colours now (read again when the palette changes: a theme switch)."""
        super().__init__(parent)
        self._theme = theme
        self.setWindowTitle(self.tr("Compare models"))
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self.colors = colors
        self.labels = dict((name, label) for label, name in choices)
        self.earlier = list(earlier)
        self.columns: list[CompareColumn] = []
        self.running = False
        self.forgotten = False  # the chats changed under the dialog: nothing to keep or start (`forget`)
        self.comparison: Comparison | None = None  # the one shown (running or stored)

        shown = prompt if len(prompt) <= PROMPT_CHARS else prompt[:PROMPT_CHARS].rstrip() + "…"
        self.prompt = QLabel(self.tr("Prompt: {text}").format(text=shown))
        self.prompt.setWordWrap(True)
        self.prompt.setTextFormat(Qt.TextFormat.PlainText)

        self.earlier_box = QComboBox()
        self.earlier_box.setAccessibleName(self.tr("Earlier comparisons of this prompt"))
        self.earlier_box.addItem(self.tr("New comparison"), None)
        for c in self.earlier:
            self._add_earlier(c)
        self.earlier_box.currentIndexChanged.connect(self._on_earlier)
        self.earlier_row = QWidget()
        row = QHBoxLayout(self.earlier_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel(self.tr("Comparisons of this prompt:")))
        row.addWidget(self.earlier_box, 1)
        self.earlier_row.setVisible(bool(self.earlier))

        # choosing the models
        self.picker = QListWidget()
        self.picker.setAccessibleName(self.tr("Models to compare"))
        for label, name in choices:
            item = QListWidgetItem(label)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in preselect else Qt.CheckState.Unchecked)
            self.picker.addItem(item)
        self.picker.itemChanged.connect(self._update_start)
        self.hint = QLabel()
        self.hint.setWordWrap(True)
        self.start_button = QPushButton(self.tr("Compare"))
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self._start)
        self.choose = QWidget()
        choose = QVBoxLayout(self.choose)
        choose.setContentsMargins(0, 0, 0, 0)
        about = QLabel(
            self.tr(
                "Pick two to four models. They answer the chat up to this prompt with the same settings "
                "and seed; models on this computer run one after another, remote ones at the same time."
            )
        )
        about.setWordWrap(True)
        choose.addWidget(about)
        choose.addWidget(self.picker, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.hint, 1)
        buttons.addWidget(self.start_button)
        choose.addLayout(buttons)

        # the columns
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.hide()

        self.diff = QCheckBox(self.tr("Show differences from the first column"))
        self.diff.setEnabled(False)
        self.diff.toggled.connect(self._show_diff)
        self.stop_button = QPushButton(self.tr("Stop"))
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop_requested.emit)
        self.new_button = QPushButton(self.tr("New comparison"))
        self.new_button.hide()
        self.new_button.clicked.connect(lambda: self.earlier_box.setCurrentIndex(0) or self._choose_again())
        close = QPushButton(self.tr("Close"))
        close.clicked.connect(self.close)
        bottom = QHBoxLayout()
        bottom.addWidget(self.diff, 1)
        bottom.addWidget(self.new_button)
        bottom.addWidget(self.stop_button)
        bottom.addWidget(close)

        lay = QVBoxLayout(self)
        lay.addWidget(self.prompt)
        lay.addWidget(self.earlier_row)
        lay.addWidget(self.choose, 1)
        lay.addWidget(self.splitter, 1)
        lay.addLayout(bottom)
        self._update_start()
        self.resize(980, 600)

    # ----- choosing
    def checked(self) -> list[str]:
        items = [self.picker.item(i) for i in range(self.picker.count())]
        return [i.data(Qt.ItemDataRole.UserRole) for i in items if i.checkState() == Qt.CheckState.Checked]

    def set_checked(self, names: list[str]) -> None:
        for i in range(self.picker.count()):
            item = self.picker.item(i)
            on = item.data(Qt.ItemDataRole.UserRole) in names
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)

    def _update_start(self, *_: object) -> None:
        n = len(self.checked())
        if self.picker.count() < MIN_MODELS:
            self.hint.setText(
                self.tr("A comparison needs two models: download another one, or add a remote connection.")
            )
        elif n < MIN_MODELS:
            self.hint.setText(self.tr("Pick at least two models."))
        elif n > MAX_MODELS:
            self.hint.setText(self.tr("Pick at most four models."))
        else:
            self.hint.setText(self.tr("{count} models chosen.").format(count=n))
        self.start_button.setEnabled(MIN_MODELS <= n <= MAX_MODELS and not self.running and not self.forgotten)

    def _start(self) -> None:
        names = self.checked()
        if MIN_MODELS <= len(names) <= MAX_MODELS and not self.running and not self.forgotten:
            self.start_requested.emit(names)

    def _choose_again(self) -> None:
        self.splitter.hide()
        self.choose.show()
        self.new_button.hide()
        self.diff.setChecked(False)
        self.diff.setEnabled(False)
        self._update_start()

    # ----- columns
    def show_columns(self, comparison: Comparison) -> None:
        """One column per answer of `comparison` (empty while it runs)."""
        self.comparison = comparison
        for col in self.columns:
            col.setParent(None)
            col.deleteLater()
        self.columns = []
        for a in comparison.answers:
            col = CompareColumn(a.position, self.labels.get(a.model, a.model), self.colors)
            col.keep_clicked.connect(self.keep_requested.emit)
            self.splitter.addWidget(col)
            self.columns.append(col)
        self.splitter.setSizes([1000] * len(self.columns))
        self.choose.hide()
        self.splitter.show()
        self.diff.setChecked(False)
        self.diff.setEnabled(False)

    def run_started(self, comparison: Comparison) -> None:
        self.running = True
        self.show_columns(comparison)
        self.stop_button.setEnabled(True)
        self.new_button.hide()
        self.earlier_box.setEnabled(False)

    def show_event(self, kind: str, index: int, value: object) -> None:
        """An event of the run (GUI thread): loading, started, tokens, finished."""
        if not 0 <= index < len(self.columns):
            return
        col = self.columns[index]
        if kind == "loading":
            col.loading(float(value))  # type: ignore[arg-type]
        elif kind == "started":
            col.started()
        elif kind == "tokens":
            col.append(str(value))
        elif kind == "finished" and isinstance(value, CompareAnswer):
            col.finish(value.text, value.reason, value.metrics_dict(), value.error)

    def run_ended(self, comparison: Comparison) -> None:
        """Every column has ended; `comparison` as stored."""
        self.running = False
        self.comparison = comparison
        self.stop_button.setEnabled(False)
        self.diff.setEnabled(True)
        self.new_button.show()
        self.earlier_box.setEnabled(True)
        self.earlier.append(comparison)
        self._add_earlier(comparison)
        self.earlier_row.show()
        self._update_start()

    def run_lost(self, why: str) -> None:
        """The run stopped with its prompt gone: what streamed stays on screen (nothing to keep), `why`
        in place of the prompt."""
        self.running = False
        self.comparison = None
        self.stop_button.setEnabled(False)
        self.earlier_box.setEnabled(False)
        self.new_button.hide()
        for col in self.columns:
            if not col.done:
                col.finish(col.text, "cancelled", None, None)  # "Stopped.", what streamed stays
            col.keep.setEnabled(False)
        self.prompt.setText(why)

    def forget(self, why: str) -> None:
        """The chats changed under the dialog (another backup restored, all chats deleted): what is on
        screen stays, with nothing to keep and no new comparison to start; `why` in place of the prompt."""
        self.forgotten = True
        self.run_lost(why)
        self.start_button.setEnabled(False)
        self.picker.setEnabled(False)

    def show_stored(self, comparison: Comparison) -> None:
        self.show_columns(comparison)
        for col, a in zip(self.columns, comparison.answers, strict=True):
            if a.kept_message_id is not None:
                col.mark_kept()
            col.finish(a.content, "stop" if a.error is None else "error", a.metrics, a.error)
        self.diff.setEnabled(True)
        self.new_button.show()
        self.earlier_shown.emit(comparison.id)

    def comparison_changed(self, comparison: Comparison) -> None:
        """`comparison` as stored now (an answer was kept)."""
        self.earlier = [comparison if c.id == comparison.id else c for c in self.earlier]
        if self.comparison is not None and self.comparison.id == comparison.id:
            self.comparison = comparison
            for col, a in zip(self.columns, comparison.answers, strict=True):
                if a.kept_message_id is not None:
                    col.mark_kept()

    def _add_earlier(self, c: Comparison) -> None:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.created_at))
        models = ", ".join(self.labels.get(a.model, a.model) for a in c.answers)
        self.earlier_box.addItem(f"{when} · {models}", c.id)

    def _on_earlier(self, index: int) -> None:
        cid = self.earlier_box.itemData(index)
        if cid is None:
            self._choose_again()
            return
        found = [c for c in self.earlier if c.id == cid]
        if found and not self.running:
            self.show_stored(found[-1])

    def _show_diff(self, on: bool) -> None:
        if not self.columns:
            return
        base = self.columns[0].text if on else None
        for col in self.columns[1:]:
            col.show_diff(base)

    def changeEvent(self, event: QEvent) -> None:  # Qt override
        super().changeEvent(event)
        if event.type() in _THEME_EVENTS and self._theme is not None:
            QTimer.singleShot(0, self._follow_theme)  # (the window takes its new colours after the event)

    def _follow_theme(self) -> None:
        if self._theme is not None and self._theme() != self.colors:
            self.set_colors(self._theme())

    def set_colors(self, colors: Colors) -> None:
        self.colors = colors
        for col in self.columns:
            col.set_colors(colors)
        self._show_diff(self.diff.isChecked())
