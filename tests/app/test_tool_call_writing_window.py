"""A tool call being written, in the real window (issue 28, item 5): with "call a tool first", the answer
card stayed blank while the model wrote a long call, and Stop left an empty answer ("358 tokens ·
stopped", content "") with the call gone. Now the card says "Writing a call to calculator…" with the
arguments so far, updated at the transcript's batching rate, and a call stopped while written is kept and
shown as not run, also after the chat is opened again. The real runtime and built-in calculator; a scripted
model that writes the calculator's expression without end (" the the the …")."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.tools import ChatTools, InvalidCall
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.tools.config import BuiltinToolsConfig, ToolsConfig
from tests.helpers.gguf_factory import Script, TinySpec, write_tiny_model
from tests.helpers.tools_window_support import CALCULATOR, WAIT_MS, open_chat, write_tools
from tests.helpers.window import ANSWER_TIMEOUT, load, set_max_tokens


def text_of(w: MainWindow) -> str:
    return w.transcript.plain_text()


def test_a_call_being_written_shows_and_stop_keeps_it_as_not_run(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tools(paths, ToolsConfig(builtin=BuiltinToolsConfig(calculator=True)))
    write_tiny_model(paths.default_models_dir / "the.gguf", TinySpec(script=Script(start=("▁the",))))
    w = make_window()
    qtbot.waitUntil(lambda: w.tools.registry.entry(CALCULATOR) is not None, timeout=WAIT_MS)
    load(qtbot, w, "the.gguf")
    w.side.params.temperature.setValue(0.0)
    set_max_tokens(w, 100_000)
    cid = w.store.create_conversation("Sums").id
    w.store.set_chat_tools(cid, ChatTools(frozenset({CALCULATOR}), require_call=True))  # "call a tool first"
    w.chats.reload_conversations()
    open_chat(qtbot, w, cid)
    deliveries: list[float] = []
    w.controller.call_streamed.connect(lambda *_: deliveries.append(time.perf_counter()))
    w.composer.editor.setPlainText("What is 2+2?")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    # its arguments, as they grow (slowly where llama.cpp's threads share a busy CPU)
    qtbot.waitUntil(lambda: text_of(w).count(" the") >= 8, timeout=ANSWER_TIMEOUT)
    text = text_of(w)
    assert "Writing a call to calculator…" in text and '"expression"' in text, text[-300:]
    qtbot.mouseClick(w.composer.button, Qt.MouseButton.LeftButton)  # Stop
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=ANSWER_TIMEOUT)
    # at the transcript's batching rate (≈30 a second at most), not once per token
    assert len(deliveries) <= 30 * (deliveries[-1] - deliveries[0]) + 5
    answer = w.store.thread(cid)[-1]
    assert answer.role == "assistant" and answer.content == "" and answer.metrics["stop_reason"] == "cancelled"
    assert answer.metrics["output_tokens"] > len(deliveries)
    (call,) = answer.tool_calls  # kept: not run
    assert isinstance(call, InvalidCall) and call.call.name == "calculator" and " the the" in call.call.raw
    (result,) = answer.tool_results
    assert result.decision == "cancelled" and result.is_error
    w.transcript.finish_rendering()
    text = text_of(w)
    assert "Writing a call" not in text and "calculator" in text and "Not run: stopped while it was written" in text
    assert "Allow once" not in text
    w.chats.new_chat()
    open_chat(qtbot, w, cid)  # opened again: the card is there
    w.transcript.finish_rendering()
    text = text_of(w)
    assert "calculator" in text and "Not run: stopped while it was written" in text and " the the" in text
