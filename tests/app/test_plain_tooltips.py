"""A file's name or a chat's title from a chat file is shown as written in a tooltip (review of issue 28):
Qt shows a tooltip that looks like HTML as HTML, so an imported chat's file named `<b>minutes.txt` was
bold in the message box's chip (the transcript's chips were fixed before), and a `<table width=…>` laid
out a table. The chip, its parts and its ✕, and every elided label (chat titles, model names) say it
as written."""

from __future__ import annotations

from PySide6.QtGui import QTextDocument
from pytestqt.qtbot import QtBot

from ember_chat.app.conversation.attachment_chips import AttachmentChip, ChipState
from ember_chat.app.qt.elided_label import ElidedLabel

NAME = "<b>minutes</b><table width=9999><tr><td>x</td></tr></table>.txt"


def shown(tooltip: str) -> str:
    """What Qt shows for a tooltip: rich text when it looks like it, else the text itself."""
    doc = QTextDocument()
    doc.setHtml(tooltip)
    return doc.toPlainText() if "<" in tooltip else tooltip


def test_a_chips_tooltips_show_an_imported_files_name_as_written(qtbot: QtBot) -> None:
    chip = AttachmentChip(ChipState(NAME, kind="text", size=120, tokens=30))
    qtbot.addWidget(chip)
    for part in (chip, chip.kind, chip.name_label, chip.details, chip.close_button):
        assert NAME in shown(part.toolTip()), part.toolTip()
    chip.show_state(ChipState(NAME, kind="text", progress=0.5))  # (while it is read: "Stop reading …")
    assert NAME in shown(chip.close_button.toolTip())


def test_an_elided_labels_tooltip_shows_its_text_as_written(qtbot: QtBot) -> None:
    label = ElidedLabel(NAME, description="a chat's title")
    qtbot.addWidget(label)
    assert shown(label.toolTip()) == f"{NAME}\na chat's title"
    plain = ElidedLabel("Groceries")
    qtbot.addWidget(plain)
    assert plain.toolTip() == "Groceries"  # (plain text stays as it is)
