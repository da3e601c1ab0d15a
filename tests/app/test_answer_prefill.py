"""While a long prompt is read (a big attachment), the answer's card says so (issue 28, gaps: "prefill
progress in the answer card, not only in the side panel"): the card stayed blank for the seconds the
prompt took, the progress only in the side panel's Time to first token. Now it says "Reading your
message… 45%" — the same progress — until the first token replaces it; an answer stopped while the
prompt is read keeps no trace of it. The real window; the tests' fake engine, which reports the
prompt's progress and waits where the test holds it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.events import Event, PrefillProgress
from tests.helpers.attachments_window import settle
from tests.helpers.fake_backend import FakeBackend


@pytest.fixture
def make_window(make_loaded_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window with the tiny model loaded: tests/app/conftest.py's make_loaded_window."""
    return make_loaded_window


WAIT_MS = 30_000
ANSWER = ("Herons ", "nest ", "together.")
HOLD_S = 30  # the most the fake engine waits for the test (a failing test never hangs the run)


class SlowPrompt(FakeBackend):
    """Reads its prompt in two chunks, 45 % then 100 %, waiting for `go` in between, then answers."""

    def __init__(self) -> None:
        super().__init__(script=list(ANSWER))
        self.go = threading.Event()

    def _run(self, params: SamplingParams) -> Iterator[Event]:
        events = super()._run(params)
        yield next(events)  # PromptReady
        yield PrefillProgress(450, 1000, time.perf_counter_ns())
        self.go.wait(HOLD_S)
        if not self._stop.is_set():
            yield PrefillProgress(1000, 1000, time.perf_counter_ns())
        yield from events

    def request_stop(self) -> None:
        super().request_stop()
        self.go.set()


def ask(qtbot: QtBot, w: MainWindow, text: str) -> None:
    w.composer.editor.setPlainText(text)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)


def test_the_answer_card_says_the_prompt_is_read_until_the_first_token(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    fake = SlowPrompt()
    first_token = threading.Event()
    fake.on_token = lambda i: first_token.wait(HOLD_S) if i == 0 else None  # (held after the first token)
    w = make_window(fake)
    report = tmp_path / "report.txt"
    report.write_text("The committee met and read the budget aloud.\n" * 400, encoding="utf-8")
    w.composer.attach_paths([report])
    settle(qtbot, w)
    ask(qtbot, w, "What did the committee do?")
    try:
        qtbot.waitUntil(lambda: "Reading your message… 45%" in w.transcript.plain_text(), timeout=WAIT_MS)
        assert "prompt 45 %" in w.side.metrics.ttft.text()  # (the side panel's, the same progress)
        fake.go.set()
        qtbot.waitUntil(lambda: ANSWER[0].strip() in w.transcript.plain_text(), timeout=WAIT_MS)
        text = w.transcript.plain_text()
        assert "Reading your message" not in text  # the first token replaced it
        assert text.rstrip().endswith(ANSWER[0].strip())
    finally:
        fake.go.set()
        first_token.set()
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=WAIT_MS):
        pass
    assert "Reading your message" not in w.transcript.plain_text()


def test_an_answer_stopped_while_its_prompt_is_read_leaves_no_progress_behind(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow]
) -> None:
    fake = SlowPrompt()
    w = make_window(fake)
    ask(qtbot, w, "Tell me about herons.")
    try:
        qtbot.waitUntil(lambda: "Reading your message… 45%" in w.transcript.plain_text(), timeout=WAIT_MS)
        with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=WAIT_MS):
            qtbot.keyClick(w.composer.editor, Qt.Key.Key_Escape)  # Stop
    finally:
        fake.go.set()
    if w.transcript.rendering:
        with qtbot.waitSignal(w.transcript.rendered, timeout=WAIT_MS):
            pass
    assert "Reading your message" not in w.transcript.plain_text()
