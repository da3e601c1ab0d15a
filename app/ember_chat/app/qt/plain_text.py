"""Text from a chat file, a model or a file's name, shown as written where Qt would read it as HTML (a
tooltip, or a label of Qt's "auto" format, shows text that looks like HTML as HTML: `<b>minutes.txt`
in bold, a `<table width=…>` as a table)."""

from __future__ import annotations

import html

from PySide6.QtGui import Qt as QtGuiQt  # (the namespace with mightBeRichText)


def plain_tooltip(text: str) -> str:
    """A tooltip that shows `text` as written."""
    if not QtGuiQt.mightBeRichText(text):
        return text
    return "<p style='white-space:pre'>" + html.escape(text, quote=False) + "</p>"
