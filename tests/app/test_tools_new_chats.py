"""Tools without double set-up (issue 28's gaps), in the real window with a real MCP server (the tests'
own, written with the official SDK): a server added in Settings ▸ Tools has its tools on in the chat
shown and in new chats (each call still asks first); a per-server "All" switch in the Tools popup; a new
chat starts with the user's last choices. Nothing an imported chat brings turns a tool on for other
chats, grants consent or switches a server's "All" on."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments.imported import AttachmentImporter
from ember_chat.engine.core.tools import ChatTools, ToolCall
from ember_chat.engine.storage.importing import import_chats
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.tools.config import ToolsConfig
from tests.app import test_tool_turns as turns
from tests.helpers.import_window import HOSTILE
from tests.helpers.tool_script import ToolScriptBackend, Turn
from tests.helpers.tools_window_support import (
    SERVERS,
    WAIT_MS,
    open_chat,
    open_tools,
    popup_grab,
    read_tools,
    stdio_server,
    write_tools,
)
from tests.helpers.window import load

LEFT = Qt.MouseButton.LeftButton
NOTES = ("notes/add", "notes/read_note", "notes/fail", "notes/pid")
ADD = ToolCall("call00041", "add", {"a": 2, "b": 40}, '{"a": 2, "b": 40}')


def asks_first(w: MainWindow, cid: int, call: ToolCall = ADD) -> bool:
    """Whether this call in the chat's next answer is offered and waits for a consent card."""
    session = w.tools.choices.session_for(cid)
    assert session is not None
    (pending,) = session.triage([call])
    assert pending.result is None, pending.result  # (offered: not refused as a tool the chat lacks)
    return pending.needs_consent


def on_in_popup(w: MainWindow) -> set[str]:
    qtbot_popup = w.tools.button.open_popup()
    on = {key for key, box in qtbot_popup.boxes.items() if box.isChecked()}
    w.tools.button.frame.close()
    return on


@popup_grab
def test_a_server_added_in_settings_is_on_in_the_chat_shown_and_in_new_chats_and_each_call_asks(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    backend = ToolScriptBackend([Turn("Let me add them.", [ADD]), Turn("2 + 40 = 42.")])
    w = make_window(lambda _ref: backend)
    load(qtbot, w, "tiny.gguf")
    older = w.store.create_conversation("Older").id
    shown = w.store.create_conversation("Shown").id
    w.chats.reload_conversations()
    open_chat(qtbot, w, shown)
    dialog = open_tools(w)
    box = dialog.paste_json()
    pasted = {"mcpServers": {"notes": {"command": sys.executable, "args": [str(SERVERS / "normal.py")]}}}
    box.text.setPlainText(json.dumps(pasted))
    qtbot.waitUntil(box.add_button.isEnabled, timeout=WAIT_MS)
    qtbot.mouseClick(box.add_button, LEFT)
    qtbot.waitUntil(lambda: bool(w.tools.server_entries("notes")), timeout=WAIT_MS)
    dialog.close()
    # on in the chat shown, without a tick per tool: the server's "All" switch is on
    assert w.tools.button.whole_text().startswith("Tools (4) · ~")
    assert w.store.chat_tools(shown) == ChatTools(servers=frozenset({"notes"}))
    qtbot.mouseClick(w.tools.button, LEFT)
    popup = w.tools.button.popup
    assert popup.all_boxes["notes"].isChecked() and popup.all_boxes["notes"].text() == "All"
    assert popup.all_boxes["notes"].accessibleName() == "All tools from notes"
    assert {k for k, b in popup.boxes.items() if b.isChecked()} == set(NOTES)
    w.tools.button.frame.close()
    assert asks_first(w, shown)  # consent per call stays
    # an older chat keeps its own choices (none); the kept default for new chats has the server
    open_chat(qtbot, w, older)
    assert w.tools.button.whole_text() == "Tools" and w.tools.session_for(older) is None
    qtbot.waitUntil(lambda: read_tools(paths).new_chats == ChatTools(servers=frozenset({"notes"})), timeout=WAIT_MS)
    # a new chat: on from its first message, and the model's call waits for the card
    w.chats.new_chat()
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=WAIT_MS)
    assert w.tools.button.whole_text().startswith("Tools (4)")
    turns.send(qtbot, w, "What is 2 + 40?")
    turns.asking(qtbot, w)
    cid = w.controller.conversation_id
    assert w.store.chat_tools(cid) == ChatTools(servers=frozenset({"notes"}))
    assert [t.name for t in backend.tools[0].tools] == ["add", "read_note", "fail", "pid"]
    turns.press(qtbot, w, "Allow once")
    turns.idle(qtbot, w)
    assert "Result\n42\n" in turns.text_of(w)


@popup_grab
def test_the_all_switch_and_new_chats_take_the_last_choice(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tools(paths, ToolsConfig(servers=(stdio_server("notes", "normal.py"),)))
    w = make_window()
    a = w.store.create_conversation("A").id
    w.chats.reload_conversations()
    open_chat(qtbot, w, a)
    w.tools.button.open_popup()  # (a server with no tools remembered starts when the popup opens)
    qtbot.waitUntil(lambda: "notes/add" in w.tools.button.popup.boxes, timeout=WAIT_MS)
    popup = w.tools.button.popup
    assert not popup.all_boxes["notes"].isChecked() and not any(b.isChecked() for b in popup.boxes.values())
    qtbot.mouseClick(popup.all_boxes["notes"], LEFT)  # all of them, in one click
    assert all(b.isChecked() for b in popup.boxes.values())
    assert w.store.chat_tools(a).servers == {"notes"} and w.tools.button.whole_text().startswith("Tools (4)")
    qtbot.mouseClick(popup.boxes["notes/fail"], LEFT)  # one off: the others stay on, the switch goes off
    assert not popup.all_boxes["notes"].isChecked()
    assert w.store.chat_tools(a) == ChatTools(frozenset({"notes/add", "notes/read_note", "notes/pid"}))
    w.tools.button.frame.close()
    # a new chat starts with that last choice; its own changes are the next last choice
    w.chats.new_chat()
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=WAIT_MS)
    assert on_in_popup(w) == {"notes/add", "notes/read_note", "notes/pid"}
    popup = w.tools.button.open_popup()
    qtbot.mouseClick(popup.boxes["notes/pid"], LEFT)
    w.tools.button.frame.close()
    open_chat(qtbot, w, a)  # (A keeps its own)
    assert on_in_popup(w) == {"notes/add", "notes/read_note", "notes/pid"}
    qtbot.waitUntil(
        lambda: read_tools(paths).new_chats == ChatTools(frozenset({"notes/add", "notes/read_note"})), timeout=WAIT_MS
    )
    popup = w.tools.button.open_popup()
    qtbot.mouseClick(popup.all_boxes["notes"], LEFT)  # all on in A, then all off
    qtbot.mouseClick(popup.all_boxes["notes"], LEFT)
    assert not any(b.isChecked() for b in popup.boxes.values()) and w.store.chat_tools(a) == ChatTools()
    w.tools.button.frame.close()
    w.chats.new_chat()
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=WAIT_MS)
    assert on_in_popup(w) == set() and w.tools.button.whole_text() == "Tools"


@popup_grab
def test_an_imported_chat_turns_nothing_on_grants_nothing_and_is_not_the_last_choice(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tools(paths, ToolsConfig(servers=(stdio_server("notes", "normal.py"),)))
    w = make_window()
    w.tools.button.open_popup()
    w.tools.button.frame.close()
    qtbot.waitUntil(lambda: bool(w.tools.server_entries("notes")), timeout=WAIT_MS)
    import_chats(
        w.store, HOSTILE / "chat_export_turns_all_tools_on.json", attachments=AttachmentImporter(w.attach.store)
    )
    w.chats.reload_conversations()
    imported = next(c.id for c in w.store.conversations() if c.title == "Everything on from a file")
    chat = w.store.chat_tools(imported)
    assert chat.servers == frozenset() and chat.always == frozenset()  # no "All", no consent from a file
    open_chat(qtbot, w, imported)
    assert on_in_popup(w) == {"notes/fail", "notes/pid"}  # (the file's ticks, each asking first)
    assert asks_first(w, imported, ToolCall("call00042", "pid", {}, "{}"))
    # the user's own change there is remembered for new chats, not the file's ticks
    popup = w.tools.button.open_popup()
    qtbot.mouseClick(popup.boxes["notes/add"], LEFT)
    w.tools.button.frame.close()
    w.chats.new_chat()
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=WAIT_MS)
    assert on_in_popup(w) == {"notes/add"}
    assert read_tools(paths).new_chats.servers == frozenset()


@popup_grab
def test_a_chat_imported_while_a_new_chat_is_shown_does_not_take_its_tools(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths, tmp_path
) -> None:
    """Review of issue 28: the new chat's tools went to "the chat this new chat's first message created",
    told by its date (made since the new chat showed) and having no tools and at most one message — so a
    one-message chat imported meanwhile with a date in the future, then opened, took the user's new-chat
    tools (servers' All switches included). Only the chat the window's own message creates takes them."""
    write_tools(paths, ToolsConfig(servers=(stdio_server("notes", "normal.py"),)))
    w = make_window()
    a = w.store.create_conversation("A").id
    w.chats.reload_conversations()
    open_chat(qtbot, w, a)
    w.tools.button.open_popup()  # (a server with no tools remembered starts when the popup opens)
    qtbot.waitUntil(lambda: "notes/add" in w.tools.button.popup.boxes, timeout=WAIT_MS)
    qtbot.mouseClick(w.tools.button.popup.all_boxes["notes"], LEFT)  # the user's last choice: every notes tool
    w.tools.button.frame.close()
    w.chats.new_chat()
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=WAIT_MS)

    doc = {
        "format": "ember-chat",
        "version": 1,
        "title": "From the future",
        "created": 4102444800.0,  # 2100: after the new chat showed
        "messages": [{"id": 1, "parent": None, "role": "user", "content": "hello"}],
    }
    path = tmp_path / "future.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    import_chats(w.store, path, attachments=AttachmentImporter(w.attach.store))
    w.chats.reload_conversations()
    imported = next(c.id for c in w.store.conversations() if c.title == "From the future")
    open_chat(qtbot, w, imported)
    assert w.store.chat_tools(imported) == ChatTools()  # nothing of the new chat's choice
    assert on_in_popup(w) == set()
