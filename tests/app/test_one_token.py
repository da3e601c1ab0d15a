"""Issue 28, item 15: one token is "1 token", never "1 tokens": an answer's metrics line in the window
(and the command line's, the same words), the side panel's prompt and thinking figures, one old
message left out."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load, send


def test_an_answer_of_one_token_says_1_token(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window(lambda _ref: FakeBackend(script=["Yes."]))
    load(qtbot, w, "tiny.gguf")
    send(qtbot, w, "Is it?")
    text = w.transcript.plain_text()
    assert "· 1 token ·" in text and "1 tokens" not in text
    assert "1 tokens" not in w.side.metrics.why.text()


def test_the_side_panel_says_1_token_and_1_message(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    panel = w.side.metrics
    rec = MetricsRecorder(RunContext("m", None, "CPU", 1, 0, 512, None))
    rec.prefill_started(2048, 2047, rec.t_start_ns)  # a follow-up: all but one token reused
    rec.dropped_messages = 1
    rec.token(rec.t_start_ns + 1_000_000, 1, thinking=True)
    rec.token(rec.t_start_ns + 2_000_000, 1)
    m = rec.finish("stop")
    panel.finish(m, [1.0])
    why = panel.why.text()
    assert "Prompt: 1 token evaluated, 2,047 reused" in why and "1 old message left out" in why, why
    assert panel.thinking.text().startswith("1 token · answer at"), panel.thinking.text()
    assert "1 tokens" not in why + panel.thinking.text()
    assert why.endswith("CPU, 1 thread, 0 GPU layers"), why  # (and one thread)
