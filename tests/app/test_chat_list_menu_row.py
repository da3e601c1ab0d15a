"""Issue 28, item 15: the row of the chat list right-clicked is marked while its menu is open (a ring
in the accent colour): the menu acts on that row alone when it is not in the selection, and nothing
showed which row that was; in both themes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.chat_list import _click, _right_click, _two_chats, menu_grab
from tests.helpers.transcript import accent_pixels

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def ring_pixels(w: MainWindow, cid: int) -> int:
    """Accent-coloured pixels on the chat's row."""
    lst = w.conversations.list
    QApplication.processEvents()
    row = lst.visualRect(w.conversations.index_of(cid))
    image = lst.viewport().grab(row).toImage()
    return accent_pixels(image, lst.palette().color(QPalette.ColorRole.Accent))


@menu_grab
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_right_clicked_row_is_marked_while_its_menu_is_open(
    qtbot: QtBot, make_window: Callable[..., MainWindow], theme: str
) -> None:
    w = make_window()
    w.set_theme(theme)
    a, b = _two_chats(w)
    _click(qtbot, w, a)
    assert ring_pixels(w, b) == 0
    selected_look = ring_pixels(w, a)  # (the selection's own colour)
    _right_click(qtbot, w, b)
    menu = w.chats.chat_menu
    assert menu is not None and menu.isVisible()
    assert w.conversations.selected_ids() == [a]  # (the open chat stays selected: the menu acts on B)
    assert ring_pixels(w, b) >= 2 * w.conversations.list.visualRect(w.conversations.index_of(b)).width()
    assert ring_pixels(w, a) == selected_look
    menu.close()
    qtbot.waitUntil(lambda: ring_pixels(w, b) == 0, timeout=5_000)
