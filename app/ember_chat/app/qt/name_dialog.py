"""The dialog that asks for a name (New project…, New folder, Rename folder, Rename chat): its OK button is
enabled only once the name holds more than spaces, and its tooltip says so while it is not, so Enter on
a blank name (or one of spaces only) leaves the dialog open instead of closing it with nothing made and
nothing said. `chosen` is called with the name typed, its spaces around it kept (the store trims them)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QDialogButtonBox, QInputDialog, QWidget


def name_dialog(parent: QWidget, title: str, label: str, value: str, chosen: Callable[[str], None]) -> QInputDialog:
    """A name asked in a (not yet opened) dialog pre-filled with `value`; `chosen(name)` once OK is
    pressed on a name that is not blank."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle(title)
    dialog.setLabelText(label)
    dialog.setTextValue(value)
    dialog.setOkButtonText(QCoreApplication.translate("NameDialog", "OK"))  # (its buttons made now: found below)
    ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
    why = QCoreApplication.translate("NameDialog", "Type a name first: spaces alone are not one.")

    def typed(text: str) -> None:
        ok.setEnabled(bool(text.strip()))
        ok.setToolTip("" if text.strip() else why)

    dialog.textValueChanged.connect(typed)
    typed(value)
    dialog.textValueSelected.connect(lambda text: chosen(text) if text.strip() else None)
    return dialog
