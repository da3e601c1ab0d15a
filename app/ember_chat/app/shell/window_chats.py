"""The main window's chat actions: sending and editing from the composer, the chat list (open,
search, rename, delete), a new chat, and exporting the open chat. A part of the main window
(`window.chats`), which uses the window's widgets and stores and owns the menu and questions it
opened."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QPoint, QStandardPaths, Qt
from PySide6.QtWidgets import QDialog, QFileDialog, QInputDialog, QMenu, QMessageBox

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.export import chat_as_json, chat_as_markdown, export_file_name

if TYPE_CHECKING:
    from ember_chat.app.shell.main_window import MainWindow


class ChatActions(QObject):
    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.w = window
        self.chat_menu: QMenu | None = None  # the chat list's context menu, while open
        self.chat_question: QDialog | None = None  # a rename or delete question, while open
        self.export_dialog_open: QFileDialog | None = None  # File ▸ Export's save dialog, while open

    # ----- the composer
    def send(self, text: str) -> None:
        self.w.banner.hide()
        refused = self.w.attach.refused()  # (still reading; an image for a model that cannot see it)
        if refused:
            self.w.composer.editor.setPlainText(text)
            self.w.show_error(refused)
            return
        editing = self.w.controller.editing
        self.w.composer.set_editing(False)
        attachments = self.w.composer.attachments.attachments()
        if not self.w.controller.send(text, attachments):  # not sent: the text goes back into the box
            self.w.composer.editor.setPlainText(text)
            self.w.composer.set_editing(editing)
        else:
            self.w.composer.attachments.clear()

    def edit_message(self, message_id: int) -> None:
        def act() -> None:
            self.w.composer.editor.setPlainText(self.w.controller.start_edit(message_id))
            self.w.composer.attachments.clear()  # the edited message's files come back with its text
            self.w.composer.attachments.attach_stored(self.w.attach.store.of_message(message_id))
            self.w.composer.set_editing(True)
            self.w.composer.editor.setFocus()

        self.w.controller.after_stop(act)

    def cancel_edit(self) -> None:
        self.w.controller.cancel_edit()
        self.w.composer.attachments.clear()
        self.w.composer.set_editing(False)
        self.w.composer.editor.clear()

    # ----- the chat list
    def reload_conversations(self) -> None:
        if self.w.conversations.search.text().strip():
            self.on_search(self.w.conversations.search.text())
            return
        self.w.conversations.show_conversations(self.w.store.conversations(), self.w.controller.conversation_id)
        self.w.update_welcome()

    def new_chat(self) -> None:
        def act() -> None:
            if self.w.controller.conversation_id is not None:
                self.w.side.metrics.reset()  # "Current answer" was the other chat's
            self.w.controller.conversation_id = None
            self.w.banner.end("answer")  # an error about the chat left behind
            self.w.controller.cancel_edit()
            self.w.composer.set_editing(False)
            self.w._apply_settings_defaults()
            self.w.controller.refresh()
            self.reload_conversations()  # (and the welcome panel, when no model is loaded)
            self.w.composer.editor.setFocus()

        self.w.controller.after_stop(act)

    def open_conversation(self, cid: int, jump_to: int | None = None) -> None:
        def act() -> None:
            if cid != self.w.controller.conversation_id:
                self.w.side.metrics.reset()  # "Current answer" was the other chat's
            conv = self.w.store.conversation(cid)
            params = {k: v for k, v in conv.params.items() if k != "context_length"}
            try:
                sp = SamplingParams.from_dict(params) if params else self.w.side.params.params()
            except EmberError:
                sp = SamplingParams()
            ctx = int(conv.params.get("context_length", self.w.side.params.context.value()))
            self.w.side.params.set_params(sp, conv.system_prompt, ctx)
            self.w.composer.set_editing(False)
            self.w.conversations.select(cid)
            if cid != self.w.controller.conversation_id:
                self.w.banner.end("answer")  # an error about the chat left behind

        self.w.controller.after_stop(act)
        self.w.controller.open_conversation(cid, jump_to)
        self.w.controller.after_stop(self.w.update_welcome)

    def open_hit(self, cid: int, mid: int) -> None:
        if mid not in [m.id for m in self.w.store.thread(cid)]:  # the hit is on another branch: show it
            self.w.store.update_conversation(cid, active_leaf=self.w.store.newest_leaf(mid))
        self.open_conversation(cid, jump_to=mid)

    def on_search(self, text: str) -> None:
        if text.strip():
            self.w.conversations.show_hits(self.w.store.search(text))
        else:
            self.w.conversations.show_conversations(self.w.store.conversations(), self.w.controller.conversation_id)

    def conversation_menu(self, pos: QPoint) -> None:
        """The context menu of the row right-clicked: its actions act on that chat (the selection
        stays on the open one)."""
        cid = self.w.conversations.id_at(pos)
        if cid is None:
            return
        menu = QMenu(self.w)
        menu.addAction(self.tr("Rename…"), lambda: self.rename_chat(cid))
        menu.addAction(self.tr("Delete…"), lambda: self.delete_chat(cid))
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.destroyed.connect(lambda: setattr(self, "chat_menu", None))
        self.chat_menu = menu  # kept while open (and for tests)
        menu.popup(self.w.conversations.list.viewport().mapToGlobal(pos))

    def _chosen_chat(self) -> int | None:
        """What Chat ▸ Rename and Delete act on: the chat selected in the list, else the open one."""
        return self.w.conversations.current_id() or self.w.controller.conversation_id

    def rename_current(self, title: str | None = None) -> None:
        cid = self._chosen_chat()
        if cid is not None:
            self.rename_chat(cid, title)

    def delete_current(self, confirmed: bool = False) -> None:
        cid = self._chosen_chat()
        if cid is not None:
            self.delete_chat(cid, confirmed)

    def rename_chat(self, cid: int, title: str | None = None) -> None:
        """Rename a chat: to `title`, else to what the user types in a dialog pre-filled with its title."""
        if title:
            self._rename(cid, title)
            return
        dialog = QInputDialog(self.w)
        dialog.setWindowTitle(self.tr("Rename chat"))
        dialog.setLabelText(self.tr("Title:"))
        dialog.setTextValue(self.w.store.conversation(cid).title)
        dialog.textValueSelected.connect(lambda text: self._rename(cid, text))
        self._ask(dialog)

    def _rename(self, cid: int, title: str) -> None:
        if title.strip():
            self.w.store.update_conversation(cid, title=title.strip())
            self.reload_conversations()

    def delete_chat(self, cid: int, confirmed: bool = False) -> None:
        """Delete a chat and all its messages, once the user has said yes (or `confirmed`)."""
        if confirmed:
            self.w.controller.delete_conversation(cid)
            return
        title = self.w.store.conversation(cid).title
        box = QMessageBox(
            QMessageBox.Icon.Question,
            self.tr("Delete chat"),
            self.tr("Delete “{title}” and all its messages?").format(title=title),
            QMessageBox.StandardButton.Cancel,
            self.w,
        )
        delete = box.addButton(self.tr("Delete"), QMessageBox.ButtonRole.DestructiveRole)
        delete.clicked.connect(lambda: self.w.controller.delete_conversation(cid))
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self._ask(box)

    def _ask(self, dialog: QDialog) -> None:
        """A question about a chat, window-modal without blocking the event loop (an answer streams on)."""
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "chat_question", None))
        self.chat_question = dialog  # kept while open (and for tests)
        dialog.open()

    def export_dialog(self, kind: str) -> None:
        """File ▸ Export: a save dialog proposing the chat's title as the file name, in the documents
        folder (it does not block: an answer keeps streaming)."""
        cid = self.w.controller.conversation_id
        if cid is None:
            self.w.show_error(self.tr("Open a chat to export it."))
            return
        suffix = self.tr("Markdown (*.md)") if kind == "md" else self.tr("JSON (*.json)")
        documents = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation))
        folder = documents if documents.is_dir() else Path.home()
        proposed = folder / export_file_name(self.w.store.conversation(cid).title, kind)
        dialog = QFileDialog(self.w, self.tr("Export chat"), str(proposed), suffix)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setDefaultSuffix(kind)
        dialog.fileSelected.connect(lambda path: self.export(Path(path), kind, cid))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "export_dialog_open", None))
        self.export_dialog_open = dialog  # kept while open (and for tests)
        dialog.open()

    def export(self, path: Path, kind: str, cid: int | None = None) -> None:
        """Write a chat (the open one unless `cid`) to `path` as Markdown ("md") or JSON, and say where."""
        cid = cid if cid is not None else self.w.controller.conversation_id
        if cid is None:
            return
        conv = self.w.store.conversation(cid)
        thread = self.w.store.thread(cid)
        files = self.w.attach.store.export_entries([m.id for m in thread])  # (JSON: with their content)
        export = chat_as_json if kind == "json" else chat_as_markdown
        text = export(conv, thread, attachments=files)
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or exc
            self.w.show_error(self.tr("Could not export to {path}: {reason}.").format(path=path, reason=reason))
            return
        self.w.show_notice(self.tr("Exported “{title}” to {path}").format(title=conv.title, path=path))
