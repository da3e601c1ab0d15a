"""Text from a chat file, a model or a file's name, shown as written where Qt would read it as HTML (a
tooltip, or a label of Qt's "auto" format, shows text that looks like HTML as HTML: `<b>minutes.txt`
in bold, a `<table width=…>` as a table, an `<img src="/some/file">` read from disk). Every message box
of the app is made by `ask` or passed through `plain_message`."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as QtGuiQt  # (the namespace with mightBeRichText)
from PySide6.QtWidgets import QMessageBox, QWidget


def plain_tooltip(text: str) -> str:
    """A tooltip that shows `text` as written."""
    if not QtGuiQt.mightBeRichText(text):
        return text
    return "<p style='white-space:pre'>" + html.escape(text, quote=False) + "</p>"


def plain_message(box: QMessageBox) -> QMessageBox:
    """`box`, its text and informative text shown as written (a message box guesses the format)."""
    box.setTextFormat(Qt.TextFormat.PlainText)
    return box


def ask(
    parent: QWidget | None,
    title: str,
    text: str,
    buttons: QMessageBox.StandardButton = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
) -> QMessageBox.StandardButton:
    """QMessageBox.question's question, its text shown as written: the button clicked."""
    box = plain_message(QMessageBox(QMessageBox.Icon.Question, title, text, buttons, parent))
    return QMessageBox.StandardButton(box.exec())
