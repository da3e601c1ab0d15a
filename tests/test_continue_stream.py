"""Continue streams the rest of an answer right after its text: the metrics line of the part before
("… · stopped") goes while it streams (it sat between the two halves of a sentence), and the whole answer
gets its new line at the end. Real window, a fake endless engine."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.fake_backend import FakeBackend
from tests.test_app import ANSWER_TIMEOUT, load, make_window, paths, send, start_endless_answer

__all__ = ["make_window", "paths"]  # fixtures


def test_the_old_metrics_line_goes_while_the_continuation_streams(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = start_endless_answer(qtbot, make_window)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.controller.stop()
    qtbot.waitUntil(lambda: "· stopped" in w.transcript.plain_text(), timeout=ANSWER_TIMEOUT)
    answer = w.store.thread(w.controller.conversation_id)[-1]
    before = len(w.transcript.plain_text())
    w.transcript.action.emit("continue", answer.id, 0)
    qtbot.waitUntil(lambda: len(w.transcript.plain_text()) > before + 100, timeout=ANSWER_TIMEOUT)
    text = w.transcript.plain_text()
    assert "stopped" not in text and "TTFT" not in text, text[-300:]  # (the line said both)
    assert text.rstrip().endswith(w.controller._stream.text.rstrip()[-20:])  # the continuation is last
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.controller.stop()
    qtbot.waitUntil(lambda: w.transcript.plain_text().count("TTFT") == 1, timeout=ANSWER_TIMEOUT)


def test_continuing_an_answer_that_ends_in_a_code_block_keeps_the_block(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """The code card is a table: removing the metrics line must not take it along."""
    backend = FakeBackend(script=["Here it is:\n\n", "```python\n", "print(1)\n", "```\n"])
    w = make_window(lambda _ref: backend)
    load(qtbot, w)
    send(qtbot, w, "code please")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert "print(1)" in w.transcript.plain_text() and "TTFT" in w.transcript.plain_text()
    backend.script = ["And ", "more ", "text."]
    backend.delay_s = 0.05
    w.transcript.action.emit("continue", answer.id, 0)
    qtbot.waitUntil(lambda: "And" in w.transcript.plain_text(), timeout=ANSWER_TIMEOUT)
    text = w.transcript.plain_text()
    assert "print(1)" in text and "Here it is:" in text and "TTFT" not in text, text[-300:]
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=ANSWER_TIMEOUT)
