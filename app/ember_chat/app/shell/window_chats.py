"""The main window's chat actions: the chat list (open, search, rename, delete), a new chat, and
exporting the open chat. Mixed into MainWindow, whose widgets and stores they use."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QInputDialog, QMenu, QMessageBox

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.export import chat_as_json, chat_as_markdown


class ChatActions:
    def reload_conversations(self) -> None:
        if self.conversations.search.text().strip():
            self._on_search(self.conversations.search.text())
            return
        self.conversations.show_conversations(self.store.conversations(), self.controller.conversation_id)
        self.update_welcome()

    def new_chat(self) -> None:
        def act() -> None:
            self.controller.conversation_id = None
            self.controller.cancel_edit()
            self.composer.set_editing(False)
            self._apply_settings_defaults()
            self.controller.refresh()
            self.reload_conversations()  # (and the welcome panel, when no model is loaded)
            self.composer.editor.setFocus()

        self.controller.after_stop(act)

    def _open_conversation(self, cid: int, jump_to: int | None = None) -> None:
        def act() -> None:
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

    def _conversation_menu(self, pos: object) -> None:
        cid = self.conversations.current_id()
        if cid is None:
            return
        menu = QMenu(self)
        menu.addAction(self.tr("Rename…"), self.rename_current)
        menu.addAction(self.tr("Delete…"), self.delete_current)
        menu.exec(self.conversations.list.mapToGlobal(pos))

    def rename_current(self, title: str | None = None) -> None:
        cid = self.controller.conversation_id or self.conversations.current_id()
        if cid is None:
            return
        if not title:
            title, ok = QInputDialog.getText(
                self, self.tr("Rename chat"), self.tr("Title:"), text=self.store.conversation(cid).title
            )
            if not ok or not title.strip():
                return
        self.store.update_conversation(cid, title=title.strip())
        self.reload_conversations()

    def delete_current(self, confirmed: bool = False) -> None:
        cid = self.controller.conversation_id or self.conversations.current_id()
        if cid is None:
            return
        if not confirmed:
            title = self.store.conversation(cid).title
            answer = QMessageBox.question(
                self, self.tr("Delete chat"), self.tr("Delete “{title}” and all its messages?").format(title=title)
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.controller.delete_conversation(cid)

    def export_dialog(self, kind: str) -> None:
        if self.controller.conversation_id is None:
            self.show_error(self.tr("Open a chat to export it."))
            return
        suffix = self.tr("Markdown (*.md)") if kind == "md" else self.tr("JSON (*.json)")
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Export chat"), f"chat.{kind}", suffix)
        if path:
            self.export(Path(path), kind)

    def export(self, path: Path, kind: str) -> None:
        cid = self.controller.conversation_id
        if cid is None:
            return
        conv = self.store.conversation(cid)
        text = (
            chat_as_json(conv, self.store.thread(cid))
            if kind == "json"
            else chat_as_markdown(conv, self.store.thread(cid))
        )
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or exc
            self.show_error(self.tr("Could not export to {path}: {reason}.").format(path=path, reason=reason))
