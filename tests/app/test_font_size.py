"""View ▸ Bigger text (Ctrl+=), Smaller text (Ctrl+-), Normal size (Ctrl+0): the transcript's text and
its formulas grow and shrink, the size is saved in the settings (`transcript_font_size`) and a new
window starts with it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.shell.menus import menu_shortcuts
from ember_chat.app.transcript.font_size import system_points
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.transcript import formulas, open_chat, typeset
from tests.helpers.window import view_action


def press(qtbot: QtBot, w: MainWindow, t_key: Qt.Key) -> None:
    w.activateWindow()
    w.transcript.setFocus()
    qtbot.keyClick(w.transcript, t_key, Qt.KeyboardModifier.ControlModifier)


def test_bigger_and_smaller_text_size_the_transcript_and_its_formulas_and_are_saved(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w = make_window()
    t = open_chat(qtbot, w)
    base = system_points()
    assert t.document().defaultFont().pointSize() == base and w.settings.transcript_font_size == 0
    inline_height = formulas(t)[0][1].height()
    code_size = t.document().find("$not math$").charFormat().font().pointSizeF()  # (inline code)
    keys = set(menu_shortcuts(w.menuBar()))  # (what Help ▸ Keyboard shortcuts lists)
    sizes = {("View", "Bigger text", "Ctrl+="), ("View", "Smaller text", "Ctrl+-"), ("View", "Normal size", "Ctrl+0")}
    assert sizes <= keys
    press(qtbot, w, Qt.Key.Key_Equal)
    press(qtbot, w, Qt.Key.Key_Equal)
    t.finish_rendering()
    typeset(qtbot, t)
    assert t.document().defaultFont().pointSize() == base + 2
    assert w.settings_file.load().transcript_font_size == base + 2  # saved in the settings file
    assert len(formulas(t)) == 3 and formulas(t)[0][1].height() > inline_height  # the formulas grew with it
    bigger_height = formulas(t)[0][1].height()
    assert t.document().find("$not math$").charFormat().font().pointSizeF() > code_size  # inline code too
    press(qtbot, w, Qt.Key.Key_Minus)
    t.finish_rendering()
    typeset(qtbot, t)
    assert t.document().defaultFont().pointSize() == base + 1
    assert inline_height < formulas(t)[0][1].height() < bigger_height
    assert w.settings_file.load().transcript_font_size == base + 1
    w.close()
    w2 = make_window()  # a new window (the same settings file) starts at the saved size
    assert w2.transcript.document().defaultFont().pointSize() == base + 1
    view_action(w2, "Normal size").trigger()
    assert w2.transcript.document().defaultFont().pointSize() == base
    assert w2.settings_file.load().transcript_font_size == 0  # 0: the system's size, followed if it changes


def test_the_size_stays_within_its_range_and_applies_to_streamed_text(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    smaller = view_action(w, "Smaller text")
    for _ in range(40):
        smaller.trigger()
    assert w.transcript.document().defaultFont().pointSize() == 6 == w.settings.transcript_font_size
    bigger = view_action(w, "Bigger text")
    assert bigger.shortcuts()[0] == QKeySequence("Ctrl+=")
    for _ in range(60):
        bigger.trigger()
    assert w.settings.transcript_font_size == 40
    t = w.transcript
    t.begin_stream(10_000, "model")
    t.append_stream("streamed words")
    QApplication.processEvents()
    c = t.document().find("streamed words")
    assert c.charFormat().font().pointSize() == 40  # the streaming answer is as big as the rest


def test_the_size_stays_when_the_theme_changes(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    w.set_theme("light")
    view_action(w, "Bigger text").trigger()
    view_action(w, "Bigger text").trigger()
    size = w.transcript.document().defaultFont().pointSize()
    assert size == system_points() + 2
    w.set_theme("dark")  # (the new style sheet polishes every widget again, with the application's font)
    QApplication.processEvents()
    assert w.transcript.document().defaultFont().pointSize() == size
    w.set_theme("light")
    QApplication.processEvents()
    assert w.transcript.document().defaultFont().pointSize() == size
