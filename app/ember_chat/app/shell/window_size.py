"""The window's size on first start: the default 1280×800, made to fit the screen's available area
with room left for the title bar (issue 16, item 8: on a 1280×800 screen the status bar was off it);
and a window kept small by a small screen grows back on a bigger one (issue 28, item 4)."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize

from ember_chat.app.qt.window_frame import TITLE_BAR_ALLOWANCE

DEFAULT_SIZE = QSize(1280, 800)


def default_geometry(available: QRect, minimum: QSize) -> QRect:
    """The first window: DEFAULT_SIZE or smaller, centred in `available` (the screen less its panels),
    leaving the title bar's height; never below the window's minimum size."""
    width = max(minimum.width(), min(DEFAULT_SIZE.width(), available.width()))
    height = max(minimum.height(), min(DEFAULT_SIZE.height(), available.height() - TITLE_BAR_ALLOWANCE))
    rect = QRect(0, 0, width, height)
    rect.moveCenter(available.center())
    rect.moveTop(max(available.top() + TITLE_BAR_ALLOWANCE, rect.top()))
    rect.moveLeft(max(available.left(), rect.left()))
    return rect


def grows_back(saved: QSize, saved_screen: QSize | None, default: QRect) -> bool:
    """Whether a window restored at `saved` opens at `default` (this screen's) instead: it is smaller
    than the default, and its size was the screen's doing (it filled the screen it was saved on: an
    800×600 screen, a laptop's before the monitor), not the user's. `saved_screen` is None for a state
    kept before Ember saved the screen: then any room this screen has beyond the window counts."""
    if saved.width() >= default.width() and saved.height() >= default.height():
        return False
    if saved_screen is None:
        return True
    slack = 16  # (a frame, a dock's edge)
    filled = saved.width() + slack >= saved_screen.width() or (
        saved.height() + TITLE_BAR_ALLOWANCE + slack >= saved_screen.height()
    )
    return filled and (saved_screen.width() < default.width() or saved_screen.height() < default.height())


def default_splitter_sizes(width: int, side_minimum: int) -> list[int]:
    """The chat list, the centre and the side panel on first start: the centre gets what the two
    columns leave, and they give up width on a narrow window (200 and 290 px at 1280, where the
    centre's model bar then shows a usual model's status and badge whole)."""
    chats = max(170, min(200, width * 16 // 100))
    side = max(side_minimum, min(290, width * 23 // 100))
    return [chats, max(0, width - chats - side), side]
