"""The window's tool loop: the bridge passes the tools to the engine and the calls back, the controller
asks for consent with a card, runs what the user allows on a worker thread, gives the results back to
the model and shows its continuation; deny, always allow, invalid calls, the cap, Stop, and the cards
shown again when the chat is reopened."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.qt.bridge import EngineBridge
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolRequest, ToolSpec
from ember_chat.engine.inference.service import EngineService
from tests.tool_script import ToolScriptBackend, Turn

WAIT_MS = 20_000
CALC = ToolSpec("calculator", "Evaluate an arithmetic expression.", {"type": "object", "properties": {}})
ADD = ToolCall("call00001", "calculator", {"expression": "2+3"}, '{"expression": "2+3"}')


@pytest.fixture
def bridge(qtbot: QtBot) -> Iterator[tuple[EngineBridge, ToolScriptBackend]]:
    backend = ToolScriptBackend([Turn("Let me compute.", [ADD, InvalidCall(ADD, "bad")])])
    b = EngineBridge(EngineService(lambda _ref: backend))
    with qtbot.waitSignal(b.loaded, timeout=WAIT_MS):
        b.load(LoadConfig(Path("scripted.gguf")), alias="scripted")
    yield b, backend
    b.close()


def test_the_bridge_passes_tools_in_and_calls_out(qtbot: QtBot, bridge: tuple[EngineBridge, ToolScriptBackend]) -> None:
    b, backend = bridge
    calls: list[tuple[int, int, object]] = []
    b.tool_call.connect(lambda rid, index, call: calls.append((rid, index, call)))
    request = ToolRequest((CALC,))
    with qtbot.waitSignal(b.finished, timeout=WAIT_MS) as done:
        rid = b.generate([ChatMessage("user", "2+3?")], SamplingParams(max_tokens=50), tools=request)
    assert backend.tools == [request]
    rid_done, reason, text = done.args[:3]
    assert (rid_done, reason, text) == (rid, "tool_calls", "Let me compute.")
    assert calls == [(rid, 0, ADD), (rid, 1, InvalidCall(ADD, "bad"))]  # on the GUI thread, before finished
