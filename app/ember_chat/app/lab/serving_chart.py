"""The Serving tab's plots of a serving-lab result, one at a time by a selector above them: latency
(TTFT p95) against throughput (output tokens/s) with the TTFT objective, goodput against the load beside
the requests completed, and the percentiles (p50 to p99) of TTFT and ITL per load. The points are those
of the HTML report (report_html.panels): one per row of the table (a load, or a knob sweep's setting and
load; a load's repeats as one, their median); in the window's theme, redrawn when it changes."""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCharts import (
    QAbstractAxis,
    QCategoryAxis,
    QChart,
    QChartView,
    QLineSeries,
    QScatterSeries,
    QValueAxis,
)
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFont, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ember_chat.engine.bench.serving.report_html import PLOTS, Panel, load_rows, nice_ticks, panels, row_label

LATENCY, GOODPUT, PERCENTILES = PLOTS
TTFT, ITL = "ttft", "itl"  # (the percentiles plot's figure: one at a time, four lines and the objective fit)


class ServingChart(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.choice = QComboBox()
        for text, which in (
            (self.tr("Latency against throughput"), LATENCY),
            (self.tr("Goodput against load"), GOODPUT),
            (self.tr("Percentiles per load"), PERCENTILES),
        ):
            self.choice.addItem(text, which)
        self.choice.setAccessibleName(self.tr("Plot"))
        self.choice.setAccessibleDescription(self.tr("Which plot of the figures to draw"))
        self.choice.currentIndexChanged.connect(self._chosen)
        label = QLabel(self.tr("&Plot:"))
        label.setBuddy(self.choice)
        self.figure = QComboBox()  # (the percentiles plot's: TTFT's or ITL's)
        self.figure.addItem(self.tr("Time to the first token (TTFT)"), TTFT)
        self.figure.addItem(self.tr("Gaps between tokens (ITL)"), ITL)
        self.figure.setAccessibleName(self.tr("Percentiles of"))
        self.figure.setAccessibleDescription(self.tr("Whose percentiles the plot draws: TTFT's or ITL's"))
        self.figure.currentIndexChanged.connect(self._chosen)
        self.figure_label = QLabel(self.tr("&of:"))
        self.figure_label.setBuddy(self.figure)
        self.view = QChartView()
        self.view.setChart(QChart())
        self.view.setRenderHint(QPainter.RenderHint.Antialiasing)
        # (below about 12 lines of text QtCharts elides the x axis' labels and title to "…")
        self.view.setMinimumHeight(14 * self.fontMetrics().height())
        self.view.setAccessibleName(self.tr("Serving figures plot"))
        self.view.setAccessibleDescription(self.tr("One point per load; the table above has the figures"))
        row = QHBoxLayout()
        row.addWidget(label)
        row.addWidget(self.choice)
        row.addWidget(self.figure_label)
        row.addWidget(self.figure)
        row.addStretch(1)
        self.figure_label.hide()
        self.figure.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)
        self._result: dict[str, Any] | None = None  # (plotted again when the theme or the choice changes)

    def chart(self) -> QChart:
        return self.view.chart()

    def which(self) -> str:
        return str(self.choice.currentData())

    def _chosen(self, _index: int) -> None:
        self.figure_label.setVisible(self.which() == PERCENTILES)
        self.figure.setVisible(self.which() == PERCENTILES)
        if self._result is not None:
            self.plot(self._result)

    def plot(self, result: dict[str, Any]) -> None:
        """The chosen plot of `result`."""
        self._result = result
        chart = self.chart()
        chart.removeAllSeries()
        self.recolor()
        for axis in chart.axes():
            axis.hide()  # (removed only, a plot's axes stayed drawn under the next plot's)
            chart.removeAxis(axis)
        if self.which() == GOODPUT:
            self._goodput(result)
        elif self.which() == PERCENTILES:
            self._percentiles(result)
        else:
            self._latency(result)

    def _latency(self, result: dict[str, Any]) -> None:
        """One point per row of the table (a load, or a knob sweep's setting and load; repeats as one, their
        median), named in the legend, joined in the table's order, and the TTFT objective."""
        chart = self.chart()
        chart.setTitle(self.tr("TTFT p95 against output tokens/s, per load"))
        rows = [r for r in load_rows(result) if isinstance(r.get("ttft_ms"), dict)]
        points = [
            (r.get("setting"), row_label(r), r["output_tokens_per_s"], r["ttft_ms"]["p95"])
            for r in rows
            if r["ttft_ms"].get("p95") is not None and r.get("output_tokens_per_s") is not None
        ]
        paths: dict[object, QLineSeries] = {}  # (a knob sweep: a line per setting, not from one to the next)
        for setting, _label, x, y in points:
            if setting not in paths:
                paths[setting] = QLineSeries()
                paths[setting].setName(self.tr("in load order"))
            paths[setting].append(x, y)
        series: list[QLineSeries | QScatterSeries] = list(paths.values())
        for _setting, label, x, y in points:
            dot = QScatterSeries()
            dot.setName(label)
            dot.setMarkerSize(11)
            dot.append(x, y)
            series.append(dot)
        limit = result["slo"]["ttft_ms"]
        top_x = max([x for _s, _l, x, _y in points] + [1.0]) * 1.15
        top_y = max([y for _s, _l, _x, y in points] + [limit or 0.0])
        if limit is not None:
            series.append(self._objective(self.tr("TTFT objective"), limit, 0, top_x * 4))
        x = QValueAxis()
        x.setRange(0, top_x)
        x.setTitleText(self.tr("output tokens/s"))
        self._attach(series, x, self._y_axis(top_y, self.tr("TTFT p95 (ms)")))
        for path in paths.values():
            chart.legend().markers(path)[0].setVisible(False)  # (the line only joins the loads' points)

    def _goodput(self, result: dict[str, Any]) -> None:
        """Requests/s completed and goodput (within the objective), one point per load."""
        [panel] = panels(result, GOODPUT)
        self.chart().setTitle(self.tr("Goodput against the load"))
        names = [self.tr("requests/s completed"), self.tr("goodput: requests/s within the objective")]
        lines = self._lines(panel, names)
        top = max((y for s in panel.series for _x, y, _l in s.points), default=0.0)
        self._attach(lines, self._load_axis(panel), self._y_axis(top, self.tr("requests/s")))

    def _percentiles(self, result: dict[str, Any]) -> None:
        """p50, p90, p95 and p99 of TTFT (with the TTFT objective) or of ITL per load, as the figure
        chosen beside the plot says: both at once, eight lines and the objective, cut the legend short."""
        ttft, itl = panels(result, PERCENTILES)
        panel, name = (itl, "ITL") if self.figure.currentData() == ITL else (ttft, "TTFT")
        self.chart().setTitle(self.tr("{figure} percentiles per load").format(figure=name))
        series: list[QLineSeries | QScatterSeries] = [*self._lines(panel, [f"{name} {s.name}" for s in panel.series])]
        limit = panel.objective[0] if panel.objective is not None else None
        top = max([y for s in panel.series for _x, y, _l in s.points] + [limit or 0.0])
        if limit is not None:
            right = len(panel.categories or ()) - 0.5  # (the category axis' end: a line past it widened the axis)
            series.append(self._objective(self.tr("TTFT objective"), limit, -0.5, right))
        self._attach(series, self._load_axis(panel), self._y_axis(top, self.tr("milliseconds")))

    def _lines(self, panel: Panel, names: list[str]) -> list[QLineSeries]:
        made = []
        for series, name in zip(panel.series, names, strict=True):
            line = QLineSeries()
            line.setName(name)
            line.setPointsVisible(True)
            for x, y, _label in series.points:
                line.append(x, y)
            made.append(line)
        return made

    def _objective(self, name: str, limit: float, left: float, right: float) -> QLineSeries:
        objective = QLineSeries()
        objective.setName(name)
        objective.append(left, limit)
        objective.append(right, limit)
        pen = QPen(objective.pen())
        pen.setStyle(Qt.PenStyle.DashLine)
        pen.setColor(self.palette().color(QPalette.ColorRole.Text))  # (a limit, not a load: the text's colour)
        objective.setPen(pen)
        return objective

    def _small(self) -> QFont:
        small = QFont(QApplication.font())  # (as the speed charts: labels fit, and scale with the system font)
        small.setPointSizeF(small.pointSizeF() * 0.8)
        return small

    def _y_axis(self, top: float, title: str) -> QValueAxis:
        """0 to the data's largest figure (`top`) and a little more, in round steps as the HTML report's
        (0.15 requests/s: up to 0.2, not 1.5 — a floor of 1 flattened small figures)."""
        ticks = nice_ticks(top * 1.05)
        step = ticks[1] - ticks[0]
        digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
        digits += 1 if step < 1 and round(step * 10**digits, 6) % 1 else 0  # (0.25: two digits)
        y = QValueAxis()
        y.setRange(0, ticks[-1])
        y.setTickCount(len(ticks))
        y.setLabelFormat(f"%.{digits}f")
        y.setTitleText(title)
        return y

    def _load_axis(self, panel: Panel) -> QCategoryAxis:
        """The loads by place (x = 0, 1, …), each named under its point."""
        x = QCategoryAxis()
        x.setLabelsPosition(QCategoryAxis.AxisLabelsPosition.AxisLabelsPositionOnValue)
        names = panel.categories or []
        for i, name in enumerate(names):
            x.append(name + " " * names[:i].count(name), i)  # (a label twice is dropped: made unique)
        x.setRange(-0.5, max(len(names), 1) - 0.5)
        said = {"users at once": self.tr("users at once"), "requests/s sent": self.tr("requests/s sent")}
        x.setTitleText(said.get(panel.x_title, self.tr("load")))  # (the engine's words, translated)
        return x

    def _attach(self, series: list[QLineSeries | QScatterSeries], x: QAbstractAxis, y: QValueAxis) -> None:
        chart = self.chart()
        for s in series:
            chart.addSeries(s)
        small = self._small()
        for axis in (x, y):
            axis.setLabelsFont(small)
            axis.setTitleFont(small)
        if type(x) is QValueAxis:  # (a category axis keeps its loads' range; y has its round steps)
            x.setLabelFormat("%.0f")
            x.setTickCount(5)
            x.applyNiceNumbers()
        chart.addAxis(x, Qt.AlignmentFlag.AlignBottom)
        chart.addAxis(y, Qt.AlignmentFlag.AlignLeft)
        for s in series:
            s.attachAxis(x)
            s.attachAxis(y)
        chart.legend().setFont(small)
        chart.legend().setAlignment(Qt.AlignmentFlag.AlignRight)

    def recolor(self) -> None:
        """The chart in the window's theme (QtCharts' own dark theme on a dark palette; it resets the
        series' colours, so called before they are added)."""
        chart = self.chart()
        palette = self.palette()
        dark = palette.color(QPalette.ColorRole.Window).lightness() < 128
        chart.setTheme(QChart.ChartTheme.ChartThemeDark if dark else QChart.ChartTheme.ChartThemeLight)
        chart.setBackgroundBrush(palette.color(QPalette.ColorRole.Base))
        chart.setTitleBrush(palette.color(QPalette.ColorRole.Text))
        chart.legend().setLabelColor(palette.color(QPalette.ColorRole.Text))

    def changeEvent(self, event: QEvent) -> None:  # Qt override: the theme changed
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            if self._result is not None:
                self.plot(self._result)
            else:
                self.recolor()
