"""Two saved serving-lab runs side by side (the Serving tab's "Compare two runs…", the terminal's
`bench serve --compare A.json B.json`): two of the runs the tab kept (the data folder's
benchmarks/serving-*.json, newest first) picked, each read by engine/bench/serving/compare.py (a file
that is not one load sweep's result says why: a knob sweep's, a damaged file), and each load both ran
shown with its figures in A and in B and the ratio B/A; what each run measured (model, machine, engine,
workload, date) above. A thin client of compare.py: the figures and the refusals are its."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.engine.bench.serving.compare import compare, read_result
from ember_chat.engine.errors import EmberError

MAX_LISTED = 200  # the newest runs listed (a folder of thousands is not a list to pick from)


def saved_runs(folder: Path) -> list[Path]:
    """The serving runs kept in `folder`, newest first."""
    try:
        found = [p for p in folder.glob("serving-*.json") if p.is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)[:MAX_LISTED]


def _num(value: float | None) -> str:
    """As the terminal's --compare shows a figure."""
    if value is None:
        return "—"
    return f"{value:.0f}" if value.is_integer() or abs(value) >= 10 else f"{value:.2f}"


class CompareRunsDialog(QDialog):
    def __init__(self, folder: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Two serving runs side by side"))
        self.folder = folder
        self.compared: dict[str, Any] | None = None
        runs = saved_runs(folder)
        self.a, self.b = QComboBox(), QComboBox()
        for combo, side in ((self.a, "A"), (self.b, "B")):
            combo.setAccessibleName(self.tr("Run {side}").format(side=side))
            for path in runs:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
                combo.addItem(f"{path.name} ({when})", str(path))
        if len(runs) > 1:  # (the newest against the one before: A the older, B the newer)
            self.a.setCurrentIndex(1)
        self.about = QLabel()
        self.about.setWordWrap(True)
        self.about.setTextFormat(Qt.TextFormat.PlainText)  # (a server's model name is not markup)
        self.about.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.about.setAccessibleName(self.tr("What each run measured"))
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels([self.tr("Figure"), "A", "B", "B/A"])
        self.table.setAccessibleName(self.tr("The two runs' figures"))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            self.table.horizontalHeader().setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setForegroundRole(QPalette.ColorRole.PlaceholderText)

        pick = QGridLayout()
        for row, (side, combo) in enumerate((("A", self.a), ("B", self.b))):
            label = QLabel(self.tr("Run {side}").format(side=side))
            label.setBuddy(combo)
            pick.addWidget(label, row, 0)
            pick.addWidget(combo, row, 1)
        pick.setColumnStretch(1, 1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(pick)
        layout.addWidget(self.about)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.note)
        layout.addWidget(close)
        self.resize(720, 560)
        for combo in (self.a, self.b):
            combo.currentIndexChanged.connect(lambda _i: self.show_comparison())
        if len(runs) < 2:
            self.about.setText(
                self.tr("Two runs are needed: {n} kept in {folder}. Each run of the Serving tab is kept there.").format(
                    n=len(runs), folder=folder
                )
            )
        else:
            self.show_comparison()

    def pick(self, a: Path, b: Path) -> None:
        """Runs A and B are these files (listed ones)."""
        self.a.setCurrentIndex(self.a.findData(str(a)))
        self.b.setCurrentIndex(self.b.findData(str(b)))
        self.show_comparison()

    def show_comparison(self) -> None:
        self.table.setRowCount(0)
        self.compared = None
        a_path, b_path = self.a.currentData(), self.b.currentData()
        if a_path is None or b_path is None:
            return
        try:
            self.compared = compare(read_result(Path(a_path)), read_result(Path(b_path)))
        except EmberError as exc:  # (compare.py names what is wrong with which file)
            self.about.setText(str(exc))
            self.note.clear()
            return
        lines = []
        for side, path in (("A", a_path), ("B", b_path)):
            c = self.compared[side.lower()]
            lines.append(
                self.tr("{side}: {model} on {where}, {engine}, {workload}, {date} ({file})").format(
                    side=side,
                    model=c.get("model"),
                    where=c.get("hardware") or c.get("target"),
                    engine=c.get("engine"),
                    workload=c.get("workload"),
                    date=c.get("date"),
                    file=Path(path).name,
                )
            )
        self.about.setText("\n".join(lines))
        bold = QFont(self.table.font())
        bold.setBold(True)
        for load in self.compared["loads"]:
            row = self.table.rowCount()
            self.table.insertRow(row)
            heading = QTableWidgetItem(load["load"])
            heading.setFont(bold)
            self.table.setItem(row, 0, heading)
            for figure in load["figures"]:
                row = self.table.rowCount()
                self.table.insertRow(row)
                ratio = "—" if figure["ratio"] is None else f"{figure['ratio']:.2f}"
                for column, text in enumerate(("    " + figure["figure"], _num(figure["a"]), _num(figure["b"]), ratio)):
                    item = QTableWidgetItem(text)
                    if column:
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.table.setItem(row, column, item)
        notes = []
        if not self.compared["loads"]:
            notes.append(self.tr("No load ran in both."))
        for side in ("a", "b"):
            if self.compared[f"only_{side}"]:
                notes.append(
                    self.tr("Only in {side}: {loads}").format(
                        side=side.upper(), loads=", ".join(self.compared[f"only_{side}"])
                    )
                )
        self.note.setText("\n".join(notes))
        self.table.resizeRowsToContents()

    def table_text(self) -> list[list[str]]:
        """The table's cells, row by row (tests read them)."""
        return [
            [(self.table.item(r, c).text() if self.table.item(r, c) else "") for c in range(4)]
            for r in range(self.table.rowCount())
        ]
