"""Issue 28 (the new user's pass at 800×600): Models ▸ Model Manager… opened at 980×620 whatever the
screen, so on an 800 px screen its right side (the banner's Dismiss, the Installed table's columns) and
its bottom were off the screen. It now takes its usual size where there is room, the screen's (less a
title bar) where there is not, and stays on the screen."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.qt.window_frame import TITLE_BAR_ALLOWANCE
from ember_chat.app.shell.main_window import MainWindow


def test_the_model_manager_fits_a_small_screen(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    w.models.open_model_manager()
    manager = w.models.manager
    assert manager is not None
    qtbot.waitExposed(manager)
    room = manager.screen().availableGeometry()
    assert room.width() < 980  # (the offscreen platform's screen is 800 px wide: smaller than the Manager was)
    frame = manager.frameGeometry()
    assert room.contains(frame), (room, frame)
    assert manager.height() <= room.height() - TITLE_BAR_ALLOWANCE
    assert manager.width() >= manager.minimumSizeHint().width()
    manager.close()
