"""The keyboard and the dark theme (issue 16, item 13): the focus can be seen on every control (a
ring whose contrast is measured on the window's pixels, as the text colours' contrast is); Tab into
the transcript of a long chat starts at the newest message and the message box is one Tab away;
message boxes follow the dark theme even when the platform theme has palettes of its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QImage, QPalette, QTextCursor
from PySide6.QtWidgets import QApplication, QDialog, QLabel, QLineEdit, QPushButton, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.style.theme import DARK, LIGHT, contrast_ratio, palette_for
from ember_chat.app.transcript.view import TranscriptView
from tests.helpers.chat_fixtures import seed_long_chat

FOCUS_CONTRAST = 3.0  # WCAG 2.2 focus appearance: 3:1 between the focused and unfocused pixels


def _activate(qtbot: QtBot, w: MainWindow) -> None:
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)


def _strongly_changed(before: QImage, after: QImage) -> int:
    """Pixels whose colour changed with at least FOCUS_CONTRAST contrast."""
    n = 0
    for y in range(before.height()):
        for x in range(before.width()):
            a, b = before.pixelColor(x, y).name(), after.pixelColor(x, y).name()
            if a != b and contrast_ratio(a, b) >= FOCUS_CONTRAST:
                n += 1
    return n


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_keyboard_focus_is_a_ring_with_contrast_on_every_kind_of_control(
    qtbot: QtBot, make_window: Callable[..., MainWindow], theme: str
) -> None:
    w = make_window()
    try:
        w.set_theme(theme)
        cid = seed_long_chat(w.store, 4)
        w.chats.open_conversation(cid)
        _activate(qtbot, w)
        controls: dict[str, QWidget] = {
            "push button": w.composer.button,
            "tool button": w.model_bar.tune,
            "line edit": w.conversations.search,
            "combo box": w.model_picker,
            "text box": w.composer.editor,
            "list": w.conversations.list,
            "transcript": w.transcript,
        }
        for name, widget in controls.items():
            (w.composer.editor if widget is w.conversations.list else w.conversations.list).setFocus()
            qtbot.waitUntil(lambda widget=widget: not widget.hasFocus())
            area = QRect(widget.mapTo(w, QPoint(0, 0)), widget.size())  # (on the window's own background)
            before = w.grab(area).toImage()
            widget.setFocus(Qt.FocusReason.ShortcutFocusReason)  # (the keyboard: View ▸ Go to, as Tab)
            qtbot.waitUntil(widget.hasFocus)
            after = w.grab(area).toImage()
            # at least a one-pixel ring round the control (less its rounded corners) changed colour
            # with 3:1 contrast
            ring = 0.9 * 2 * (widget.width() + widget.height())
            assert _strongly_changed(before, after) >= ring, f"{theme}: {name}"
    finally:
        w.set_theme("light")


def test_tab_into_a_long_chat_starts_in_view_and_walks_the_actions_down_to_the_message_box(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """The view stays at the newest messages; Tab walks the actions of those in view, then the message
    box (issue 28, item 12: it was one Tab away, and the actions only reached with Shift+Tab)."""
    w = make_window()
    cid = seed_long_chat(w.store, 60)
    w.chats.open_conversation(cid)
    w.transcript.finish_rendering()
    _activate(qtbot, w)
    t = w.transcript
    bar = t.verticalScrollBar()
    bar.setValue(bar.maximum())
    thread = [m.id for m in w.store.thread(cid)]
    newest = thread[-1]
    w.model_picker.setFocus(Qt.FocusReason.TabFocusReason)
    for _ in range(5):  # Tab from the model bar until the transcript has the focus
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        if QApplication.focusWidget() is t:
            break
    assert QApplication.focusWidget() is t
    assert bar.value() >= bar.maximum() - 4  # the view stays at the newest message
    assert t.focus.ring_shown
    walked = []
    for _ in range(80):
        qtbot.keyClick(t, Qt.Key.Key_Tab)
        if QApplication.focusWidget() is not t:
            break
        walked.append(int(_focused_link(t).rsplit("/", 1)[1]))
        assert bar.value() > bar.maximum() // 2  # among the newest messages, never at the top
    assert QApplication.focusWidget() is w.composer.editor  # after the last action, the message box
    assert walked and walked == sorted(walked) and walked[-1] == newest  # down, to the newest message
    assert thread.index(walked[0]) >= len(thread) - 10  # from the messages in view
    # and back: Shift+Tab walks the actions from the newest message up
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Backtab)
    assert QApplication.focusWidget() is t and bar.value() > bar.maximum() // 2
    qtbot.keyClick(t, Qt.Key.Key_Backtab)
    assert _focused_link(t).endswith(f"/{newest}")
    assert bar.value() > bar.maximum() // 2  # still among the newest messages, not at the top
    qtbot.keyClick(t, Qt.Key.Key_Tab)  # past the newest message's last action: the message box
    assert QApplication.focusWidget() is w.composer.editor


def _focused_link(t: TranscriptView) -> str:
    """The href of the link the transcript's keyboard focus is on."""
    c = QTextCursor(t.document())
    c.setPosition(t.textCursor().selectionEnd())  # (the format of the character before: the link)
    return c.charFormat().anchorHref() if t.textCursor().hasSelection() else ""


def _colours_of(box: QDialog) -> dict[str, str]:
    """The colours a dialog's window, label, first button and field are drawn with."""
    found = {"window": box.palette().color(QPalette.ColorRole.Window).name()}
    label = next(lb for lb in box.findChildren(QLabel) if lb.text())
    found["label"] = label.palette().color(label.foregroundRole()).name()
    found["button"] = box.findChildren(QPushButton)[0].palette().color(QPalette.ColorRole.Button).name()
    field = box.findChild(QLineEdit)
    if field is not None:
        found["field"] = field.palette().color(QPalette.ColorRole.Base).name()
    return found


def test_message_boxes_follow_the_dark_theme_over_the_platform_themes_palettes(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    cid = seed_long_chat(w.store, 2)
    w.chats.reload_conversations()
    w.chats.open_conversation(cid)
    app = QApplication.instance()
    try:
        w.set_theme("dark")
        # What Qt does when the platform's colour scheme changes with a platform theme that has
        # palettes for some widget classes (KDE's, GTK's): those palettes go back in, then the
        # scheme's change is announced.
        for name in ("QMessageBoxLabel", "QLabel", "QAbstractButton", "QLineEdit"):
            app.setPalette(palette_for(LIGHT), name)
        app.styleHints().colorSchemeChanged.emit(Qt.ColorScheme.Dark)
        qtbot.waitUntil(lambda: QApplication.palette("QMessageBoxLabel").color(QPalette.ColorRole.WindowText).name()
                        == DARK.text)  # fmt: skip
        for open_box in (w.chats.delete_current, w.chats.rename_current):
            open_box()  # (the chat's questions open without blocking; the window keeps the one open)
            box = w.chats.chat_question
            assert box is not None and box.isVisible()
            found = _colours_of(box)
            box.reject()
            assert found["window"] == DARK.window and found["label"] == DARK.text, open_box
            assert found["button"] == DARK.button, open_box
            if "field" in found:
                assert found["field"] == DARK.base
        assert "field" in found  # (the rename box has one)
    finally:
        w.set_theme("light")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_unticked_box_can_be_seen_in_both_themes(
    qtbot: QtBot, make_window: Callable[..., MainWindow], theme: str
) -> None:
    """Fusion's unticked box has an edge of the window colour darkened: in the dark theme, in a table
    (Settings ▸ Tools' "Never ask") it could not be seen at all. Its edge has 3:1 against what is round it."""
    from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton, QTableWidget

    w = make_window()
    try:
        w.set_theme(theme)
        table = QTableWidget(1, 1)
        box = QCheckBox("Never ask (read-only)")
        table.setCellWidget(0, 0, box)
        table.resize(300, 80)
        table.show()
        qtbot.waitExposed(table)
        option = QStyleOptionButton()
        option.initFrom(box)
        indicator = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
        image = box.grab().toImage()
        around = image.pixelColor(indicator.right() + 3, indicator.center().y()).name()
        edge = [
            image.pixelColor(x, indicator.center().y()).name() for x in range(indicator.left(), indicator.left() + 3)
        ]
        assert max(contrast_ratio(c, around) for c in edge) >= 3.0, (theme, edge, around)
        table.close()
    finally:
        w.set_theme("light")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_unchosen_radio_button_can_be_seen_in_both_themes(
    qtbot: QtBot, make_window: Callable[..., MainWindow], theme: str
) -> None:
    """The new user's pass (issue 28): in the dark theme, Settings ▸ Appearance's unchosen theme radio
    buttons were nearly invisible (Fusion's edge: the window colour darkened). Their edge has 3:1 against
    the window round them."""
    from PySide6.QtWidgets import QRadioButton, QStyle, QStyleOptionButton, QVBoxLayout, QWidget

    w = make_window()
    try:
        w.set_theme(theme)
        page = QWidget()
        QVBoxLayout(page).addWidget(radio := QRadioButton("Dark"))
        page.resize(200, 60)
        page.show()
        qtbot.waitExposed(page)
        option = QStyleOptionButton()
        option.initFrom(radio)
        indicator = radio.style().subElementRect(QStyle.SubElement.SE_RadioButtonIndicator, option, radio)
        image = radio.grab().toImage()
        around = image.pixelColor(indicator.right() + 3, indicator.center().y()).name()
        edge = [
            image.pixelColor(x, indicator.center().y()).name() for x in range(indicator.left(), indicator.left() + 3)
        ]
        assert max(contrast_ratio(c, around) for c in edge) >= 3.0, (theme, edge, around)
        page.close()
    finally:
        w.set_theme("light")
