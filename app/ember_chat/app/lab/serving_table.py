"""The Serving tab's figures table: a row per load (with repeats, each load's medians with their 95 %
intervals under them; for a knob sweep, each setting's loads, its best load marked when it is the winner
or on the Pareto front), the failures' reasons in the Failed column's tooltips, as tall as its rows, and
the same rows as tab-separated text for Copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

WINNER, PARETO = "winner", "pareto"  # (a knob sweep's marks, said after a row's load)
Row = tuple[str, dict[str, Any], dict[str, Any], str]  # (label, figures, their 95 % intervals, mark)

COLUMNS = ("Load", "TTFT p50 / p95 ms", "TPOT p50 / p95 ms", "ITL p95 ms", "E2E p95 ms", "Requests/s",
           "Output tok/s", "Goodput req/s", "Within SLO", "Failed")  # fmt: skip


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


class ServingTable(QTableWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels([self.tr(c) for c in COLUMNS])
        self.horizontalHeaderItem(COLUMNS.index("Goodput req/s")).setToolTip(
            self.tr("Requests per second that met the objective")
        )
        self.horizontalHeaderItem(COLUMNS.index("Within SLO")).setToolTip(
            self.tr("The share of requests that met the objective (a load is served at 95 %)")
        )
        self.horizontalHeaderItem(COLUMNS.index("Failed")).setToolTip(self.tr("Point at a count for the reasons"))
        self.setAccessibleName(self.tr("Serving figures"))
        self.setAccessibleDescription(self.tr("One row per load"))
        self.verticalHeader().hide()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setAlternatingRowColors(True)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # (as tall as its rows)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(True)

    def show_rows(self, result: dict[str, Any]) -> list[str]:
        """The result's rows in the table (the winner's in bold, a mark's and a failure's reasons in
        tooltips); returns the notes to say under the table: each row's failures, and a busy machine the
        answer does not say."""
        self.setRowCount(0)
        notes = []
        for label, r, bounds, mark in self.table_rows(result):
            row = self.rowCount()
            self.insertRow(row)
            for c, text in enumerate(self.row_texts(r, bounds, label, mark)):
                item = QTableWidgetItem(text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if mark == WINNER:
                    bold = item.font()
                    bold.setBold(True)
                    item.setFont(bold)
                self.setItem(row, c, item)
            if mark:
                self.item(row, 0).setToolTip(
                    self.tr("The winner: the most goodput within the objective (ties: the most tokens/s)")
                    if mark == WINNER
                    else self.tr("No other setting has more goodput, more tokens/s and a lower TTFT p95 at once")
                )
            reasons = [self.tr("{n} failed: {why}").format(n=n, why=why) for why, n in r["failures"].items()]
            if r["saturated"]:
                reasons.append(self.tr("stopped: {why}").format(why=r["saturated"]))
            if r["cancelled"]:
                reasons.append(self.tr("cancelled during this load"))
            if reasons:
                self.item(row, COLUMNS.index("Failed")).setToolTip("\n".join(reasons))
                notes.append(f"{label} — ".replace("\n", " ") + "; ".join(reasons))
            if r.get("busy") and r["busy"] not in result["answer"]:  # (other programs used the CPU; once)
                notes.append(f"{label} — {r['busy']}".replace("\n", " "))
        return notes

    def fit_table(self) -> None:
        """The table as tall as its rows (two empty ones before the first run), no empty grid below."""
        self.resizeRowsToContents()  # (a figure with its interval takes two lines)
        height = self.horizontalHeader().sizeHint().height() + 2 * self.frameWidth()
        height += sum(self.rowHeight(r) for r in range(self.rowCount()))
        height += max(0, 2 - self.rowCount()) * self.verticalHeader().defaultSectionSize()
        if self.horizontalHeader().length() > self.width() - 2 * self.frameWidth():
            height += self.horizontalScrollBar().sizeHint().height()  # (wider than the window: scrolled)
        self.setFixedHeight(height + 6)

    def table_rows(self, result: dict[str, Any]) -> list[Row]:
        """The table's rows: a run per load; with repeats, each load's medians and their 95 % intervals;
        for a knob sweep, each setting's loads, its best load marked when it is the winner or on the Pareto
        front."""

        def of(load: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
            return load["median"], load["interval95"] if load["repeats"] > 1 else {}

        if "settings" in result:
            rows: list[Row] = []
            for setting in result["settings"]:
                for load in setting["loads"]:
                    mark = ""
                    if load["load"] == setting["figures"]["load"]:
                        mark = WINNER if setting["label"] == result["winner"] else ""
                        mark = mark or (PARETO if setting["label"] in result["pareto"] else "")
                    rows.append((f"{setting['label']}:\n{load['load']}", *of(load), mark))  # (narrow: two lines)
            return rows
        if any(load["repeats"] > 1 for load in result["loads"]):
            words = self.tr("{load}, median of {n}")
            return [(words.format(load=load["load"], n=load["repeats"]), *of(load), "") for load in result["loads"]]
        return [(r["load"], r, {}, "") for r in result["runs"]]

    def row_texts(
        self, r: dict[str, Any], bounds: dict[str, Any] | None = None, label: str | None = None, mark: str = ""
    ) -> list[str]:
        """A row's cells; with `bounds` (the 95 % intervals over repeats), each figure's under it, as
        '812\n(770–850)' (a p50 / p95 pair: the p95's)."""
        bounds = bounds or {}

        def said(key: str, sub: str | None, shown: Callable[[float | None], str]) -> str:
            value, around = (r[key][sub], bounds.get(key, {}).get(sub)) if sub else (r[key], bounds.get(key))
            text = shown(value)
            if around is None:
                return text
            low, high = (shown(bound).replace("-", "\N{MINUS SIGN}") for bound in around)  # (not a dash: −5–13)
            return f"{text}\n({low}–{high})"

        def ms(value: float | None) -> str:
            return _ms(value)

        marks = {WINNER: self.tr("★ winner"), PARETO: self.tr("on the Pareto front")}
        attained = r["slo_attainment"]
        return [
            (label or r["load"]) + (f" — {marks[mark]}" if mark else ""),
            f"{_ms(r['ttft_ms']['p50'])} / {said('ttft_ms', 'p95', ms)}",
            f"{_ms(r['tpot_ms']['p50'])} / {said('tpot_ms', 'p95', ms)}",
            said("itl_ms", "p95", ms),
            said("e2el_ms", "p95", ms),
            said("requests_per_s", None, lambda v: f"{v:.2f}"),
            said("output_tokens_per_s", None, lambda v: f"{v:.1f}"),
            said("goodput_requests_per_s", None, lambda v: f"{v:.2f}"),
            "—" if attained is None else f"{attained:.0%}",
            str(r["failed"]),
        ]

    def table_text(self, result: dict[str, Any], failures: str) -> str:
        """The answer, then the table as tab-separated text (`failures`, the reasons, after it)."""
        lines = [result["answer"], "", "\t".join(self.tr(c) for c in COLUMNS)]
        lines += ["\t".join(cell.replace("\n", " ") for cell in self.row_texts(r, bounds, label, mark))
                  for label, r, bounds, mark in self.table_rows(result)]  # fmt: skip
        if failures:
            lines += ["", failures]
        return "\n".join(lines) + "\n"
