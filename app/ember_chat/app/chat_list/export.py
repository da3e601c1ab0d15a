"""The main window's chat exports: File ▸ Export chat as Markdown or JSON (the open chat) and the chat
list's Export (the chats chosen, one JSON file) and a project's Export project… (the project and all its
chats, one JSON file: storage/export.project_export_json), each through a save dialog that does not block (an
answer keeps streaming). Built by the chat list's actions (`window.chats.exports`) from the AppContext
(the chat store, the notifier), the attachment store whose files a JSON export carries, the chat shown
(what File ▸ Export exports), the widget its dialog opens over and the chat list's way to ask a question.

A JSON export of chats whose answers were given passages of a project's files (issue 34) asks, once the
path is chosen, whether the passages' text goes too: by default it does not (the files' names and pages
go either way); Cancel writes nothing. A Markdown export names no project sources, so it never asks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, Qt
from PySide6.QtWidgets import QDialog, QFileDialog, QMessageBox, QWidget

from ember_chat.app.chat_list.shown_chat import ShownChat
from ember_chat.app.context import AppContext
from ember_chat.app.qt.plain_text import plain_message
from ember_chat.engine.attachments.store import AttachmentStore
from ember_chat.engine.errors import StoreError
from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.export import (
    chat_as_markdown,
    chat_export_json,
    chats_as_json,
    export_file_name,
    project_chat_ids,
    project_export_json,
)


class ChatExports(QObject):
    def __init__(
        self,
        ctx: AppContext,
        attachments: AttachmentStore,
        chat: ShownChat,
        dialog_parent: QWidget,
        ask: Callable[[QDialog], None],
        parent: QObject | None = None,
    ) -> None:
        """`ask`: a question shown without blocking and kept while open (the chat list's actions keep it)."""
        super().__init__(parent)
        self.ctx = ctx
        self.attachments = attachments  # (their files go into a JSON export, to import back)
        self.chat = chat
        self._dialog_parent = dialog_parent
        self._ask = ask
        self.export_dialog_open: QFileDialog | None = None  # the save dialog, while open

    def export_many(self, ids: Sequence[int]) -> None:
        """The chats chosen, as one JSON file (a save dialog; it does not block)."""
        if len(ids) == 1:
            self.export_dialog("json", ids[0])
            return
        chosen = list(ids)
        title = self.tr("Export chats")
        self._ask_path(
            title,
            self.tr("{n} chats.json").format(n=len(chosen)),
            "json",
            lambda path: self._with_passages(title, chosen, lambda passages: self.export_chats(path, chosen, passages)),
        )

    def export_chats(self, path: Path, ids: list[int], passages: bool = False) -> None:
        """Write the chats to `path` as one JSON list; `passages`: with the text of the project passages
        their answers were given."""
        text = chats_as_json(self.ctx.store, ids, self.attachments.export_entries, passages=passages)
        self._write(path, text, self.tr("Exported {n} chats to {path}").format(n=len(ids), path=path))

    def export_project(self, folder_id: int) -> None:
        """Export project… (a project's menu in the chat list): the project (name, icon, instructions,
        defaults, the paths of its knowledge) and all its chats as one JSON file, also with no chats; a
        save dialog named for the project, then, as a chat export, the question about the passages' text.
        The project is the one of this folder made when the menu was opened: deleted meanwhile (its folder's
        id may be given to a project made since), nothing is written (`write_project`)."""
        try:
            name = ProjectStore(self.ctx.store).project(folder_id).name
        except StoreError as exc:
            self.ctx.notifier.show_error(str(exc))
            return
        made = self.ctx.store.organise.folder_created_at(folder_id)
        title = self.tr("Export project")

        def chosen(path: Path) -> None:
            if not self._still(folder_id, made, name):
                return
            ids = project_chat_ids(self.ctx.store, folder_id)  # (as they are once the path is chosen)
            self._with_passages(title, ids, lambda passages: self.write_project(path, folder_id, passages, made, name))

        self._ask_path(title, export_file_name(name, "json"), "json", chosen)

    def write_project(
        self, path: Path, folder_id: int, passages: bool = False, made: float | None = None, named: str = ""
    ) -> None:
        """Write the project and its chats to `path` (export.project_export_json) and say what went;
        `made`: when the project's folder was made (another made since with its id is not written), with
        the project's name then (`named`)."""
        if made is not None and not self._still(folder_id, made, named):
            return
        try:
            name = ProjectStore(self.ctx.store).project(folder_id).name
            text = project_export_json(self.ctx.store, folder_id, self.attachments.export_entries, passages)
        except (StoreError, KeyError):
            self.ctx.notifier.show_error(self.tr("This project no longer exists, so it was not exported."))
            return
        chats = len(project_chat_ids(self.ctx.store, folder_id))
        if chats == 1:
            done = self.tr("Exported the project “{name}” and its chat to {path}")
        elif chats:
            done = self.tr("Exported the project “{name}” and its {n:,} chats to {path}")
        else:
            done = self.tr("Exported the project “{name}” (it has no chats) to {path}")
        self._write(path, text, done.format(name=name, n=chats, path=path))

    def _still(self, folder_id: int, made: float | None, name: str) -> bool:
        """Whether the project of `folder_id` is the one made at `made` still; else it says it is gone."""
        if self.ctx.store.organise.folder_created_at(folder_id) == made:
            return True
        gone = self.tr("The project “{name}” was deleted while its export was being chosen, so nothing was exported.")
        self.ctx.notifier.show_error(gone.format(name=name))
        return False

    def export_dialog(self, kind: str, cid: int | None = None) -> None:
        """File ▸ Export: a save dialog proposing the chat's title as the file name, in the documents
        folder (it does not block: an answer keeps streaming)."""
        cid = cid if cid is not None else self.chat.conversation_id
        if cid is None:
            self.ctx.notifier.show_error(self.tr("Open a chat to export it."))
            return
        name = export_file_name(self.ctx.store.conversation(cid).title, kind)
        title = self.tr("Export chat")
        if kind == "json":
            self._ask_path(
                title,
                name,
                kind,
                lambda path: self._with_passages(title, [cid], lambda passages: self.export(path, kind, cid, passages)),
            )
        else:  # (Markdown names no project sources: nothing to ask)
            self._ask_path(title, name, kind, lambda path: self.export(path, kind, cid))

    def export(self, path: Path, kind: str, cid: int | None = None, passages: bool = False) -> None:
        """Write a chat (the open one unless `cid`) to `path` as Markdown ("md") or JSON, and say where;
        `passages`: a JSON export carries the text of the project passages its answers were given."""
        cid = cid if cid is not None else self.chat.conversation_id
        if cid is None:
            return
        conv = self.ctx.store.conversation(cid)
        if kind == "json":  # the whole chat (every branch, tool records, files, comparisons): it imports back
            text = chat_export_json(self.ctx.store, cid, self.attachments.export_entries, passages=passages)
        else:  # the branch on screen, to read
            thread = self.ctx.store.thread(cid)
            text = chat_as_markdown(conv, thread, attachments=self.attachments.export_entries([m.id for m in thread]))
        self._write(path, text, self.tr("Exported “{title}” to {path}").format(title=conv.title, path=path))

    def _with_passages(self, title: str, ids: list[int], write: Callable[[bool], None]) -> None:
        """`write` the JSON export of `ids`: at once when no answer in them was given project passages,
        else once the user has said whether the passages' text goes too (by default not; Cancel: nothing
        is written)."""
        answers = [m.id for cid in ids for m in self.ctx.store.messages(cid) if m.role == "assistant"]
        if not AnswerKnowledge(self.ctx.store).sources_of_answers(answers):
            write(False)
            return
        box = plain_message(
            QMessageBox(
                QMessageBox.Icon.Question,
                title,
                self.tr("Include the passages of your files that answers cited?"),
                QMessageBox.StandardButton.Cancel,
                self._dialog_parent,
            )
        )
        box.setInformativeText(
            self.tr(
                "Answers here were given passages of their project's files. The passages are text from those "
                "files; the files' names and pages go into the export either way."
            )
        )
        leave = box.addButton(self.tr("Leave them out"), QMessageBox.ButtonRole.NoRole)
        include = box.addButton(self.tr("Include passages"), QMessageBox.ButtonRole.YesRole)
        leave.setObjectName("leavePassagesOut")
        include.setObjectName("includePassages")
        leave.clicked.connect(lambda: write(False))
        include.clicked.connect(lambda: write(True))
        box.setDefaultButton(leave)
        box.setEscapeButton(QMessageBox.StandardButton.Cancel)
        self._ask(box)

    def _ask_path(self, title: str, name: str, kind: str, chosen: Callable[[Path], None]) -> None:
        """A save dialog proposing `name` in the documents folder (the home folder without one); it does
        not block, and it is kept while open (`export_dialog_open`, also for tests)."""
        documents = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation))
        folder = documents if documents.is_dir() else Path.home()
        suffix = self.tr("Markdown (*.md)") if kind == "md" else self.tr("JSON (*.json)")
        dialog = QFileDialog(self._dialog_parent, title, str(folder / name), suffix)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setDefaultSuffix(kind)
        dialog.fileSelected.connect(lambda path: chosen(Path(path)))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "export_dialog_open", None))
        self.export_dialog_open = dialog
        dialog.open()

    def _write(self, path: Path, text: str, done: str) -> None:
        """Write the export and say `done`, or say why it could not be written (nothing else changes)."""
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or exc
            self.ctx.notifier.show_error(
                self.tr("Could not export to {path}: {reason}.").format(path=path, reason=reason)
            )
            return
        self.ctx.notifier.show_notice(done, cause="export")  # (a report of what was just done: goes when a chat opens)
