"""The benchmark window as a new user first sees it (issue 16, item 19): an empty state where the
charts will be, table headers shown whole before any run, each measured point marked on the plots,
and a memory column that says whose memory it is."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QStyle
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.bench_lab import run_bench
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load


def cut_headers(dialog: object) -> list[str]:
    """Header labels narrower than their text (plus the style's margins on both sides)."""
    header = dialog.table.horizontalHeader()
    margin = 2 * header.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    texts = [dialog.table.horizontalHeaderItem(c).text() for c in range(dialog.table.columnCount())]
    width = header.fontMetrics().horizontalAdvance
    return [t for c, t in enumerate(texts) if header.sectionSize(c) < width(t) + margin]


def test_benchmark_window_before_and_after_its_first_run(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    load(qtbot, w, "tiny.gguf")
    w.models.open_benchmark()
    dialog = w.models.benchmark
    try:
        qtbot.waitExposed(dialog)
        # before a run: the empty state stands where the charts will be, the headers are whole
        assert dialog.empty.isVisible() and not dialog.prefill_view.isVisible()
        assert "No results yet" in dialog.empty.text() and "Run" in dialog.empty.text()
        assert cut_headers(dialog) == []
        header = dialog.table.horizontalHeader()
        assert header.length() <= dialog.table.viewport().width()  # all seven fit at the window's size
        memory = dialog.table.horizontalHeaderItem(6)
        assert "process" in memory.text().lower() and "Ember's own process" in memory.toolTip()
        run_bench(qtbot, dialog, {"tiny.gguf"}, "8,16", 2)
        assert dialog.status.text() == "Done.", dialog.status.text()
        # after: the charts, each measured point marked
        assert dialog.prefill_view.isVisible() and not dialog.empty.isVisible()
        series = dialog.prefill_chart.series() + dialog.decode_chart.series()
        assert series and all(s.pointsVisible() and s.count() == 2 for s in series)
        assert cut_headers(dialog) == []
    finally:
        dialog.close()
