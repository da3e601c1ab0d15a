"""An answer's stored metrics may come from a chat file someone else wrote: figures of the wrong type
(`"ttft_s": "soon"`) or missing ones made drawing the message raise (TypeError/ValueError on the GUI thread).
They are drawn without a metrics line; Ember's own metrics keep theirs."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.metrics import GenerationMetrics
from tests.helpers.import_window import imported_and_opened
from tests.helpers.paths import TESTS
from tests.helpers.window import load, send

HOSTILE = TESTS / "hostile"


def test_an_imported_chat_with_damaged_metrics_opens_without_their_line(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    imported_and_opened(qtbot, w, HOSTILE / "chat_export_bad_metrics.json")
    text = w.transcript.toPlainText()
    assert "Only those that make sense." in text and "Half its figures." in text and "TTFT" not in text


def test_ember_s_own_metrics_read_back_whole(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    send(qtbot, w, "hello")
    stored = w.store.thread(w.controller.conversation_id)[-1].metrics
    assert GenerationMetrics.from_stored(stored) == GenerationMetrics.from_dict(stored)
    assert "TTFT" in w.transcript.toPlainText()
