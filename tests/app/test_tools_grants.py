"""A chat's "always allow" grants in the Tools popup of the real window: each tool the chat runs without
asking is listed with a Revoke button; Revoke takes the grant back (kept with the chat: its next call
asks again) and the popup stays open without it. A chat imported from a file brings none."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments.imported import AttachmentImporter
from ember_chat.engine.core.tools import ChatTools, ToolCall
from ember_chat.engine.storage.importing import import_chats
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.import_window import HOSTILE
from tests.helpers.tools_window_support import (
    CALCULATOR,
    CLOCK,
    LEFT,
    WAIT_MS,
    open_chat,
    popup_grab,
    two_chats_with_builtins,
)


def asks_first(w: MainWindow, cid: int) -> bool:
    """Whether a calculator call in this chat's next answer waits for a consent card."""
    session = w.tools.choices.session_for(cid)
    assert session is not None
    (pending,) = session.triage([ToolCall("call00001", "calculator", {"expression": "1+1"}, '{"expression":"1+1"}')])
    return pending.needs_consent


@popup_grab
def test_always_allowed_tools_are_listed_in_the_popup_and_revoked_there(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w, a, b = two_chats_with_builtins(qtbot, make_window, paths)
    # as "Always allow" on a consent card keeps it (tool_turns._allow_always)
    w.store.set_chat_tools(a, ChatTools(frozenset({CALCULATOR, CLOCK}), frozenset({CALCULATOR}), False))
    assert not asks_first(w, a)
    qtbot.mouseClick(w.tools.button, LEFT)
    popup = w.tools.button.popup
    assert popup is not None and list(popup.revoke_buttons) == [CALCULATOR]
    revoke = popup.revoke_buttons[CALCULATOR]
    assert revoke.isVisible() and revoke.text() == "Revoke"
    assert revoke.accessibleName() == "Revoke always allowing calculator (Built-in)"
    texts = [label.text() for label in popup.findChildren(QLabel) if label.isVisible()]
    assert "calculator (Built-in)" in texts and any(t.startswith("Always allowed in this chat") for t in texts)

    qtbot.mouseClick(revoke, LEFT)
    assert w.store.chat_tools(a) == ChatTools(frozenset({CALCULATOR, CLOCK}), frozenset(), False)  # still on
    assert asks_first(w, a)
    popup = w.tools.button.popup
    assert popup is not None and popup.revoke_buttons == {} and w.tools.button.frame.isVisible()  # filled again
    qtbot.waitUntil(popup.isVisible, timeout=WAIT_MS)  # (a widget put in a shown frame shows at the next tick)
    assert not any(label.text().startswith("Always allowed") for label in popup.findChildren(QLabel))
    assert popup.boxes[CALCULATOR].isChecked() and popup.boxes[CLOCK].isChecked()

    w.tools.button.frame.close()
    open_chat(qtbot, w, b)  # another chat: its own (none)
    qtbot.mouseClick(w.tools.button, LEFT)
    assert w.tools.button.popup is not None and w.tools.button.popup.revoke_buttons == {}


@popup_grab
def test_a_chat_imported_with_grants_in_its_file_shows_none_and_asks(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w, _a, _b = two_chats_with_builtins(qtbot, make_window, paths)
    import_chats(w.store, HOSTILE / "chat_export_grants_consent.json", attachments=AttachmentImporter(w.attach.store))
    w.chats.reload_conversations()
    imported = next(c.id for c in w.store.conversations() if c.title == "Look at my notes")
    open_chat(qtbot, w, imported)
    assert asks_first(w, imported)
    qtbot.mouseClick(w.tools.button, LEFT)
    popup = w.tools.button.popup
    assert popup is not None and popup.revoke_buttons == {} and popup.boxes[CALCULATOR].isChecked()
