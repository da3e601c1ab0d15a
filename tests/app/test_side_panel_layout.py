"""Issue 16, item 10: the side panel at its default width. Row labels and values are shown whole, the
context bar says nothing false before the first answer and never wraps, widths do not jump when a
model loads, no lone "—" under Current answer, "Current answer" starts over in another chat, and the
chart takes the spare height."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QApplication, QFormLayout, QLabel, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.main import build_window
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.shell.window_size import default_splitter_sizes
from ember_chat.app.side_panel.panel import CHART_MAX_HEIGHT
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.events import Event, PromptReady
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import axis_labels

FIRST_TOKEN_S = 1.2  # a slow prompt: the session's TTFT percentiles are four-digit milliseconds


class SlowFirstToken(FakeBackend):
    """Takes FIRST_TOKEN_S to its first token (a long prompt on a slow machine), then streams (at 300
    tokens/s in the window below: a tenth of a second for its 30)."""

    def _run(self, params: SamplingParams) -> Iterator[Event]:
        for event in super()._run(params):
            yield event
            if isinstance(event, PromptReady):
                time.sleep(FIRST_TOKEN_S)  # the engine thread's prompt evaluation


# Debian's default font and the one CI's image adds: DejaVu Sans is about a tenth wider, and the suite once
# failed on a fresh machine with only DejaVu (issue 27, item 12). .ci/run installs both.
FONTS = ("DejaVu Sans", "Noto Sans")


@pytest.fixture(params=FONTS)
def system_font(request: pytest.FixtureRequest) -> Iterator[str]:
    family = request.param
    if family not in QFontDatabase.families():
        pytest.skip(f"the font {family} is not installed (Debian: fonts-dejavu-core, fonts-noto-core)")
    before = QApplication.font()
    QApplication.setFont(QFont(family, 9))
    yield family
    QApplication.setFont(before)


@pytest.fixture
def window(qtbot: QtBot, tmp_path: Path, tiny_model: Path, system_font: str) -> Iterator[MainWindow]:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    paths.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, paths.default_models_dir / "tiny.gguf")
    w = build_window(paths, backend_factory=lambda _ref: SlowFirstToken(n_tokens=30, rate=300))
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.models_listed, timeout=60_000):
        pass
    # the narrowest window that shows the panel (on the 800 px offscreen screen it hides by itself), with
    # the first layout's column widths: the panel at its least
    w.resize(w.side_fit.collapse_width(), w.height())
    qtbot.waitUntil(w.side.isVisible, timeout=5_000)
    w.splitter.setSizes(default_splitter_sizes(w.width(), w.side.minimumSizeHint().width()))
    QApplication.processEvents()
    yield w
    w.close()
    assert w.join_background(30)
    w.store.close()


def _load(qtbot: QtBot, w: MainWindow) -> None:
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=60_000):
        w.models.load_model("tiny.gguf")


def _send(qtbot: QtBot, w: MainWindow, text: str) -> None:
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=60_000):
        w.controller.send(text)
    QApplication.processEvents()


def _rows(form: QFormLayout) -> list[tuple[QWidget, QWidget]]:
    out = []
    for row in range(form.rowCount()):
        if not form.isRowVisible(row):  # (a row shown only for some answers: "Speculative")
            continue
        label = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
        field = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
        if label is not None and field is not None:
            out.append((label.widget(), field.widget()))
    return out


def _shown_whole(widget: QWidget) -> bool:
    if isinstance(widget, QLabel) and widget.wordWrap():
        return widget.height() >= widget.heightForWidth(widget.width())
    return widget.width() >= widget.sizeHint().width() and widget.height() >= widget.minimumSizeHint().height()


def test_before_the_first_answer_the_panel_says_nothing_false(window: MainWindow) -> None:
    panel = window.side.metrics
    assert window.side.width() == window.splitter.sizes()[2]  # the default width
    assert "/ 1 tokens" not in panel.context.text()  # no made-up context size
    assert not (panel.why.isVisible() and panel.why.text().strip() == "—")  # no lone dash
    # the chart takes the spare height: nothing but a margin below the session box
    session_bottom = panel.session_box.geometry().bottom()
    assert panel.height() - session_bottom <= 2 * panel.layout().contentsMargins().bottom()
    assert panel.chart.view.height() > panel.chart.view.minimumSizeHint().height()


def test_on_a_tall_screen_the_chart_stays_a_chart(qtbot: QtBot, window: MainWindow) -> None:
    """At 1920x1080 the chart stops growing: the figures stay together, the rest is empty below."""
    window.resize(1920, 1080)
    panel = window.side.metrics
    qtbot.waitUntil(lambda: panel.height() > 900)
    assert panel.chart.view.height() <= CHART_MAX_HEIGHT
    assert panel.session_box.geometry().top() - panel.chart.view.geometry().bottom() <= 2 * panel.layout().spacing() + 2


def test_at_the_default_width_rows_are_whole_and_widths_hold(qtbot: QtBot, window: MainWindow) -> None:
    panel = window.side.metrics
    sizes = window.splitter.sizes()
    _load(qtbot, window)
    _send(qtbot, window, "first")
    _send(qtbot, window, "second")
    assert window.splitter.sizes() == sizes  # no jump when the model loaded or answered
    assert panel.session_ttft.text().split(".")[0].isdigit() and len(panel.session_ttft.text().split(".")[0]) == 4
    for form in (panel.live_form, panel.session_form):
        for label, field in _rows(form):
            assert label.isVisible() and _shown_whole(label), label.text()
            assert field.isVisible() and _shown_whole(field), field.accessibleName()
    bar = panel.context
    used = window.store.thread(window.controller.conversation_id)[-1].metrics["context_used"]
    assert bar.text() == f"{used} / 1,000,000 tokens"  # the answer's context, in grouped digits
    assert bar.fontMetrics().horizontalAdvance(bar.text()) <= bar.contentsRect().width() - 8  # one line


def test_current_answer_starts_over_in_another_chat(qtbot: QtBot, window: MainWindow) -> None:
    panel = window.side.metrics
    _load(qtbot, window)
    _send(qtbot, window, "in chat A")
    first = window.controller.conversation_id
    assert panel.output.text() == "30" and panel.why.isVisible()
    said_in_a = [w.text() for w in (panel.ttft, panel.decode, panel.prefill, panel.output, panel.why, panel.context)]
    window.chats.new_chat()
    qtbot.waitUntil(lambda: window.controller.conversation_id is None)
    assert panel.output.text() == "—" and panel.ttft.text() == "—" and not panel.why.isVisible()
    assert "30" not in panel.context.text() and panel.chart.speed.count() == 0
    _send(qtbot, window, "in chat B")
    assert panel.output.text() == "30"
    session = (panel.session_ttft.text(), panel.session_itl.text())
    window.chats.open_conversation(first)
    qtbot.waitUntil(lambda: window.controller.conversation_id == first)
    # chat A's last answer, as it was right after it (its saved metrics), not chat B's
    assert [w.text() for w in (panel.ttft, panel.decode, panel.prefill, panel.output, panel.why, panel.context)] == (
        said_in_a
    )
    assert panel.why.isVisible()
    assert (panel.session_ttft.text(), panel.session_itl.text()) == session  # (the session's: an answer shown again
    assert session[0] != "—"  # is not one more)


def test_a_long_time_to_first_token_leaves_the_decode_readable(qtbot: QtBot, window: MainWindow) -> None:
    """Issue 28, item 15: with FIRST_TOKEN_S before the first token and the 30 tokens after it in a few
    milliseconds, the chart's time axis ran from 0 and the decode was a sliver at its right edge. The
    axis starts at the first token: the decode's lines span the plot, the labels stay times since the
    message was sent, and the axis's title says where it starts."""
    panel = window.side.metrics
    _load(qtbot, window)
    _send(qtbot, window, "a long prompt")
    metrics = window.store.thread(window.controller.conversation_id)[-1].metrics
    ttft, e2e = metrics["ttft_s"], metrics["e2e_s"]
    assert ttft >= FIRST_TOKEN_S and e2e - ttft < 0.2 * ttft
    chart, plot = panel.chart, panel.chart.chart.plotArea()

    def x_at(t: float) -> float:
        return chart.chart.mapToPosition(QPointF(t, 0), chart.speed).x()

    assert x_at(e2e) - x_at(ttft) >= 0.9 * plot.width()  # the decode, from first token to last, across the plot
    xs = [chart.chart.mapToPosition(p, series).x() for series in (chart.speed, chart.itl) for p in series.points()]
    assert xs and min(xs) >= plot.left() - 0.5 and max(xs) <= plot.right() + 0.5  # its lines, all of them
    axis = chart.axis_x
    assert axis.min() == pytest.approx(ttft) and f"first token at {ttft:.2f} s" in axis.titleText()
    labels = axis_labels(axis)
    assert len(labels) >= 2 and all(ttft <= float(label.removesuffix(" s")) for label in labels)


def test_a_long_project_name_never_widens_the_panel(qtbot: QtBot, window: MainWindow) -> None:
    """Why this answer's title names the project: a title never wraps, so a 300-character name made the
    metrics panel 1,878 px at its narrowest. The name is shortened with "…", the whole of it on hover."""
    narrowest = window.side.minimumSizeHint().width()
    name = "A project about the rivers of Iberia and their long histories " * 5
    project = ProjectStore(window.store).create(name.strip(), icon="🌊")
    why = window.side.metrics.project_why
    window.side.metrics.show_project(project, None)
    QApplication.processEvents()
    assert not why.isHidden()
    assert why.title().startswith("Why this answer — 🌊 A project") and why.title().endswith("…")
    assert name.strip() in why.toolTip()
    assert window.side.minimumSizeHint().width() <= narrowest  # (no wider than before it was shown)
    short = ProjectStore(window.store).create("Rivers")
    window.side.metrics.show_project(short, None)
    assert why.title() == "Why this answer — Rivers" and why.toolTip() == ""
