"""The dialog that asks for a name (New project…, New folder, Rename project, Rename folder, Rename chat):
its OK button is enabled only once the name holds more than spaces, and its tooltip says so while it is
not, so Enter on a blank name (or one of spaces only) leaves the dialog open instead of closing it with
nothing made and nothing said. `chosen` is called with the name typed, its spaces around it kept (the
store trims them); when it answers a sentence (the name is taken, too long…) the dialog stays open with
what was typed and that sentence under the field, as a project's settings do, until the name is changed."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QInputDialog, QLabel, QVBoxLayout, QWidget

ERROR_WIDTH = 420  # px: the dialog's width at least, while it says why a name is not taken
Chosen = Callable[[str], str | None]  # the name typed -> None (done: the dialog closes) or why it is not taken


class NameDialog(QInputDialog):
    """A QInputDialog whose OK asks `chosen` first and stays open, saying why, when it refuses the name."""

    def __init__(self, parent: QWidget, chosen: Chosen) -> None:
        super().__init__(parent)
        self._chosen = chosen
        self.error = QLabel()
        self.error.setObjectName("nameError")
        self.error.setWordWrap(True)
        self.error.setTextFormat(Qt.TextFormat.PlainText)  # (it names what the user typed: never rich text)
        self.error.setStyleSheet("color: palette(link);")  # (as Project settings' own sentence)
        self.error.setAccessibleName(QCoreApplication.translate("NameDialog", "Why this name is not taken"))
        self.error.hide()

    def show_error(self, text: str) -> None:
        """`text` under the field (the role of an alert for a screen reader), or none for ''."""
        self.error.setText(text)
        self.error.setVisible(bool(text))
        self.error.setAccessibleDescription(text)
        if text:  # (wide enough to read the sentence in a line or two, and tall enough for all of it)
            self.resize(max(self.width(), ERROR_WIDTH), self.height())
            self.layout().activate()
            self.resize(self.width(), max(self.height(), self.layout().totalHeightForWidth(self.width())))

    def done(self, result: int) -> None:
        if result == QDialog.DialogCode.Accepted:
            text = self.textValue()
            if not text.strip():
                return  # (OK is disabled: Enter alone lands here)
            refused = self._chosen(text)
            if refused:
                self.show_error(refused)
                return  # open, with what was typed
        super().done(result)


def name_dialog(parent: QWidget, title: str, label: str, value: str, chosen: Chosen) -> NameDialog:
    """A name asked in a (not yet opened) dialog pre-filled with `value`; `chosen(name)` once OK is
    pressed on a name that is not blank: the dialog closes unless it answers why the name is refused."""
    dialog = NameDialog(parent, chosen)
    dialog.setWindowTitle(title)
    dialog.setLabelText(label)
    dialog.setTextValue(value)
    dialog.setOkButtonText(QCoreApplication.translate("NameDialog", "OK"))  # (its buttons made now: found below)
    buttons = dialog.findChild(QDialogButtonBox)
    ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
    layout = dialog.layout()
    if isinstance(layout, QVBoxLayout):  # (QInputDialog's own: label, field, buttons): the error above the buttons
        layout.insertWidget(layout.indexOf(buttons), dialog.error)
    why = QCoreApplication.translate("NameDialog", "Type a name first: spaces alone are not one.")

    def typed(text: str) -> None:
        ok.setEnabled(bool(text.strip()))
        ok.setToolTip("" if text.strip() else why)
        dialog.show_error("")  # (a changed name: the last refusal no longer applies)

    dialog.textValueChanged.connect(typed)
    typed(value)
    return dialog
