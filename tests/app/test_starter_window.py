"""The chat starter in the real window: a new user's first question to it gets a sensible answer, saved
in the real SQLite chat store (the picker and the Model Manager saying which starter is which:
test_model_names)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.sentences import sentences
from tests.helpers.window import LOAD_TIMEOUT, send, set_max_tokens

CHAT_LABEL = "SmolLM2 135M (chat starter)"  # (one name everywhere: test_model_names)


@pytest.mark.slow
def test_a_new_users_first_answer_makes_sense(
    qtbot: QtBot, make_window: Callable[..., MainWindow], chat_starter_model: Path
) -> None:
    """The welcome panel's first button, then the issue's question at temperature 0: several sentences,
    none repeated, in the window and in the chat database."""
    w = make_window()
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        w.welcome.starter.click()
    assert w.model_picker.currentText() == CHAT_LABEL
    w.side.params.temperature.setValue(0.0)
    set_max_tokens(w, 160)
    send(qtbot, w, "Explain photosynthesis in simple words.")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    said = sentences(answer.content)
    assert answer.role == "assistant" and len(said) >= 2, answer.content
    assert len(set(said)) == len(said), answer.content  # no sentence said twice
    assert re.search(r"photosynthesis|light|plant", answer.content, re.I), answer.content
    assert said[0][:40] in w.transcript.plain_text().lower()
