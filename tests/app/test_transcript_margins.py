"""The transcript's text column (issue 16, item 9): on a wide window it is centred by side margins
only; the conversation starts near the top at any width."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.transcript.view import MAX_TEXT_WIDTH, MIN_MARGIN
from tests.helpers.chat_fixtures import seed_long_chat


@pytest.mark.parametrize("width", [1280, 1920, 2560])
def test_the_first_message_starts_near_the_top_and_the_column_is_centred(
    qtbot: QtBot, make_window: Callable[..., MainWindow], width: int
) -> None:
    w = make_window()
    w.resize(width, 900)
    cid = seed_long_chat(w.store, 2)
    w.chats.open_conversation(cid)
    t = w.transcript
    qtbot.waitUntil(lambda: t.viewport().width() > width // 2)  # laid out at the new size
    t.verticalScrollBar().setValue(0)
    doc = t.document()
    first = doc.documentLayout().blockBoundingRect(doc.firstBlock())
    assert first.top() <= MIN_MARGIN + 2  # not pushed down by the side margin
    # the column: at most MAX_TEXT_WIDTH wide, centred in the view
    left = first.left()
    column = doc.textWidth() - 2 * left
    view = t.viewport().width()
    assert column <= MAX_TEXT_WIDTH + 1
    assert abs(left - (view - column) / 2) <= 2
    if view > MAX_TEXT_WIDTH + 2 * MIN_MARGIN + 100:
        assert left > MIN_MARGIN + 50  # a wide window does centre the column
    # the cards are drawn around the column, not the old margins
    image = t.viewport().grab().toImage()
    y = int(t._extent(0)[0]) + 4
    assert image.pixelColor(int(left) - 6, y).name() == w.colors.user_card
    if left > 30:
        assert image.pixelColor(int(left) - 30, y).name() != w.colors.user_card
