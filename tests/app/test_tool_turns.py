"""The window's tool loop: the bridge passes the tools to the engine and the calls back, the controller
asks for consent with a card, runs what the user allows on a worker thread, gives the results back to
the model and shows its continuation; deny, always allow, invalid calls, the cap, Stop, and the cards
shown again when the chat is reopened."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QTextCursor
from pytestqt.qtbot import QtBot

from ember_chat.app.engine_link.bridge import EngineBridge
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.tools import ChatTools, InvalidCall, ToolCall, ToolRequest, ToolSpec
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.tools.config import McpServerConfig
from ember_chat.engine.tools.mcp_client import McpManager
from ember_chat.engine.tools.registry import ToolRegistry
from ember_chat.engine.tools.session import ChatToolSession
from tests.helpers.paths import TESTS
from tests.helpers.tool_script import ToolScriptBackend, Turn
from tests.helpers.tool_turns import CALC_KEY, SUM, WAIT_MS, Sessions, asking, text_of


@pytest.fixture
def window(make_tool_script_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window whose engine follows a tool script: tests/app/conftest.py's make_tool_script_window."""
    return make_tool_script_window


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


# ----- the loop in the real window


WAIT_KEY = "Waiting/wait"


def send(qtbot: QtBot, w: MainWindow, text: str) -> None:
    w.composer.editor.setPlainText(text)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)


def press(qtbot: QtBot, w: MainWindow, label: str) -> None:
    """Reach a card's button from the keyboard (Shift+Tab up from the end of the chat) and press Enter."""
    t = w.transcript
    t.setFocus(Qt.FocusReason.OtherFocusReason)
    end = QTextCursor(t.document())
    end.movePosition(QTextCursor.MoveOperation.End)
    t.setTextCursor(end)
    for _ in range(12):
        qtbot.keyClick(t, Qt.Key.Key_Backtab)
        if t.textCursor().selectedText().strip("\u00a0") == label:
            qtbot.keyClick(t, Qt.Key.Key_Return)
            return
    raise AssertionError(f"no {label!r} button reached from the keyboard")


def below_cards(text: str, words: str) -> bool:
    """`words` are shown below the last tool card (the model's continuation, the cap's sentence)."""
    return text.rfind(words) > text.rfind("  ·  from ") >= 0


def idle(qtbot: QtBot, w: MainWindow) -> None:
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=WAIT_MS)


def test_allow_once_runs_the_call_and_the_model_continues(qtbot: QtBot, window: Callable[..., MainWindow]) -> None:
    backend = ToolScriptBackend([Turn("Let me compute that.", [SUM]), Turn("2+3*4 is 14.")])
    w = window(backend)
    Sessions(w, {CALC_KEY})
    send(qtbot, w, "What is 2+3*4?")
    asking(qtbot, w)
    text = text_of(w)
    assert "\ufffc calculator" in text and "from Built-in" in text and '"expression": "2+3*4"' in text
    assert w.controller.generating and w.composer.button.text() == "Stop"  # the answer is not over
    assert len(backend.requests) == 1  # nothing runs or continues before the user says so
    press(qtbot, w, "Allow once")
    idle(qtbot, w)
    text = text_of(w)
    assert "Done · " in text and "allowed once" in text and "Result\n14\n" in text
    assert below_cards(text, "2+3*4 is 14.")  # the model's continuation
    assert w.composer.button.text() == "Send"
    # the engine got the same tools again, and the call with its result
    assert len(backend.requests) == 2 and backend.tools[0] == backend.tools[1] is not None
    assert [t.name for t in backend.tools[0].tools] == ["calculator"]
    *_, asked, result = backend.requests[1]
    assert asked == ChatMessage("assistant", "Let me compute that.", tool_calls=(SUM,))
    assert result == ChatMessage("tool", "14", tool_call_id=SUM.id)
    # stored: the question, the answer with its call and result, the continuation
    cid = w.controller.conversation_id
    thread = w.store.thread(cid)
    assert [(m.role, m.content) for m in thread] == [
        ("user", "What is 2+3*4?"),
        ("assistant", "Let me compute that."),
        ("assistant", "2+3*4 is 14."),
    ]
    (kept,) = thread[1].tool_results
    assert (kept.content, kept.decision, kept.source, kept.state) == ("14", "once", "Built-in", "done")
    assert kept.duration_ms is not None
    # reopened: the cards come back
    w.chats.new_chat()
    assert "\ufffc calculator" not in text_of(w)
    w.chats.open_conversation(cid)
    again = text_of(w)
    assert "\ufffc calculator" in again and "Result\n14\n" in again and "allowed once" in again
    # a next question gives the model the whole history, calls included
    send(qtbot, w, "Thanks")
    idle(qtbot, w)
    roles = [m.role for m in backend.requests[2]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]


def test_deny_tells_the_model_and_runs_nothing(qtbot: QtBot, window: Callable[..., MainWindow]) -> None:
    backend = ToolScriptBackend([Turn("I will wait.", [ToolCall("call00021", "wait", {})]), Turn("Understood.")])
    w = window(backend)
    sessions = Sessions(w, {CALC_KEY, WAIT_KEY})
    send(qtbot, w, "Do the work")
    asking(qtbot, w)
    assert "from Waiting" in text_of(w)
    press(qtbot, w, "Deny")
    idle(qtbot, w)
    assert not sessions.waiting.started.is_set()
    text = text_of(w)
    assert "Denied" in text and below_cards(text, "Understood.")
    assert backend.requests[1][-1] == ChatMessage("tool", "The user denied this call.", tool_call_id="call00021")


def test_always_allow_runs_the_next_calls_without_asking(qtbot: QtBot, window: Callable[..., MainWindow]) -> None:
    also = ToolCall("call00031", "calculator", {"expression": "7-7"})
    second = ToolCall("call00032", "calculator", {"expression": "10/4"})
    backend = ToolScriptBackend(
        [Turn("First.", [SUM, also]), Turn("14 and 0."), Turn("Second.", [second]), Turn("2.5.")]
    )
    w = window(backend)
    Sessions(w, {CALC_KEY})
    send(qtbot, w, "What is 2+3*4, and 7-7?")
    asking(qtbot, w, 2)
    cid = w.controller.conversation_id
    # meanwhile the user turned another tool on in the Tools popup: "always" does not undo that
    popup_choice = ChatTools(w.store.chat_tools(cid).enabled | {"Built-in/current_datetime"})
    w.store.set_chat_tools(cid, popup_choice)
    press(qtbot, w, "Always allow in this chat")  # (on the last card): the other call of that tool runs too
    idle(qtbot, w)
    assert [m.content for m in backend.requests[1][-2:]] == ["14", "0"]
    stored = w.store.chat_tools(cid)
    assert stored.always == {CALC_KEY} and stored.enabled == popup_choice.enabled  # kept with the chat
    send(qtbot, w, "And 10/4?")
    idle(qtbot, w)
    text = text_of(w)
    assert "Waiting for your permission" not in text and text.count("always allowed in this chat") == 3
    assert "Result\n2.5\n" in text and below_cards(text, "2.5.")


def test_a_tool_turned_off_while_its_card_waits_is_not_offered_again(
    qtbot: QtBot, window: Callable[..., MainWindow]
) -> None:
    """The loop reads the chat's choices at every generation: a tool turned off in the Tools popup
    during a turn of calls is not offered to the model's continuation (nor run unasked after it)."""
    backend = ToolScriptBackend([Turn("Let me compute that.", [SUM]), Turn("It is 14.")])
    w = window(backend)
    Sessions(w, {CALC_KEY})
    send(qtbot, w, "What is 2+3*4?")
    asking(qtbot, w)
    cid = w.controller.conversation_id
    w.store.set_chat_tools(cid, ChatTools())  # turned off in the popup while the card waits
    press(qtbot, w, "Allow once")  # (this call was asked for when it was on: it runs)
    idle(qtbot, w)
    assert "Result\n14\n" in text_of(w)
    assert backend.tools[0] is not None and backend.tools[1] is None  # the continuation has no tools


def test_calls_in_an_answer_cut_by_max_tokens_are_shown_not_run(
    qtbot: QtBot, window: Callable[..., MainWindow]
) -> None:
    """The turn never ended (max tokens): its calls are kept and shown as not run, saying why; none
    asks, runs, or goes on to another generation."""
    backend = ToolScriptBackend([Turn("Let me compute that.", [SUM], reason="length")])
    w = window(backend)
    Sessions(w, {CALC_KEY})
    send(qtbot, w, "What is 2+3*4?")
    idle(qtbot, w)
    text = text_of(w)
    assert "Not run: the answer was cut by max tokens" in text and "Allow once" not in text
    assert len(backend.requests) == 1


def test_an_invalid_call_is_shown_not_run_and_given_back(qtbot: QtBot, window: Callable[..., MainWindow]) -> None:
    bad = InvalidCall(ToolCall("call00041", "calculator", {"expr": "1+1"}), "'expression' is required.")
    backend = ToolScriptBackend([Turn("Computing.", [bad]), Turn("Sorry, I made a mistake.")])
    w = window(backend)
    Sessions(w, {CALC_KEY})
    send(qtbot, w, "1+1?")
    idle(qtbot, w)  # nothing to consent to: the error goes back to the model at once
    text = text_of(w)
    assert "Not run: the call was not valid" in text and "'expression' is required." in text
    assert "Allow once" not in text and below_cards(text, "Sorry, I made a mistake.")
    assert backend.requests[1][-1] == ChatMessage("tool", "Error: 'expression' is required.", tool_call_id=bad.call.id)


def test_the_cap_ends_the_loop_with_its_message(qtbot: QtBot, window: Callable[..., MainWindow]) -> None:
    calls = [ToolCall(f"call0005{i}", "calculator", {"expression": f"{i}+1"}) for i in range(3)]
    backend = ToolScriptBackend([Turn("Two.", calls[:2]), Turn("One more.", calls[2:]), Turn("Never asked for.")])
    w = window(backend)
    Sessions(w, {CALC_KEY}, never_ask=frozenset({CALC_KEY}), max_calls=2)
    notices: list[str] = []
    w.controller.notice.connect(notices.append)
    send(qtbot, w, "Count")
    idle(qtbot, w)
    assert len(backend.requests) == 2  # the third call was over the cap: no third generation
    text = text_of(w)
    assert text.count("not asked") == 2 and "Not run: too many calls in one answer" in text
    limit = "The model asked for more than 2 tool calls in one answer"
    assert below_cards(text, limit) and text.count(limit) == 1 and notices and notices[-1].startswith(limit)


def test_stop_cancels_a_running_call_and_ends_the_loop(qtbot: QtBot, window: Callable[..., MainWindow]) -> None:
    backend = ToolScriptBackend([Turn("Working.", [ToolCall("call00061", "wait", {})]), Turn("Never.")])
    w = window(backend)
    sessions = Sessions(w, {WAIT_KEY})
    send(qtbot, w, "Work")
    asking(qtbot, w)
    press(qtbot, w, "Allow once")
    qtbot.waitUntil(lambda: "Running…" in text_of(w), timeout=WAIT_MS)
    assert sessions.waiting.started.wait(10)
    qtbot.mouseClick(w.composer.button, Qt.MouseButton.LeftButton)  # Stop
    assert not w.controller.generating and w.composer.button.text() == "Send"
    assert sessions.waiting.cancelled.wait(10)  # the tool was told to stop
    assert w.controller.tools.tasks.join(10)
    text = text_of(w)
    assert "Stopped" in text and "Running…" not in text and len(backend.requests) == 1
    (kept,) = w.store.thread(w.controller.conversation_id)[1].tool_results
    assert kept.decision == "cancelled" and kept.is_error


def test_a_call_to_a_tool_the_chat_does_not_offer_is_not_run(qtbot: QtBot, window: Callable[..., MainWindow]) -> None:
    backend = ToolScriptBackend([Turn("Waiting.", [ToolCall("call00071", "wait", {})]), Turn("I cannot wait.")])
    w = window(backend)
    sessions = Sessions(w, {CALC_KEY})  # the waiting tool exists, but is not on in this chat
    send(qtbot, w, "Wait")
    idle(qtbot, w)
    assert not sessions.waiting.started.is_set()
    text = text_of(w)
    assert "Not run" in text and "There is no tool named 'wait' in this chat" in text and "Allow once" not in text
    assert backend.requests[1][-1].role == "tool" and "calculator" in backend.requests[1][-1].content


# ----- a real MCP server (the official SDK, started by the test) behind the window's loop

SERVERS = TESTS / "mcp_servers"


@pytest.fixture
def mcp() -> Iterator[McpManager]:
    manager = McpManager()
    manager.configure(
        [
            McpServerConfig("notes", command=sys.executable, args=(str(SERVERS / "normal.py"),), start_timeout_s=20),
            McpServerConfig("stuck", command=sys.executable, args=(str(SERVERS / "hang.py"),), start_timeout_s=20),
        ]
    )
    yield manager
    manager.close()


def test_an_mcp_call_approved_then_a_hung_one_stopped_without_freezing(
    qtbot: QtBot, window: Callable[..., MainWindow], mcp: McpManager
) -> None:
    add = ToolCall("call00081", "add", {"a": 2, "b": 3})
    hang = ToolCall("call00082", "hang", {})
    backend = ToolScriptBackend([Turn("Adding.", [add]), Turn("2+3 is 5."), Turn("This may take a while.", [hang])])
    w = window(backend)
    registry = ToolRegistry(mcp.servers())
    assert registry.refresh(30) == []  # (both servers started: listing ran off the GUI thread here too)
    sessions: dict[int, ChatToolSession] = {}

    def session_for(cid: int) -> ChatToolSession:
        chat = ChatTools(frozenset({"notes/add", "stuck/hang"}))
        w.store.set_chat_tools(cid, chat)  # (as ticked in the Tools popup: kept with the chat)
        return sessions.setdefault(cid, ChatToolSession(registry, chat, frozenset(), 8))

    w.controller.tool_session_for = session_for
    send(qtbot, w, "What is 2+3?")
    asking(qtbot, w)
    assert "from notes" in text_of(w)
    press(qtbot, w, "Allow once")
    idle(qtbot, w)
    text = text_of(w)
    assert "Result\n5\n" in text and below_cards(text, "2+3 is 5.")
    assert backend.requests[1][-1] == ChatMessage("tool", "5", tool_call_id=add.id)
    # a call that hangs: the window keeps turning while it runs, and Stop ends it
    send(qtbot, w, "Now wait")
    asking(qtbot, w)
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    press(qtbot, w, "Allow once")
    stuck = mcp.server("stuck")
    assert stuck is not None
    qtbot.waitUntil(lambda: "helper pid" in stuck.stderr_text(), timeout=WAIT_MS)  # the tool is in its hang
    qtbot.wait(300)  # (the window's event loop turns while the call hangs: the ticks measure it)
    qtbot.mouseClick(w.composer.button, Qt.MouseButton.LeftButton)  # Stop
    timer.stop()
    assert not w.controller.generating and len(backend.requests) == 3
    assert w.controller.tools.tasks.join(10)  # the worker came back: the cancel reached the hung call
    longest = max(b - a for a, b in itertools.pairwise(ticks))
    print(f"longest stall of the GUI thread while the MCP call hung: {longest * 1000:.1f} ms")
    assert longest < 0.5
    assert "Stopped" in text_of(w)


def test_leaving_a_chat_while_a_card_waits_ends_the_answer(qtbot: QtBot, window: Callable[..., MainWindow]) -> None:
    backend = ToolScriptBackend([Turn("Let me compute that.", [SUM])])
    w = window(backend)
    Sessions(w, {CALC_KEY})
    send(qtbot, w, "What is 2+3*4?")
    asking(qtbot, w)
    cid = w.controller.conversation_id
    w.chats.new_chat()  # another chat: the answer waiting for consent ends first
    assert not w.controller.generating and w.controller.conversation_id != cid
    w.chats.open_conversation(cid)
    text = text_of(w)
    assert "Stopped" in text and "Allow once" not in text and len(backend.requests) == 1
    # the history says so to the model when the chat goes on
    send(qtbot, w, "Never mind")
    idle(qtbot, w)
    *_, asked, result, question = backend.requests[1]
    assert asked.tool_calls == (SUM,) and result.role == "tool" and "stopped" in result.content
    assert question == ChatMessage("user", "Never mind")


def test_regenerating_the_answer_after_the_calls_gives_the_model_their_results(
    qtbot: QtBot, window: Callable[..., MainWindow]
) -> None:
    backend = ToolScriptBackend([Turn("Let me compute that.", [SUM]), Turn("It is 14."), Turn("14, again.")])
    w = window(backend)
    Sessions(w, {CALC_KEY}, never_ask=frozenset({CALC_KEY}))
    send(qtbot, w, "What is 2+3*4?")
    idle(qtbot, w)
    cid = w.controller.conversation_id
    final = w.store.thread(cid)[-1]
    w.controller.regenerate(final.id)  # (the answer's Regenerate action)
    idle(qtbot, w)
    assert backend.requests[2] == backend.requests[1]  # the same history: the call and its result
    assert [m.content for m in w.store.siblings(final.id)] == ["It is 14.", "14, again."]
    assert len(backend.requests) == 3  # the call did not run again


def test_calls_that_cannot_be_saved_are_not_run_and_it_says_why(
    qtbot: QtBot, window: Callable[..., MainWindow]
) -> None:
    backend = ToolScriptBackend([Turn("Let me compute that.", [SUM])])
    w = window(backend)
    Sessions(w, {CALC_KEY}, never_ask=frozenset({CALC_KEY}))
    db, lock = w.store.shared_connection()

    def disk_fails(*_: object) -> None:  # (the call arrives before the answer ends: writes fail from here)
        with lock:
            db.execute("PRAGMA query_only = ON")

    w.bridge.tool_call.connect(disk_fails)
    errors: list[str] = []
    w.controller.error.connect(errors.append)
    send(qtbot, w, "What is 2+3*4?")
    idle(qtbot, w)
    assert any("tool calls" in e and "were not run" in e for e in errors)
    assert len(backend.requests) == 1 and w.controller.tools.tasks.join(5)
    with lock:
        db.execute("PRAGMA query_only = OFF")  # writing works again: nothing typed was lost
    cid = w.controller.conversation_id

    def kept() -> bool:  # the answer's text was kept in memory and is saved by the controller's retry
        thread = w.store.thread(cid)
        return [m.content for m in thread] == ["What is 2+3*4?", "Let me compute that."] and thread[1].complete

    qtbot.waitUntil(kept, timeout=WAIT_MS)
