"""The Tools button by the message box, in the real window: how many tools the chat has on and about how
many tokens their definitions take, a popup of checkboxes grouped by source (built-in, each real MCP
server, one that failed saying why), choices kept per chat in the store (a new chat's go with its first
message), and the chat's tool session the controller asks for."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.tools import ChatTools, ToolCall
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.tools.config import BuiltinToolsConfig, McpServerConfig, ToolsConfig
from tests.app import test_tool_turns as turns
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.tool_script import ToolScriptBackend, Turn
from tests.helpers.tools_window_support import (
    CALCULATOR,
    CLOCK,
    LEFT,
    SERVERS,
    WAIT_MS,
    open_chat,
    open_tools,
    popup_grab,
    stdio_server,
    tokens_of,
    two_chats_with_builtins,
    write_tools,
)
from tests.helpers.window import load, send


def headings(popup: QWidget) -> list[str]:
    """The bold source headings of the popup, in order."""
    return [label.text() for label in popup.findChildren(QLabel) if "font-weight:600; color" in label.styleSheet()]


@popup_grab
def test_each_chat_keeps_its_tools_and_the_button_counts_them_and_their_tokens(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w, a, b = two_chats_with_builtins(qtbot, make_window, paths)
    button = w.tools.button
    assert button.whole_text() == "Tools" and button.isVisible()
    qtbot.mouseClick(button, LEFT)
    popup = button.popup
    assert popup is not None and popup.isVisible() and button.frame.isVisible()
    assert headings(popup) == ["Built-in"]
    assert list(popup.boxes) == [CLOCK, CALCULATOR]
    assert not any(box.isChecked() for box in popup.boxes.values())  # tools are off until chosen
    assert "No tools are on" in popup.summary.text()
    qtbot.mouseClick(popup.boxes[CALCULATOR], LEFT)
    assert button.frame.isVisible()  # several boxes can be ticked in one go
    tokens = tokens_of(w, CALCULATOR)
    assert tokens > 20
    assert button.whole_text() == f"Tools (1) · ~{tokens} tokens"
    assert f"~{tokens} tokens of each prompt" in popup.summary.text()
    assert w.store.chat_tools(a) == ChatTools(frozenset({CALCULATOR}))
    button.frame.close()
    # another chat has its own (none); coming back shows A's again
    open_chat(qtbot, w, b)
    assert button.whole_text() == "Tools"
    assert w.tools.session_for(b) is None
    open_chat(qtbot, w, a)
    assert button.whole_text() == f"Tools (1) · ~{tokens} tokens"
    session = w.tools.session_for(a)
    assert session is not None
    assert [t.name for t in session.request().tools] == ["calculator"]
    assert session.max_calls == 8 and session.never_ask == frozenset()


@popup_grab
def test_a_new_chats_tools_go_with_its_first_message(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tools(paths, ToolsConfig(builtin=BuiltinToolsConfig(datetime=True, calculator=True)))
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    load(qtbot, w, "tiny.gguf")
    qtbot.waitUntil(lambda: w.tools.registry.entry(CLOCK) is not None, timeout=WAIT_MS)
    assert w.controller.conversation_id is None
    popup = w.tools.button.open_popup()
    assert "new chat" in popup.findChildren(QLabel)[0].text()
    popup.boxes[CLOCK].setChecked(True)
    w.tools.button.frame.close()
    assert w.tools.button.whole_text() == f"Tools (1) · ~{tokens_of(w, CLOCK)} tokens"
    send(qtbot, w, "what day is it?")
    cid = w.controller.conversation_id
    assert cid is not None and w.store.chat_tools(cid).enabled == {CLOCK}
    assert w.tools.button.whole_text().startswith("Tools (1)")
    w.chats.new_chat()  # the next new chat starts with the last choice (tools_new_chats has more)
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=WAIT_MS)
    assert w.tools.button.whole_text() == f"Tools (1) · ~{tokens_of(w, CLOCK)} tokens"


@popup_grab
def test_the_popup_groups_tools_by_their_server_and_says_why_one_is_missing(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    broken = McpServerConfig("broken", command=sys.executable, args=("-c", "import sys; sys.exit(3)"))
    servers = (stdio_server("notes", "normal.py"), broken)
    write_tools(paths, ToolsConfig(servers=servers, builtin=BuiltinToolsConfig(datetime=True)))
    w = make_window()
    w.tools.button.open_popup()  # servers with no tools remembered start when the popup opens
    w.tools.button.frame.close()
    qtbot.waitUntil(lambda: not w.tools.listing and bool(w.tools.server_entries("notes")), timeout=WAIT_MS)
    assert w.tools.server_state("broken")[0] == "failed"
    cid = w.store.create_conversation("notes chat").id
    open_chat(qtbot, w, cid)
    popup = w.tools.button.open_popup()
    assert headings(popup) == ["Built-in", "notes", "broken"]
    assert list(popup.boxes) == [CLOCK, "notes/add", "notes/read_note", "notes/fail", "notes/pid"]
    assert popup.boxes["notes/read_note"].text() == "read_note  (read-only)"
    assert popup.boxes["notes/add"].toolTip() == "Add two integers."
    error = w.tools.server_state("broken")[1]
    assert error and any(label.text() == error for label in popup.findChildren(QLabel))
    popup.boxes["notes/add"].setChecked(True)
    popup.boxes["notes/read_note"].setChecked(True)
    tokens = tokens_of(w, "notes/add", "notes/read_note")
    assert w.tools.button.whole_text() == f"Tools (2) · ~{tokens} tokens"
    assert [t.name for t in w.tools.session_for(cid).request().tools] == ["add", "read_note"]
    # Settings from the popup
    qtbot.mouseClick(popup.settings_button, LEFT)
    assert not w.tools.button.frame.isVisible() and w.tools.dialog is not None and w.tools.dialog.isVisible()
    # the server turned off: its tools stay chosen in the chat, but are not offered (and that is said)
    w.tools.set_server_enabled("notes", False)
    assert w.tools.button.whole_text() == "Tools"
    qtbot.waitUntil(lambda: not w.tools.listing, timeout=WAIT_MS)
    assert w.tools.session_for(cid) is None
    assert w.banner.isVisible() and "None of the tools on in this chat is available" in w.banner.text()
    popup = w.tools.button.open_popup()
    assert headings(popup) == ["Built-in", "broken"]
    notes = [label.text() for label in popup.findChildren(QLabel) if "not available now" in label.text()]
    assert notes == [
        "On in this chat but not available now (their server is off, failed or gone): notes/add, notes/read_note."
    ]
    assert w.store.chat_tools(cid).enabled == {"notes/add", "notes/read_note"}


def test_the_button_sits_between_attach_and_send_in_the_tab_order(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    composer, button = w.composer, w.tools.button
    qtbot.waitUntil(lambda: composer.attach_button.nextInFocusChain() is button, timeout=WAIT_MS)
    assert button.nextInFocusChain() is w.dictation.button  # then the voice buttons (issue 33), then Send
    assert w.dictation.button.nextInFocusChain() is w.voice.button
    assert w.voice.button.nextInFocusChain() is composer.button
    assert button.accessibleName() == "Tools for this chat"
    assert composer.attach_button.x() < button.x() < composer.button.x()


@popup_grab
def test_a_pasted_server_two_of_its_tools_on_a_call_approved_and_the_models_answer(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """The issue's "done when", in the window: a server from pasted mcpServers JSON (its tools on once
    added), two of them left on in a chat, the model's call approved on its card, its result and the
    model's answer."""
    call = ToolCall("call00021", "add", {"a": 2, "b": 40}, '{"a": 2, "b": 40}')
    backend = ToolScriptBackend([Turn("Let me add them.", [call]), Turn("2 + 40 = 42.")])
    w = make_window(lambda _ref: backend)
    load(qtbot, w, "tiny.gguf")
    dialog = open_tools(w)
    box = dialog.paste_json()
    pasted = {"mcpServers": {"notes": {"command": sys.executable, "args": [str(SERVERS / "normal.py")]}}}
    box.text.setPlainText(json.dumps(pasted, indent=2))
    qtbot.waitUntil(box.add_button.isEnabled, timeout=WAIT_MS)
    qtbot.mouseClick(box.add_button, LEFT)
    qtbot.waitUntil(lambda: bool(w.tools.server_entries("notes")), timeout=WAIT_MS)
    dialog.close()
    qtbot.mouseClick(w.tools.button, LEFT)
    popup = w.tools.button.popup
    assert popup.all_boxes["notes"].isChecked() and all(box.isChecked() for box in popup.boxes.values())
    qtbot.mouseClick(popup.boxes["notes/fail"], LEFT)  # (the others stay on, one by one)
    qtbot.mouseClick(popup.boxes["notes/pid"], LEFT)
    assert not popup.all_boxes["notes"].isChecked()
    w.tools.button.frame.close()
    assert w.tools.button.whole_text() == f"Tools (2) · ~{tokens_of(w, 'notes/add', 'notes/read_note')} tokens"
    turns.send(qtbot, w, "What is 2 + 40?")
    turns.asking(qtbot, w)
    assert "from notes" in turns.text_of(w) and '"b": 40' in turns.text_of(w)
    assert [t.name for t in backend.tools[0].tools] == ["add", "read_note"]
    turns.press(qtbot, w, "Allow once")
    turns.idle(qtbot, w)
    text = turns.text_of(w)
    assert "Result\n42\n" in text and "allowed once" in text
    assert turns.below_cards(text, "2 + 40 = 42.")
    assert w.store.chat_tools(w.controller.conversation_id).enabled == {"notes/add", "notes/read_note"}


@popup_grab
def test_the_open_popup_shows_a_servers_tools_once_it_has_started(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tools(paths, ToolsConfig(servers=(stdio_server("notes", "normal.py"),)))
    w = make_window()
    qtbot.mouseClick(w.tools.button, LEFT)
    assert w.tools.listing and headings(w.tools.button.popup) == ["notes"]
    assert any(label.text() == "Starting…" for label in w.tools.button.popup.findChildren(QLabel))
    qtbot.waitUntil(lambda: "notes/add" in w.tools.button.popup.boxes, timeout=WAIT_MS)
    assert w.tools.button.frame.isVisible()
    assert not any(label.text() == "Starting…" for label in w.tools.button.popup.findChildren(QLabel))


def test_never_ask_and_the_cap_chosen_in_settings_reach_the_chats_tool_loop(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    """Settings ▸ Tools' "never ask" (a read-only tool) runs its calls without a card; its cap ends a loop."""
    read = ToolCall("call00031", "read_note", {"key": "todo"}, '{"key": "todo"}')
    backend = ToolScriptBackend([Turn("Reading.", [read]), Turn("Again.", [read]), Turn("And again.", [read])])
    write_tools(paths, ToolsConfig(servers=(stdio_server("notes", "normal.py"),)))
    w = make_window(lambda _ref: backend)
    load(qtbot, w, "tiny.gguf")
    dialog = open_tools(w)
    qtbot.waitUntil(lambda: "notes/read_note" in dialog.details.never_ask, timeout=WAIT_MS)
    dialog.details.never_ask["notes/read_note"].setChecked(True)
    dialog.max_calls.setValue(2)
    dialog.close()
    w.tools.choices.set_tool_on("notes/read_note", True)
    turns.send(qtbot, w, "What is on my todo list?")
    turns.idle(qtbot, w)
    text = turns.text_of(w)
    assert "Waiting for your permission" not in text  # never asked
    assert text.count("Result\nwrite tests\n") == 2 and "more than 2 tool calls" in text


@popup_grab
def test_the_popup_works_from_the_keyboard(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tools(paths, ToolsConfig(builtin=BuiltinToolsConfig(datetime=True, calculator=True)))
    w = make_window()
    qtbot.waitUntil(lambda: w.tools.registry.entry(CALCULATOR) is not None, timeout=WAIT_MS)
    button = w.tools.button
    button.setFocus()
    qtbot.keyClick(button, Qt.Key.Key_Space)
    popup = button.popup
    assert button.frame.isVisible() and popup.boxes[CLOCK].hasFocus()
    qtbot.keyClick(popup.boxes[CLOCK], Qt.Key.Key_Tab)
    assert popup.boxes[CALCULATOR].hasFocus()
    qtbot.keyClick(popup.boxes[CALCULATOR], Qt.Key.Key_Space)
    assert button.whole_text().startswith("Tools (1)")
    qtbot.keyClick(popup.boxes[CALCULATOR], Qt.Key.Key_Escape)
    assert not button.frame.isVisible()
    qtbot.waitUntil(button.hasFocus, timeout=WAIT_MS)
