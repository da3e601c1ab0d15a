"""Issue 28 (the new user's pass at 1024×640): the side panel's Metrics tab at a short window. Its parts
(the live figures with their rows wrapped under their labels, the prompt's line, the chart, the
session's figures) need more height than 640 px leaves, and the layout squeezed each below its least
size: the context row's number was cut by its own bar ("412 / 4,096 tokens" half hidden) and the chart's
axis labels shrank to "…". The tab now scrolls instead: every part keeps the height it needs, and the
chart's least height leaves room for its plot and axis labels."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QApplication, QLabel, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load, send


def squeezed(root: QWidget) -> list[str]:
    """The visible labels under `root` drawn less tall than their text needs."""
    return [
        f"{label.text()!r}: {label.height()} < {label.minimumSizeHint().height()}"
        for label in root.findChildren(QLabel)
        if label.isVisible() and label.text() and label.height() < label.minimumSizeHint().height()
    ]


def test_a_short_window_scrolls_the_metrics_instead_of_squeezing_them(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=12))
    w.resize(1024, 640)
    if not w.side.isVisible():  # (the offscreen screen is small: the panel stepped aside)
        w.toggle_side_panel()
    load(qtbot, w, "tiny.gguf")
    send(qtbot, w, "How long is the context?")
    QApplication.processEvents()
    metrics = w.side.metrics
    assert metrics.why.isVisible() and "tokens" in metrics.context.text()
    assert w.side.isVisible() and w.height() == 640
    meter = metrics.context
    assert meter.label.geometry().bottom() < meter.bar.geometry().top(), "the bar covers the context's number"
    assert not squeezed(metrics), squeezed(metrics)
    chart = metrics.chart.view
    assert chart.height() >= chart.minimumHeight()
    # the chart at its least height still has a plot (below about 4 lines of text QtCharts elides the
    # x axis's labels and its title to "…": it did at 170 px)
    assert metrics.chart.chart.plotArea().height() >= 4 * chart.fontMetrics().height()
