"""Issue 28, item 12: Tab in the transcript walks the message actions forward, as the README says, and
leaves for the message box after the last (it went straight to the message box; only Shift+Tab walked
them); the action the keyboard is on has a clear ring: two pixels in the theme's accent colour, in both
themes (it was a faint one-pixel dotted square in the text colour)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.accessibility import _activate, _focused_link
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.transcript import accent_pixels
from tests.helpers.window import load, send, set_max_tokens


def chat_with_one_answer(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> tuple[MainWindow, int, int]:
    # the fake engine's answer always runs into the limit (Continue is one of the actions); the tiny random
    # model's could end by itself within 4 tokens, and then the 10th Tab left for the message box
    w = make_window(lambda _ref: FakeBackend(n_tokens=100))
    load(qtbot, w)
    set_max_tokens(w, 4)
    send(qtbot, w, "keyboard only")
    t = w.transcript
    qtbot.waitUntil(lambda: not (t.rendering or t.backfilling), timeout=10_000)
    _activate(qtbot, w)
    question, answer = w.store.thread(w.controller.conversation_id)
    return w, question.id, answer.id


def forward(question: int, answer: int) -> list[str]:
    return [
        f"ember:copy/{question}",
        f"ember:edit/{question}",
        f"ember:compare/{question}",
        f"ember:delete/{question}",
        f"ember:copy/{answer}",
        f"ember:regenerate/{answer}",
        f"ember:speak/{answer}",  # (read aloud: issue 33)
        f"ember:compare/{answer}",
        f"ember:delete/{answer}",
        f"ember:continue/{answer}",  # (the answer stopped at the max-tokens limit)
    ]


def test_tab_walks_the_message_actions_forward_then_leaves_for_the_message_box(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w, question, answer = chat_with_one_answer(qtbot, make_window)
    t = w.transcript
    w.focus_pane("transcript")  # View ▸ Go to ▸ Transcript (Alt+2)
    assert QApplication.focusWidget() is t
    hrefs = []
    for _ in range(10):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        assert QApplication.focusWidget() is t
        hrefs.append(_focused_link(t))
    assert hrefs == forward(question, answer)
    qtbot.keyClick(t, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is w.composer.editor


def test_tab_from_the_model_bar_enters_the_transcript_at_its_first_action(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w, question, answer = chat_with_one_answer(qtbot, make_window)
    t = w.transcript
    w.model_bar.unload.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.keyClick(w.model_bar.unload, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is t
    qtbot.keyClick(t, Qt.Key.Key_Tab)
    assert _focused_link(t) == f"ember:copy/{question}"
    # and Shift+Tab from the message box still walks up from the newest message
    w.composer.editor.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Backtab)
    assert QApplication.focusWidget() is t
    qtbot.keyClick(t, Qt.Key.Key_Backtab)
    assert _focused_link(t) == f"ember:continue/{answer}"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_action_the_keyboard_is_on_has_a_two_pixel_accent_ring(
    qtbot: QtBot, make_window: Callable[..., MainWindow], theme: str
) -> None:
    w, _question, answer = chat_with_one_answer(qtbot, make_window)
    w.set_theme(theme)
    t = w.transcript
    accent = t.palette().color(QPalette.ColorRole.Accent)
    w.focus_pane("transcript")
    QApplication.processEvents()
    before = accent_pixels(t.viewport().grab().toImage(), accent)
    qtbot.keyClick(t, Qt.Key.Key_Backtab)  # (the newest message's last action)
    assert _focused_link(t) == f"ember:continue/{answer}"
    QApplication.processEvents()
    after = accent_pixels(t.viewport().grab().toImage(), accent)
    # a ring two pixels wide round a 16 px icon: over a hundred pixels of the accent colour
    assert after - before >= 100, (before, after)
