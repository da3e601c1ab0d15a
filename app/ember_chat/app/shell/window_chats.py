"""The main window's chat actions: the chat list (open, search, rename, delete), a new chat, and
exporting the open chat. Mixed into MainWindow, whose widgets and stores they use."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QStandardPaths, Qt
from PySide6.QtWidgets import QDialog, QFileDialog, QInputDialog, QMenu, QMessageBox

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.export import chat_as_json, chat_as_markdown, export_file_name


class ChatActions:
    _chat_menu: QMenu | None = None  # the chat list's context menu, while open
    _chat_question: QDialog | None = None  # a rename or delete question, while open
    _export_dialog: QFileDialog | None = None  # File ▸ Export's save dialog, while open

    def reload_conversations(self) -> None:
        if self.conversations.search.text().strip():
            self._on_search(self.conversations.search.text())
            return
        self.conversations.show_conversations(self.store.conversations(), self.controller.conversation_id)
        self.update_welcome()

    def new_chat(self) -> None:
        def act() -> None:
            if self.controller.conversation_id is not None:
                self.side.metrics.reset()  # "Current answer" was the other chat's
            self.controller.conversation_id = None
            self.banner.end("answer")  # an error about the chat left behind
            self.controller.cancel_edit()
            self.composer.set_editing(False)
            self._apply_settings_defaults()
            self.controller.refresh()
            self.reload_conversations()  # (and the welcome panel, when no model is loaded)
            self.composer.editor.setFocus()

        self.controller.after_stop(act)

    def _open_conversation(self, cid: int, jump_to: int | None = None) -> None:
        def act() -> None:
            if cid != self.controller.conversation_id:
                self.side.metrics.reset()  # "Current answer" was the other chat's
            conv = self.store.conversation(cid)
            params = {k: v for k, v in conv.params.items() if k != "context_length"}
            try:
                sp = SamplingParams.from_dict(params) if params else self.side.params.params()
            except EmberError:
                sp = SamplingParams()
            ctx = int(conv.params.get("context_length", self.side.params.context.value()))
            self.side.params.set_params(sp, conv.system_prompt, ctx)
            self.composer.set_editing(False)
            self.conversations.select(cid)
            if cid != self.controller.conversation_id:
                self.banner.end("answer")  # an error about the chat left behind

        self.controller.after_stop(act)
        self.controller.open_conversation(cid, jump_to)
        self.controller.after_stop(self.update_welcome)

    def _open_hit(self, cid: int, mid: int) -> None:
        if mid not in [m.id for m in self.store.thread(cid)]:  # the hit is on another branch: show it
            self.store.update_conversation(cid, active_leaf=self.store.newest_leaf(mid))
        self._open_conversation(cid, jump_to=mid)

    def _on_search(self, text: str) -> None:
        if text.strip():
            self.conversations.show_hits(self.store.search(text))
        else:
            self.conversations.show_conversations(self.store.conversations(), self.controller.conversation_id)

    def _conversation_menu(self, pos: QPoint) -> None:
        """The context menu of the row right-clicked: its actions act on that chat (the selection
        stays on the open one)."""
        cid = self.conversations.id_at(pos)
        if cid is None:
            return
        menu = QMenu(self)
        menu.addAction(self.tr("Rename…"), lambda: self.rename_chat(cid))
        menu.addAction(self.tr("Delete…"), lambda: self.delete_chat(cid))
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.destroyed.connect(lambda: setattr(self, "_chat_menu", None))
        self._chat_menu = menu  # kept while open (and for tests)
        menu.popup(self.conversations.list.viewport().mapToGlobal(pos))

    def _chosen_chat(self) -> int | None:
        """What Chat ▸ Rename and Delete act on: the chat selected in the list, else the open one."""
        return self.conversations.current_id() or self.controller.conversation_id

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
        dialog = QInputDialog(self)
        dialog.setWindowTitle(self.tr("Rename chat"))
        dialog.setLabelText(self.tr("Title:"))
        dialog.setTextValue(self.store.conversation(cid).title)
        dialog.textValueSelected.connect(lambda text: self._rename(cid, text))
        self._ask(dialog)

    def _rename(self, cid: int, title: str) -> None:
        if title.strip():
            self.store.update_conversation(cid, title=title.strip())
            self.reload_conversations()

    def delete_chat(self, cid: int, confirmed: bool = False) -> None:
        """Delete a chat and all its messages, once the user has said yes (or `confirmed`)."""
        if confirmed:
            self.controller.delete_conversation(cid)
            return
        title = self.store.conversation(cid).title
        box = QMessageBox(
            QMessageBox.Icon.Question,
            self.tr("Delete chat"),
            self.tr("Delete “{title}” and all its messages?").format(title=title),
            QMessageBox.StandardButton.Cancel,
            self,
        )
        delete = box.addButton(self.tr("Delete"), QMessageBox.ButtonRole.DestructiveRole)
        delete.clicked.connect(lambda: self.controller.delete_conversation(cid))
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self._ask(box)

    def _ask(self, dialog: QDialog) -> None:
        """A question about a chat, window-modal without blocking the event loop (an answer streams on)."""
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "_chat_question", None))
        self._chat_question = dialog  # kept while open (and for tests)
        dialog.open()

    def export_dialog(self, kind: str) -> None:
        """File ▸ Export: a save dialog proposing the chat's title as the file name, in the documents
        folder (it does not block: an answer keeps streaming)."""
        cid = self.controller.conversation_id
        if cid is None:
            self.show_error(self.tr("Open a chat to export it."))
            return
        suffix = self.tr("Markdown (*.md)") if kind == "md" else self.tr("JSON (*.json)")
        documents = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation))
        folder = documents if documents.is_dir() else Path.home()
        proposed = folder / export_file_name(self.store.conversation(cid).title, kind)
        dialog = QFileDialog(self, self.tr("Export chat"), str(proposed), suffix)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setDefaultSuffix(kind)
        dialog.fileSelected.connect(lambda path: self.export(Path(path), kind, cid))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "_export_dialog", None))
        self._export_dialog = dialog  # kept while open (and for tests)
        dialog.open()

    def export(self, path: Path, kind: str, cid: int | None = None) -> None:
        """Write a chat (the open one unless `cid`) to `path` as Markdown ("md") or JSON, and say where."""
        cid = cid if cid is not None else self.controller.conversation_id
        if cid is None:
            return
        conv = self.store.conversation(cid)
        thread = self.store.thread(cid)
        text = chat_as_json(conv, thread) if kind == "json" else chat_as_markdown(conv, thread)
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or exc
            self.show_error(self.tr("Could not export to {path}: {reason}.").format(path=path, reason=reason))
            return
        self.show_notice(self.tr("Exported “{title}” to {path}").format(title=conv.title, path=path))
