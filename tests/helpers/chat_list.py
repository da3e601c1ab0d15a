"""Clicks, right-clicks and context menus on the window's chat list, and a data folder's chats."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow

# a menu pops up: the offscreen platform cannot grab the keyboard for it (a real display does)
menu_grab = pytest.mark.qt_log_ignore("This plugin does not support grabbing the keyboard")
BLOCKED_MS = 5000  # a menu or dialog open this long was run with exec(): it would stop the test


def _two_chats(w: MainWindow) -> tuple[int, int]:
    """Chat A (older) and chat B (newer, listed first), each with one question."""
    ids = []
    for title in ("Chat A", "Chat B"):
        conv = w.store.create_conversation(title)
        w.store.add_message(conv.id, "user", f"question in {title}")
        ids.append(conv.id)
    w.chats.reload_conversations()
    return ids[0], ids[1]


def _click(qtbot: QtBot, w: MainWindow, cid: int) -> None:
    lst = w.conversations.list
    lst.scrollTo(w.conversations.index_of(cid))
    centre = lst.visualRect(w.conversations.index_of(cid)).center()
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    qtbot.waitUntil(lambda: w.controller.conversation_id == cid, timeout=5000)


def _right_click(qtbot: QtBot, w: MainWindow, cid: int) -> None:
    """What a right click does: a press, then the context menu event the platform sends."""
    lst = w.conversations.list
    centre = lst.visualRect(w.conversations.index_of(cid)).center()
    qtbot.mousePress(lst.viewport(), Qt.MouseButton.RightButton, pos=centre)
    event = QContextMenuEvent(QContextMenuEvent.Reason.Mouse, centre, lst.viewport().mapToGlobal(centre))
    QApplication.sendEvent(lst.viewport(), event)
    qtbot.mouseRelease(lst.viewport(), Qt.MouseButton.RightButton, pos=centre)


def _menu_action(w: MainWindow, text: str) -> None:
    menu = w.chats.chat_menu
    assert menu is not None and menu.isVisible()
    action = next(a for a in menu.actions() if a.text() == text)
    action.trigger()
    menu.close()


def _chats(w: MainWindow, titles: list[str]) -> list[int]:
    """Chats made oldest first (so listed in the reverse order), each with one question."""
    ids = []
    for title in titles:
        conv = w.store.create_conversation(title)
        w.store.add_message(conv.id, "user", f"question in {title}")
        ids.append(conv.id)
    w.chats.reload_conversations()
    return ids
