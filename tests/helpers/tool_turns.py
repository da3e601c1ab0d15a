"""A window's tool turns: the calculator's key and a call to it, the approval asked, the transcript's text."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.tools import ChatTools, ToolCall
from ember_chat.engine.tools.builtin import BuiltinTools
from ember_chat.engine.tools.registry import ToolRegistry
from ember_chat.engine.tools.session import ChatToolSession
from tests.helpers.tool_script import WaitingTools

WAIT_MS = 20_000


class Sessions:
    """The window's `controller.tool_session_for` as Settings ▸ Tools would make it: one ChatToolSession
    per chat over a real registry (the built-in calculator, and a tool that waits), with the chat's
    stored choices; a chat that chose nothing yet gets `enabled` (as if ticked in the Tools popup)."""

    def __init__(self, w: MainWindow, enabled: set[str], never_ask: frozenset[str] = frozenset(), max_calls: int = 8):
        self.waiting = WaitingTools()
        self.registry = ToolRegistry([BuiltinTools(calculator=True), self.waiting])
        assert self.registry.refresh(5) == []
        self.w, self.enabled, self.never_ask, self.max_calls = w, frozenset(enabled), never_ask, max_calls
        self.sessions: dict[int, ChatToolSession] = {}
        w.controller.tool_session_for = self.session_for

    def session_for(self, conversation_id: int) -> ChatToolSession | None:
        if conversation_id not in self.sessions:
            chat = self.w.store.chat_tools(conversation_id)
            if not chat.enabled:
                chat = ChatTools(self.enabled, chat.always)
                self.w.store.set_chat_tools(conversation_id, chat)
            self.sessions[conversation_id] = ChatToolSession(self.registry, chat, self.never_ask, self.max_calls)
        return self.sessions[conversation_id]


CALC_KEY = "Built-in/calculator"


SUM = ToolCall("call00011", "calculator", {"expression": "2+3*4"})


def text_of(w: MainWindow) -> str:
    w.transcript.finish_rendering()
    return w.transcript.plain_text()


def asking(qtbot: QtBot, w: MainWindow, count: int = 1) -> None:
    qtbot.waitUntil(lambda: text_of(w).count("Waiting for your permission") == count, timeout=WAIT_MS)
