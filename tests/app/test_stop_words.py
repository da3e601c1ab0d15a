"""What the user reads about how an answer ended and what went wrong is said in words (issue 16, item
7): "max tokens reached" instead of "length", "stopped" instead of "cancelled" in the transcript's
metrics line and the command line, and network failures without exception class names such as
"(gaierror)" or "(RemoteProtocolError)". The API keeps the OpenAI words (finish_reason "length")."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.errors import HubOffline
from ember_chat.engine.models.hub import HubClient
from tests.helpers.cli import cli
from tests.helpers.remote_window import cut_answer
from tests.helpers.sse_server import FakeOpenAI
from tests.helpers.window import ANSWER_TIMEOUT, load, send, set_max_tokens, start_endless_answer

# an exception class name as Python spells them: gaierror, ConnectError, RemoteProtocolError, OSError…
CLASS_NAME = re.compile(r"\b(gaierror|herror|timeout|[A-Z][a-z]+(?:[A-Z][a-z]*)*(?:Error|Exception|Timeout))\b")


def test_max_tokens_and_stop_are_said_in_words(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    set_max_tokens(w, 4)
    w.side.params.temperature.setValue(0)
    send(qtbot, w, "Hello there")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.metrics["stop_reason"] == "length"  # what is stored (and sent over the API) is unchanged
    footer = w.transcript.plain_text()
    assert "4 tokens · max tokens reached" in footer and "· length" not in footer


def test_a_stopped_answer_says_stopped(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = start_endless_answer(qtbot, make_window)
    with qtbot.waitSignal(w.controller.generating_changed, timeout=ANSWER_TIMEOUT):
        qtbot.mouseClick(w.composer.button, Qt.MouseButton.LeftButton)
    if w.transcript.rendering:
        with qtbot.waitSignal(w.transcript.rendered, timeout=ANSWER_TIMEOUT):
            pass
    assert w.store.thread(w.controller.conversation_id)[-1].metrics["stop_reason"] == "cancelled"
    footer = w.transcript.plain_text()
    assert "· stopped" in footer and "cancelled" not in footer


def test_the_command_line_says_max_tokens_reached(tiny_model: Path) -> None:
    out = cli("run", "--model", str(tiny_model), "--prompt", "hello", "--temperature", "0",
              "--max-tokens", "3", "--ctx", "512", "--threads", "1")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "3 tokens · max tokens reached" in out.stderr and "length" not in out.stderr


def test_a_cut_stream_is_said_in_words(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    with FakeOpenAI() as fake:
        w = make_window()
        cut_answer(qtbot, w, fake)
        banner = w.banner.text()
        assert "flaky" in banner and "connection" in banner
        assert not CLASS_NAME.search(banner), banner
        assert "RemoteProtocolError" not in w.transcript.plain_text()


@pytest.mark.parametrize("endpoint", ["http://ember-test.invalid", "http://127.0.0.1:9"])
def test_hub_offline_is_said_in_words(endpoint: str) -> None:
    """An unknown host (DNS) and a refused port: the Model Manager shows this text."""
    with pytest.raises(HubOffline) as info:
        HubClient(endpoint).search("tiny")
    text = str(info.value)
    assert "cannot reach" in text and not CLASS_NAME.search(text), text
    assert ("could not be found" in text) if "invalid" in endpoint else ("refused" in text)


def test_every_stop_reason_has_words_in_the_engine_and_the_window(qtbot: QtBot) -> None:
    """A new stop reason (tool_calls) never shows as its code word in a metrics line."""
    from ember_chat.app.engine_link.wording import window_wording
    from ember_chat.engine.core.states import StopReason
    from ember_chat.engine.inference.wording import REASON_WORDS

    window = window_wording().reasons
    for reason in StopReason:
        assert reason in REASON_WORDS and str(reason) in window, reason
    assert REASON_WORDS[StopReason.TOOL_CALLS] == "called tools" == window["tool_calls"]
