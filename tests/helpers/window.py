"""Driving the real window as a user does: load a model, send a message with Enter and wait for the answer,
set the token limit, start an answer that never ends; and what a test reads off the window."""

from __future__ import annotations

import math
from collections.abc import Callable

from PySide6.QtCharts import QValueAxis
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.fake_backend import FakeBackend

LOAD_TIMEOUT = 60_000
ANSWER_TIMEOUT = 120_000


def load(qtbot: QtBot, w: MainWindow, name: str = "tiny.gguf", expect: str = "ready") -> None:
    with qtbot.waitSignal(
        w.model_state_changed, check_params_cb=lambda s: s in ("ready", "none"), timeout=LOAD_TIMEOUT
    ):
        w.models.load_model(name)
    assert w.controller.model_ready == (expect == "ready")


def send(qtbot: QtBot, w: MainWindow, text: str) -> None:
    """Type into the composer and press Enter, then wait for the answer to finish."""
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.composer.editor.setPlainText(text)
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    if w.transcript.rendering:  # the Markdown rendering of the answer completes in time slices
        with qtbot.waitSignal(w.transcript.rendered, timeout=ANSWER_TIMEOUT):
            pass


def set_max_tokens(w: MainWindow, n: int) -> None:
    w.side.params.max_tokens.setValue(n)


def start_endless_answer(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> MainWindow:
    """A window whose engine answers without end (a fake, a token every 2 ms), its model loaded and no
    token limit to speak of, that has sent "tell me everything" with Enter: returns once the answer streams."""
    w = make_window(lambda _ref: FakeBackend(n_tokens=100_000, delay_s=0.002))
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 100_000)
    w.composer.editor.setPlainText("tell me everything")
    with qtbot.waitSignal(w.controller.streamed, timeout=ANSWER_TIMEOUT):
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    return w


def view_action(w: MainWindow, text: str) -> QAction:
    view = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    return next(a for a in view.actions() if a.text().replace("&", "") == text)


def axis_labels(axis: QValueAxis) -> list[str]:
    """The labels Qt Charts draws on `axis`, from the axis's own ticks and printf label format."""
    low, high, fmt = axis.min(), axis.max(), axis.labelFormat()
    if axis.tickType() == QValueAxis.TickType.TicksDynamic:
        step = axis.tickInterval()
        k = math.ceil((low - axis.tickAnchor()) / step - 1e-9)
        values = []
        while axis.tickAnchor() + k * step <= high + step * 1e-9:
            values.append(axis.tickAnchor() + k * step)
            k += 1
    else:
        n = axis.tickCount()
        values = [low + i * (high - low) / (n - 1) for i in range(n)]
    return [fmt % v for v in values]
