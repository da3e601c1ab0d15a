"""The metrics chart: decode tokens/s over the current answer (left axis) and inter-token latency
(right axis, ms), with tooltips on both lines.

While streaming, each metrics snapshot adds one point per line (ITL is the mean over the tokens of that
batch) and an axis is only rescaled when a point leaves it, by a quarter more, so a re-layout of the
chart is rare. When the answer ends, both axes fit the answer exactly and the ITL line is redrawn from
the per-token latencies, keeping each bucket's slowest token so spikes show.

Each axis is labelled at round steps (1, 2 or 5 × 10^n) with as many decimals as the step needs, so no
two labels read the same: three ticks at fixed thirds printed with one decimal read `0.0 s · 0.1 s ·
0.1 s` for an answer of 0.15 s.

The time axis starts at the first token, not at 0: a long time to first token (a long prompt on a
slow machine) otherwise squeezed the decode into a sliver at the right. Its labels stay times since
the message was sent (as the tooltips, the TTFT figure and the thinking row's "answer at" are), the
axis's title says where it starts, and a break mark at its left end shows that it does not start at 0.

A line is drawn with about one point per two pixels of the plot, at most: an antialiased line costs by
its points, and 400 zig-zag points took 22 ms to paint in a 228 px chart (100: under 4 ms), a stall at
the end of every long answer. The live ITL line is halved the same way when it gets longer than that.
"""

from __future__ import annotations

import math

from PySide6.QtCharts import QChart, QChartView, QLineSeries, QValueAxis
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QCursor, QFont, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QApplication, QGraphicsPathItem, QGraphicsRectItem, QToolTip

from ember_chat.app.style.theme import Colors
from ember_chat.engine.inference.metrics import GenerationMetrics

MIN_POINTS = 100  # the fewest points a line is thinned to, whatever the chart's width
GROWTH = 1.25
X_STEPS = 3  # steps between ticks on the time axis, at most: four labels fit the panel's narrowest chart
Y_STEPS = 4  # (the chart is taller than wide)
MIN_SPAN_S = 0.001  # the time axis's least span (an answer of one token has no decode time)


def _nice_ceiling(value: float) -> float:
    """A round axis maximum a little above `value` (1, 2, 2.5, 5 × 10^n)."""
    if value <= 0:
        return 1.0
    step = 10 ** len(str(int(value))) / 100 if value >= 1 else 0.1
    for m in (1, 2, 2.5, 5, 10):
        top = m * step
        while top < value * 1.05:
            top += m * step
        if top / value < 1.35:
            return top
    return value * 1.25


def nice_step(low: float, high: float, most: int) -> float:
    """The smallest step of 1, 2 or 5 × 10^n whose multiples put at most `most` + 1 ticks (labels)
    between `low` and `high`: at least two where `most` is 3 or more."""
    span = high - low if high > low else 1.0
    power = 10.0 ** math.floor(math.log10(span / most))
    for step in (m * power * scale for scale in (0.1, 1, 10) for m in (1, 2, 5)):
        ticks = math.floor(high / step + 1e-9) - math.ceil(low / step - 1e-9) + 1
        if ticks <= most + 1:
            return step
    return 10 * power  # (not reached: a step of 5 × power spans most × 5/2 × power, over span)


def step_decimals(step: float) -> int:
    """Decimals a label needs to tell ticks `step` apart: 0.05 → 2, 0.5 → 1, 2 → 0."""
    return max(0, -math.floor(math.log10(step) + 1e-9))


def set_ticks(axis: QValueAxis, low: float, high: float, most: int, unit: str = "") -> None:
    """`axis` from `low` to `high`, with ticks and labels at round steps from 0 (each label distinct),
    at most `most` steps apart."""
    step = nice_step(low, high, most)
    label_format = f"%.{step_decimals(step)}f{unit}"
    # Each setter only where the value changes: setLabelFormat re-lays out the chart even when the
    # format is the same (a layout and a second repaint of the chart, 1-2 ms, at every rescale).
    if axis.tickType() != QValueAxis.TickType.TicksDynamic:
        axis.setTickType(QValueAxis.TickType.TicksDynamic)
    if axis.tickAnchor() != 0.0:
        axis.setTickAnchor(0.0)
    if axis.tickInterval() != step:
        axis.setTickInterval(step)
    if axis.labelFormat() != label_format:
        axis.setLabelFormat(label_format)
    if axis.min() != low or axis.max() != high:  # (each change re-lays out the chart)
        axis.setRange(low, high)


def downsample_itl(itl_ms: list[float], start_s: float, limit: int = MIN_POINTS) -> list[QPointF]:
    """Per-token ITL as (time s, ms) points; more tokens than `limit` are bucketed keeping each
    bucket's largest latency."""
    points: list[QPointF] = []
    t = start_s
    size = max(1, -(-len(itl_ms) // limit))
    for i in range(0, len(itl_ms), size):
        bucket = itl_ms[i : i + size]
        t_end = t + sum(bucket) / 1000.0
        points.append(QPointF(t_end, max(bucket)))
        t = t_end
    return points


class AxisBreak:
    """The break mark of the time axis (two slanted strokes over a gap in the axis line) at the plot's
    bottom left, shown while the axis does not start at 0. Two items in the chart's scene, which Qt
    draws and moves with the chart: a view's drawForeground written in Python ran at every repaint
    of the chart (each live point)."""

    def __init__(self, chart: QChart) -> None:
        self.gap = QGraphicsRectItem(QRectF(3, -1.5, 4, 3), chart)  # the gap in the axis line
        self.gap.setPen(QPen(Qt.PenStyle.NoPen))
        strokes = QPainterPath()
        for dx in (3.0, 7.0):
            strokes.moveTo(dx - 1.5, 4.0)
            strokes.lineTo(dx + 1.5, -4.0)
        self.strokes = QGraphicsPathItem(strokes, chart)
        for item in (self.gap, self.strokes):
            item.setZValue(1000)  # (over the axis line and the series)
            item.setVisible(False)
        self.chart = chart
        chart.plotAreaChanged.connect(self._place)
        self.set_color(QColor(Qt.GlobalColor.gray))

    def set_color(self, color: QColor) -> None:
        self.strokes.setPen(QPen(color, 1.2))
        self.gap.setBrush(self.chart.backgroundBrush())

    def show(self, on: bool) -> None:
        self.gap.setVisible(on)
        self.strokes.setVisible(on)
        self._place(self.chart.plotArea())

    def _place(self, plot: QRectF) -> None:
        self.gap.setPos(plot.bottomLeft())
        self.strokes.setPos(plot.bottomLeft())


class SpeedChart:
    def __init__(self) -> None:
        self.speed = QLineSeries()
        self.speed.setName(QChart.tr("tokens/s"))
        self.itl = QLineSeries()
        self.itl.setName(QChart.tr("ITL ms"))
        chart = QChart()
        chart.addSeries(self.speed)
        chart.addSeries(self.itl)
        chart.legend().setAlignment(Qt.AlignmentFlag.AlignBottom)
        chart.setTitle(QChart.tr("Decode speed and inter-token latency"))
        chart.setMargins(chart.margins() * 0)
        chart.setBackgroundRoundness(6)
        self.axis_x = QValueAxis()
        self.axis_speed = QValueAxis()
        self.axis_itl = QValueAxis()
        chart.addAxis(self.axis_x, Qt.AlignmentFlag.AlignBottom)
        chart.addAxis(self.axis_speed, Qt.AlignmentFlag.AlignLeft)
        chart.addAxis(self.axis_itl, Qt.AlignmentFlag.AlignRight)
        self.speed.attachAxis(self.axis_x)
        self.speed.attachAxis(self.axis_speed)
        self.itl.attachAxis(self.axis_x)
        self.itl.attachAxis(self.axis_itl)
        self.speed.hovered.connect(lambda p, on: self._tip(p, on, QChart.tr("{v:.1f} tok/s at {t:.2f} s")))
        self.itl.hovered.connect(lambda p, on: self._tip(p, on, QChart.tr("{v:.1f} ms between tokens at {t:.2f} s")))
        self.chart = chart
        self.view = QChartView(chart)
        self.axis_break = AxisBreak(chart)
        self.view.setRenderHint(QPainter.RenderHint.Antialiasing)
        # its title, axis labels, axis title and legend take about 7 lines of text; below about 4 more for
        # the plot QtCharts elides the x axis's labels and title to "…" (it did at 170 px)
        self.view.setMinimumHeight(12 * self.view.fontMetrics().height())
        self.view.setAccessibleName(QChart.tr("Decode speed chart"))
        self.view.setAccessibleDescription(
            QChart.tr("Tokens per second and inter-token latency over the current answer; the figures are above.")
        )
        self._fonts()
        self._last: tuple[float, int] | None = None  # (elapsed s, tokens) at the previous snapshot
        self._ranges = [1.0, 10.0, 100.0]  # x (the end; it starts at self._origin), tok/s, ms
        self._origin = 0.0
        self.begin()

    def set_colors(self, colors: Colors) -> None:
        self.chart.setTheme(
            QChart.ChartTheme.ChartThemeDark if colors.name == "dark" else QChart.ChartTheme.ChartThemeLight
        )
        self.chart.setBackgroundBrush(QColor(colors.base))
        self.chart.setPlotAreaBackgroundVisible(False)
        for axis in (self.axis_x, self.axis_speed, self.axis_itl):
            axis.setLabelsColor(QColor(colors.secondary))
            axis.setTitleBrush(QColor(colors.secondary))
            axis.setGridLineColor(QColor(colors.border))
            axis.setLinePenColor(QColor(colors.border))
        self.chart.setTitleBrush(QColor(colors.text))
        self.chart.legend().setLabelColor(QColor(colors.secondary))
        self.axis_break.set_color(QColor(colors.secondary))
        self.speed.setPen(QPen(QColor(colors.accent), 2))
        itl_pen = QPen(QColor(colors.user_accent), 1.5)
        itl_pen.setStyle(Qt.PenStyle.DashLine)
        self.itl.setPen(itl_pen)
        self._fonts()

    def _fonts(self) -> None:
        """Smaller than the window's text (relative to the system font, so it scales with it); after
        any setTheme(), which resets the chart's fonts."""
        small = QFont(QApplication.font())
        small.setPointSizeF(small.pointSizeF() * 0.8)
        for axis in (self.axis_x, self.axis_speed, self.axis_itl):
            axis.setLabelsFont(small)
            axis.setTitleFont(small)
        self.chart.legend().setFont(small)
        title = QFont(QApplication.font())
        title.setPointSizeF(title.pointSizeF() * 0.9)
        self.chart.setTitleFont(title)

    def _tip(self, point: QPointF, on: bool, text: str) -> None:
        if on:
            QToolTip.showText(QCursor.pos(), text.format(v=point.y(), t=point.x()), self.view)
        else:
            QToolTip.hideText()

    def begin(self) -> None:
        self.speed.clear()
        self.itl.clear()
        self._last = None
        self._ranges = [1.0, 10.0, 100.0]
        # what the points reach, kept here: asking the series for their points makes a Python object
        # per point, and finish() needs only these
        self._speed_end = self._itl_end = 0.0
        self._speed_top: float | None = None
        self._itl_top: float | None = None
        self._start_at(0.0)
        for axis, top in zip((self.axis_x, self.axis_speed, self.axis_itl), self._ranges, strict=True):
            self._set_range(axis, top)

    def _start_at(self, origin: float) -> None:
        """The time axis from `origin` (s since sent: 0, or the first token's time), its title saying so."""
        self._origin = origin
        self.axis_break.show(origin > 0)
        title = QChart.tr("since sent · first token at {s:.2f} s") if origin > 0 else QChart.tr("since sent")
        self.axis_x.setTitleText(title.format(s=origin))

    def first_token(self, ttft_s: float) -> None:
        """The first token came `ttft_s` after sending: the time axis starts there (the decode is
        what the chart is about), a second long until the answer grows past it."""
        self._start_at(ttft_s)
        self._ranges[0] = ttft_s + 1.0
        self._set_range(self.axis_x, self._ranges[0])

    def _set_range(self, axis: QValueAxis, top: float) -> None:
        if axis is self.axis_x:
            set_ticks(axis, self._origin, max(top, self._origin + MIN_SPAN_S), X_STEPS, " s")
        else:
            set_ticks(axis, 0.0, top, Y_STEPS)

    def _grow(self, index: int, axis: QValueAxis, value: float) -> None:
        if value > self._ranges[index]:
            low = self._origin if index == 0 else 0.0
            self._ranges[index] = low + (value - low) * GROWTH
            self._set_range(axis, self._ranges[index])

    def _add_speed(self, x: float, tokens_per_s: float) -> None:
        self.speed.append(x, tokens_per_s)
        self._speed_end = max(self._speed_end, x)
        self._speed_top = tokens_per_s if self._speed_top is None else max(self._speed_top, tokens_per_s)

    def add(self, elapsed_s: float, tokens_per_s: float, tokens: int) -> None:
        """A live point on each line. The axes grow before the points are added: a point added first
        had the chart repainted with it outside the old range, then laid out and repainted again (two
        repaints of the whole chart per rescale instead of one)."""
        itl = None
        if self._last is not None and tokens > self._last[1]:
            itl = (elapsed_s - self._last[0]) * 1000.0 / (tokens - self._last[1])
        self._grow(0, self.axis_x, elapsed_s)
        self._grow(1, self.axis_speed, tokens_per_s)
        if itl is not None:
            self._grow(2, self.axis_itl, itl)
        self._add_speed(elapsed_s, tokens_per_s)
        if itl is not None:
            self.itl.append(elapsed_s, itl)
            self._itl_end = max(self._itl_end, elapsed_s)
            self._itl_top = itl if self._itl_top is None else max(self._itl_top, itl)
            if self.itl.count() > 2 * self.point_limit():
                self._halve_itl()
        if tokens > 0:
            self._last = (elapsed_s, tokens)

    def point_limit(self) -> int:
        """How many points a line needs at the plot's width (one per two pixels)."""
        return max(MIN_POINTS, int(self.chart.plotArea().width() / 2))

    def _halve_itl(self) -> None:
        """Each pair of live ITL points becomes one: the later time, the slower latency."""
        pts = self.itl.points()
        self.itl.replace(
            [QPointF(b.x(), max(a.y(), b.y())) for a, b in zip(pts[0::2], pts[1::2], strict=False)]
            + ([pts[-1]] if len(pts) % 2 else [])
        )

    def finish(self, m: GenerationMetrics, itl_ms: list[float]) -> None:
        """Fit both axes to the whole answer, with the exact per-token latencies. The axes first, then
        the lines (as in `add`: one layout and one repaint of the chart)."""
        points = downsample_itl(itl_ms, m.ttft_s or 0.0, self.point_limit()) if itl_ms else None
        if points:
            self._itl_end = points[-1].x()  # (the times only add up)
            self._itl_top = max(itl_ms)  # (each bucket keeps its largest)
        rate = m.decode_tokens_per_s  # the speed line ends where the answer did, at its final rate
        speed_end = self._speed_end if rate is None else max(self._speed_end, m.e2e_s)
        speed_top = self._speed_top if rate is None else max(rate, self._speed_top or rate)
        self._start_at(m.ttft_s or 0.0)
        self._set_range(self.axis_x, max(m.e2e_s, speed_end, self._itl_end))
        self._set_range(self.axis_speed, _nice_ceiling(speed_top if speed_top is not None else 1.0))
        self._set_range(self.axis_itl, _nice_ceiling(self._itl_top if self._itl_top is not None else 1.0))
        if points:
            self.itl.replace(points)
        if rate is not None:
            self._add_speed(m.e2e_s, rate)
