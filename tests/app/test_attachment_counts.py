"""A file's chip says the tokens it takes in the prompt — the same number the answer's "Read:" line says
later (they disagreed: the chip counted the bare text, the prompt holds it in a block that names it).
Real window, the real llama.cpp runtime on the tiny model, a real text file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.attachments_window import FACT, send, settle
from tests.helpers.fake_backend import FakeBackend


@pytest.fixture
def make_window(make_loaded_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window with the tiny model loaded: tests/app/conftest.py's make_loaded_window."""
    return make_loaded_window


def test_the_chip_and_the_answers_plan_say_the_same_tokens(
    qtbot: QtBot, make_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    w = make_window(None)
    notes = tmp_path / "notes.txt"
    notes.write_text(FACT + "\n" + "The keeper rings the bell at dusk.\n" * 3, encoding="utf-8")
    w.composer.attach_paths([notes])
    settle(qtbot, w)
    (item,) = w.composer.attachments.items
    chip_tokens = item.state.tokens
    assert chip_tokens and not item.state.estimated
    assert f"{chip_tokens:,} tokens" in item.chip.details.text()
    w.side.params.max_tokens.setValue(2)
    send(qtbot, w, "What is the cat called?")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    plan = w.attach.store.plan_of(answer.id)
    assert plan is not None and [(i.name, i.mode) for i in plan.items] == [("notes.txt", "whole")]
    assert plan.items[0].tokens == chip_tokens
