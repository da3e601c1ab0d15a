"""The Serving tab's plot: latency (TTFT p95) against throughput (output tokens/s), one point per load
of a serving-lab result, with the TTFT objective; in the window's theme, redrawn when it changes."""

from __future__ import annotations

from typing import Any

from PySide6.QtCharts import QChart, QChartView, QLineSeries, QScatterSeries, QValueAxis
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFont, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QWidget


class ServingChart(QChartView):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        chart = QChart()
        chart.setTitle(self.tr("TTFT p95 against output tokens/s, per load"))
        self.setChart(chart)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        # (below about 12 lines of text QtCharts elides the x axis' labels and title to "…")
        self.setMinimumHeight(14 * self.fontMetrics().height())
        self.setAccessibleName(self.tr("Latency against throughput chart"))
        self.setAccessibleDescription(self.tr("One point per load; the table above has the figures"))
        self._result: dict[str, Any] | None = None  # (plotted again when the theme changes)

    def plot(self, result: dict[str, Any]) -> None:
        """One point per load (named in the legend), joined in load order, and the TTFT objective."""
        self._result = result
        chart = self.chart()
        chart.removeAllSeries()
        self.recolor()
        for axis in chart.axes():
            chart.removeAxis(axis)
        points = [
            (r["load"], r["output_tokens_per_s"], r["ttft_ms"]["p95"])
            for r in result["runs"]
            if r["ttft_ms"]["p95"] is not None
        ]
        path = QLineSeries()
        path.setName(self.tr("in load order"))
        for _label, x, y in points:
            path.append(x, y)
        series: list[QLineSeries | QScatterSeries] = [path]
        for label, x, y in points:
            dot = QScatterSeries()
            dot.setName(label)
            dot.setMarkerSize(11)
            dot.append(x, y)
            series.append(dot)
        limit = result["slo"]["ttft_ms"]
        top_x = max([x for _l, x, _y in points] + [1.0]) * 1.15
        top_y = max([y for _l, _x, y in points] + [limit or 0.0, 1.0]) * 1.15
        if limit is not None:
            objective = QLineSeries()
            objective.setName(self.tr("TTFT objective"))
            objective.append(0, limit)
            objective.append(top_x * 4, limit)  # (past the axis' nice end: clipped there)
            pen = QPen(objective.pen())
            pen.setStyle(Qt.PenStyle.DashLine)
            pen.setColor(self.palette().color(QPalette.ColorRole.Text))  # (a limit, not a load: the text's colour)
            objective.setPen(pen)
            series.append(objective)
        for s in series:
            chart.addSeries(s)
        x, y = QValueAxis(), QValueAxis()
        x.setRange(0, top_x)
        x.setTitleText(self.tr("output tokens/s"))
        y.setRange(0, top_y)
        y.setTitleText(self.tr("TTFT p95 (ms)"))
        small = QFont(QApplication.font())  # (as the speed charts: labels fit, and scale with the system font)
        small.setPointSizeF(small.pointSizeF() * 0.8)
        for axis in (x, y):
            axis.setLabelFormat("%.0f")
            axis.setLabelsFont(small)
            axis.setTitleFont(small)
            axis.setTickCount(5)
            axis.applyNiceNumbers()
        chart.addAxis(x, Qt.AlignmentFlag.AlignBottom)
        chart.addAxis(y, Qt.AlignmentFlag.AlignLeft)
        for s in series:
            s.attachAxis(x)
            s.attachAxis(y)
        chart.legend().setFont(small)
        chart.legend().setAlignment(Qt.AlignmentFlag.AlignRight)
        chart.legend().markers(path)[0].setVisible(False)  # (the line only joins the loads' points)

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
