"""Issue 28, from a new user's pass over the tools in the real window: the Tools popup keeps its place
above its button after a Revoke in it, one tool is "1 tool on", and the Tools button gives way to the
message box in a narrow window (its count stays, the whole sentence in its tooltip)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import QSize
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.tools.choices import BOX_ROOM
from ember_chat.engine.core.tools import ChatTools
from ember_chat.engine.storage.paths import AppPaths
from tests.app import test_tool_turns as turns
from tests.helpers.tool_script import ToolScriptBackend, Turn
from tests.helpers.tool_turns import CALC_KEY, SUM, Sessions, asking, text_of
from tests.helpers.tools_window_support import (
    CALCULATOR,
    CLOCK,
    LEFT,
    WAIT_MS,
    assert_placed,
    assert_rows_whole,
    popup_grab,
    two_chats_with_builtins,
)


@pytest.fixture
def window(make_tool_script_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window whose engine follows a tool script: tests/app/conftest.py's make_tool_script_window."""
    return make_tool_script_window


@popup_grab
def test_the_popup_stays_above_its_button_after_a_revoke(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w, a, _b = two_chats_with_builtins(qtbot, make_window, paths)
    w.store.set_chat_tools(a, ChatTools(frozenset({CALCULATOR, CLOCK}), frozenset({CALCULATOR, CLOCK}), False))
    button = w.tools.button
    qtbot.mouseClick(button, LEFT)
    assert_placed(w, button)
    for key in (CALCULATOR, CLOCK):  # the last one revoked takes the grants' rows away: the popup is shorter
        before = button.frame.geometry()
        qtbot.mouseClick(button.popup.revoke_buttons[key], LEFT)
        qtbot.waitUntil(lambda: button.popup is not None and button.popup.isVisible(), timeout=WAIT_MS)
        QApplication.processEvents()
        assert_placed(w, button)  # (it grew down over its button: the old popup's least height held the frame)
        assert_rows_whole(button)
        after = button.frame.geometry()
        assert after.bottom() == before.bottom() and after.height() < before.height(), (before, after)
    button.frame.close()


@popup_grab
def test_one_tool_on_is_singular_in_the_popup_and_the_buttons_tooltip(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w, _a, _b = two_chats_with_builtins(qtbot, make_window, paths)
    button = w.tools.button
    qtbot.mouseClick(button, LEFT)
    qtbot.mouseClick(button.popup.boxes[CALCULATOR], LEFT)
    summary = button.popup.summary.text()
    assert summary.startswith("1 tool on: its definition takes ~"), summary
    assert button.toolTip().startswith("1 tool on in this chat; its definition takes about"), button.toolTip()
    qtbot.mouseClick(button.popup.boxes[CLOCK], LEFT)
    assert button.popup.summary.text().startswith("2 tools on: their definitions take ~")
    assert button.toolTip().startswith("2 tools on in this chat; their definitions take about")
    assert "(s)" not in button.popup.summary.text() + button.toolTip()
    button.frame.close()


def show_at(qtbot: QtBot, w: MainWindow, size: QSize) -> None:
    w.setMinimumSize(size)  # (the offscreen screen is smaller than 1280×800)
    w.setMaximumSize(size)
    w.resize(size)
    qtbot.waitUntil(lambda: w.size() == size)
    QApplication.processEvents()


def test_the_tools_button_gives_way_to_the_message_box_in_a_narrow_window(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w, a, _b = two_chats_with_builtins(qtbot, make_window, paths)
    w.store.set_chat_tools(a, ChatTools(frozenset({CALCULATOR, CLOCK}), frozenset(), True))
    w.tools.choices.update_button()
    button, editor = w.tools.button, w.composer.editor
    show_at(qtbot, w, QSize(1024, 640))
    assert w.side.isVisible()
    # the count alone; the tokens and "must call" in its tooltip (and for a screen reader)
    assert button.text() == "Tools (2)", button.text()
    assert "about" in button.toolTip() and "must call" in button.toolTip(), button.toolTip()
    assert button.accessibleDescription() == button.toolTip()
    assert button.width() < button.full_width()
    assert editor.width() >= 380, editor.width()  # (318 px beside the whole text)
    show_at(qtbot, w, QSize(1280, 800))
    assert button.text().startswith("Tools (2) · ~") and button.text().endswith("must call"), button.text()
    assert editor.width() >= BOX_ROOM, editor.width()


def test_an_answer_stopped_at_its_consent_card_says_stopped_not_called_tools(
    qtbot: QtBot, window: Callable[..., MainWindow]
) -> None:
    """Stop while a call waits for permission: nothing ran, so the answer's metrics line says "stopped"
    (it said "called tools"), in the window and as kept (the chat opened again)."""
    backend = ToolScriptBackend([Turn("Let me compute that.", [SUM]), Turn("Never.")])
    w = window(backend)
    Sessions(w, {CALC_KEY})
    turns.send(qtbot, w, "What is 2+3*4?")
    asking(qtbot, w)
    qtbot.mouseClick(w.composer.button, LEFT)  # Stop
    assert not w.controller.generating
    cid = w.controller.conversation_id
    answer = w.store.thread(cid)[-1]
    (result,) = answer.tool_results
    assert result.decision == "cancelled" and len(backend.requests) == 1  # (not run)
    assert answer.metrics["stop_reason"] == "cancelled", answer.metrics["stop_reason"]
    for _shown in range(2):
        line = text_of(w).splitlines()[-1]
        assert "· stopped" in line and "called tools" not in line, line
        w.chats.new_chat()
        w.chats.open_conversation(cid)
