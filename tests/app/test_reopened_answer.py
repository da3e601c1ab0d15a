"""A chat opened again — after another chat, or after Ember restarted — shows its last answer in the side
panel as right after it was made: its figures (time to first token, output tokens, the why line, the
context used) and, in a project's chat, Why this answer — the project, with its instructions and the
passages the answer was given; a chat with no answer yet shows none. Real window, real index, real chat
database; a fake engine answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.projects_window import project_chat
from tests.helpers.window import send

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def _said(w: MainWindow) -> dict[str, object]:
    m = w.side.metrics
    return {
        "ttft": m.ttft.text(),
        "output": m.output.text(),
        "why": m.why.text() if not m.why.isHidden() else None,
        "context": m.context.text(),
        "project": m.project_why.title() if not m.project_why.isHidden() else None,
        "instructions": m.project_why.instructions.text(),
        "sources": m.project_why.sources.text(),
    }


def test_a_project_chat_reopened_after_a_restart_shows_its_last_answer_and_why(
    qtbot: QtBot, make_loaded_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    w = make_loaded_window(FakeBackend(script=["The Tagus [1]."]))
    project_chat(qtbot, w, docs)
    send(qtbot, w, "Which river is the longest of Iberia?")
    cid = w.controller.conversation_id
    after_answer = _said(w)
    assert after_answer["project"] == "Why this answer — 🌊 Rivers" and "rivers.md" in str(after_answer["sources"])
    assert after_answer["why"] and after_answer["ttft"] != "—"

    w.chats.new_chat()  # another chat: nothing of the answer
    assert w.side.metrics.project_why.isHidden() and w.side.metrics.ttft.text() == "—"
    w.chats.open_conversation(cid)  # opened again: as right after it
    assert _said(w) == after_answer

    w.close()  # Ember quits, and starts again
    assert w.join_background(30)
    again = make_loaded_window(FakeBackend(script=["unused"]), load=False)
    assert again.controller.conversation_id == cid  # (the chat open at the quit, opened at the start)
    assert _said(again) == after_answer
    again.chats.new_chat()
    again.chats.open_conversation(cid)  # and by a click on it
    assert _said(again) == after_answer


def test_a_chat_without_an_answer_shows_none_when_opened(
    qtbot: QtBot, make_loaded_window: Callable[..., MainWindow]
) -> None:
    w = make_loaded_window(FakeBackend(script=["Hello."]))
    send(qtbot, w, "hi")
    answered = w.controller.conversation_id
    empty = w.store.create_conversation("Empty")
    w.chats.reload_conversations()
    w.chats.open_conversation(empty.id)
    m = w.side.metrics
    assert m.ttft.text() == "—" and m.why.isHidden() and m.project_why.isHidden()
    assert m.context.text() == "no answer yet"
    w.chats.open_conversation(answered)
    assert m.ttft.text() != "—" and not m.why.isHidden() and m.project_why.isHidden()
