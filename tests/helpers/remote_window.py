"""A window's chat with a remote connection whose stream breaks half-way."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.connections import Connection, remote_model_name
from ember_chat.engine.storage.conversations import Message
from tests.helpers.sse_server import FakeOpenAI, chunk
from tests.helpers.window import load, send


def cut_answer(qtbot: QtBot, w: MainWindow, fake: FakeOpenAI) -> Message:
    """Chat with `fake` as the connection "flaky", whose stream breaks after "The first half"; the answer."""
    fake.stream([chunk("", role="assistant"), chunk("The first"), chunk(" half")], cut_after=3)
    w.connections.save(Connection("flaky", fake.base_url, "test-model"))
    load(qtbot, w, remote_model_name("flaky", "test-model"))
    send(qtbot, w, "Tell me a story")
    return w.store.thread(w.controller.conversation_id)[-1]
