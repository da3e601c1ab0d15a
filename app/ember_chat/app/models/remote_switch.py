"""The question before a remote model replaces the local one (issue 16, item 3): Ember runs one
model at a time, so "Use this model" on a connection unloads the model on this computer, and the
local API server, which serves whatever the window has loaded, switches to the remote model too.
The user is told before, not after."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QAbstractButton, QMessageBox, QWidget

from ember_chat.app.qt.plain_text import plain_message


class RemoteSwitchQuestion(QMessageBox):
    """Opens (window-modal, not blocking); `proceed` runs on "Use", `cancelled` on Cancel, Esc or
    closing it."""

    def __init__(
        self,
        parent: QWidget,
        loaded: str,
        model: str,
        connection: str,
        api_url: str | None,
        proceed: Callable[[], None],
        cancelled: Callable[[], None],
    ) -> None:
        super().__init__(parent)
        plain_message(self)  # (model names come from a server's list)
        self.setObjectName("remote-switch-question")
        self.setIcon(QMessageBox.Icon.Question)
        self.setWindowTitle(self.tr("Use a remote model"))
        self.setText(self.tr("Use {model} from {connection}?").format(model=model, connection=connection))
        details = [
            self.tr("Ember runs one model at a time: {loaded} will be unloaded from this computer.").format(
                loaded=loaded
            )
        ]
        if api_url is not None:
            details.append(
                self.tr(
                    "The local API server at {url} will serve {model} from {connection} instead of {loaded}."
                ).format(url=api_url, model=model, connection=connection, loaded=loaded)
            )
        details.append(self.tr("You can load {loaded} again from the model list.").format(loaded=loaded))
        self.setInformativeText("\n\n".join(details))
        self.use_button = self.addButton(
            self.tr("Unload {loaded} and use {model}").format(loaded=loaded, model=model),
            QMessageBox.ButtonRole.AcceptRole,
        )
        self.addButton(QMessageBox.StandardButton.Cancel)
        self.setDefaultButton(QMessageBox.StandardButton.Cancel)

        def answered(button: QAbstractButton) -> None:
            proceed() if button is self.use_button else cancelled()

        self.buttonClicked.connect(answered)
        self.open()
