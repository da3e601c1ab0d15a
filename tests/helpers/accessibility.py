"""Keyboard and screen-reader checks shared by the window tests: a link's activation and focus,
widgets without a name."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible, QTextCursor
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QScrollBar,
    QTabBar,
    QTextEdit,
    QWidget,
)
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.transcript.view import TranscriptView

CONTROLS = (
    QAbstractButton,
    QLineEdit,
    QAbstractSpinBox,
    QComboBox,
    QAbstractItemView,
    QPlainTextEdit,
    QTextEdit,
    QTabBar,
)


def _controls(root: QWidget) -> list[QWidget]:
    """The controls a user reaches with Tab (not the parts Qt builds inside composite widgets)."""
    out = []
    for w in root.findChildren(QWidget):
        if not isinstance(w, CONTROLS) or w.focusPolicy() == Qt.FocusPolicy.NoFocus:
            continue
        if isinstance(w, QScrollBar) or _inside_composite(w):
            continue
        out.append(w)
    return out


def _inside_composite(w: QWidget) -> bool:
    parent = w.parentWidget()
    while parent is not None:
        if isinstance(parent, (QAbstractSpinBox, QComboBox, QTabBar, QScrollBar, QLineEdit)):
            return True
        if type(parent).__name__ == "QComboBoxPrivateContainer":  # a combo box's popup list
            return True
        parent = parent.parentWidget()
    return False


def _missing_names(root: QWidget) -> list[str]:
    missing = []
    for w in _controls(root):
        iface = QAccessible.queryAccessibleInterface(w)
        name = iface.text(QAccessible.Text.Name) if iface else ""
        description = iface.text(QAccessible.Text.Description) if iface else ""
        if isinstance(w, QTabBar):  # a tab bar describes itself through its tabs (their tooltips)
            tabs = [iface.child(k) for k in range(w.count())]
            description = "ok" if all(t.text(QAccessible.Text.Description).strip() for t in tabs) else ""
        if not name.strip() or not description.strip():
            label = w.objectName() or getattr(w, "text", lambda: "")() or type(w).__name__
            missing.append(f"{type(w).__name__} {label!r}: name={name!r} description={description!r}")
    return missing


def _activate(qtbot: QtBot, w: MainWindow) -> None:
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)


def _focused_link(t: TranscriptView) -> str:
    """The href of the link the transcript's keyboard focus is on."""
    c = QTextCursor(t.document())
    c.setPosition(t.textCursor().selectionEnd())  # (the format of the character before: the link)
    return c.charFormat().anchorHref() if t.textCursor().hasSelection() else ""
