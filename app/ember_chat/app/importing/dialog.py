"""File ▸ Import chats…: pick a ChatGPT export (conversations.json) or an Ember chat export, import it on
a worker thread (the window's TaskRunner) with a progress dialog that can cancel, then reload the chat
list and say what came in (and what did not) in the banner: where the chats went (a chat archived when
it was exported comes in archived: "into Archived") and which repeat a chat already here ("a copy of a
chat you already have"), what Ember refused of what they carried (tool permissions, settings out of
range), with *Open* for one chat (in the Archived list if it went there) or *Show Archived* for
several. A file that names a project (a project's export, or chats exported from one) says which project
the chats went into: made (its knowledge paths waiting to be confirmed, *Project settings* to do it) or
one of that name here already that they joined, left as it was; a project's export with no chats makes
the project alone. A file that cannot be imported says why there and writes nothing
(engine/storage/importing.py is all or nothing).

The worker only writes two numbers (chats done, chats in the file); a GUI-thread timer shows them.

`ImportChats` is built from the context (the chat store, the settings' attachment limits, the task
runner, the notifier), the attachment store imported files go into, the widget its dialogs stay over,
and the banner's `set_action` (a button beside the notice); the chat list follows through its signals
(`chats_added`, `reveal`, `show_view`, `open_project`), connected in the composition."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, Qt, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QProgressDialog, QWidget

from ember_chat.app.context import AppContext
from ember_chat.engine.attachments import Limits
from ember_chat.engine.attachments.imported import AttachmentImporter
from ember_chat.engine.attachments.store import AttachmentStore
from ember_chat.engine.storage.importing import (
    ImportedChat,
    ImportedProject,
    ImportReport,
    import_chats,
    setting_names,
)

POLL_MS = 50


class ImportChats(QObject):
    """File ▸ Import chats… (one importer per window: `choose` opens the file dialog)."""

    progressed = Signal(int, int)  # chats written, chats in the file (GUI thread)
    finished = Signal(object)  # ImportReport
    failed = Signal(str)  # the sentence shown (a cancel too)
    chats_added = Signal()  # the chat list reads the store again
    reveal = Signal(int)  # the banner's Open: this chat, where the list keeps it (Archived, maybe)
    show_view = Signal(str)  # the banner's Show Archived: the list shows this view ("archived")
    open_project = Signal(int)  # the banner's Project settings: a project the import made, its knowledge waiting

    def __init__(
        self,
        ctx: AppContext,
        attachments: AttachmentStore,
        parent: QWidget,
        set_action: Callable[[str, Callable[[], None], str], None],
    ) -> None:
        """`attachments`: where imported files go (they pass the checks attached ones do); `parent`: what
        the file and progress dialogs stay over; `set_action`: the banner's button beside the notice."""
        super().__init__(parent)
        self.ctx = ctx
        self.attachments = attachments
        self.dialog_parent = parent
        self._set_action = set_action
        self.file_dialog: QFileDialog | None = None
        self.progress: QProgressDialog | None = None
        self._cancel: threading.Event | None = None
        self._counts = (0, 0)  # written by the worker, read by the timer
        self._shown = (-1, -1)
        self._name = ""
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._show_progress)

    @property
    def running(self) -> bool:
        return self._cancel is not None

    def choose(self) -> None:
        """A file dialog for the export (it does not block: an answer keeps streaming)."""
        if self.running:
            self.ctx.notifier.show_notice(self.tr("An import is already running; wait for it or cancel it first."))
            return
        documents = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation))
        folder = documents if documents.is_dir() else Path.home()
        dialog = QFileDialog(
            self.dialog_parent,
            self.tr("Import chats"),
            str(folder),
            self.tr("Chat exports (*.json);;All files (*)"),
        )
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda path: self.start(Path(path)))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "file_dialog", None))
        self.file_dialog = dialog
        dialog.open()

    def start(self, path: Path) -> None:
        """Import `path` off the GUI thread, showing progress."""
        if self.running:
            return
        cancel = threading.Event()
        self._cancel = cancel
        self._counts = (0, 0)
        self._shown = (-1, -1)
        self._name = path.name
        progress = QProgressDialog(
            self.tr("Reading {name}…").format(name=path.name),
            self.tr("Cancel"),
            0,
            0,
            self.dialog_parent,
        )
        progress.setWindowTitle(self.tr("Import chats"))
        progress.setWindowModality(Qt.WindowModality.WindowModal)
        progress.setMinimumDuration(0)
        progress.setAutoClose(False)
        progress.setAutoReset(False)
        progress.canceled.connect(self._cancelled)
        progress.setMinimumWidth(420)
        self.progress = progress
        progress.show()
        store, atts = self.ctx.store, self.attachments
        limits = Limits.from_settings(self.ctx.settings)  # (the size, time and memory limits, as attached)

        def run() -> ImportReport:
            return import_chats(store, path, self._count, cancel, AttachmentImporter(atts, limits))

        self.ctx.tasks.run(run, self._done, self._failed, cancel=cancel.set)
        self._timer.start()

    def _count(self, done: int, total: int) -> None:
        """On the worker: only a tuple is replaced (read by the GUI thread's timer)."""
        self._counts = (done, total)

    def _cancelled(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
        if self.progress is not None:
            self.progress.setLabelText(self.tr("Cancelling…"))

    def _show_progress(self) -> None:
        done, total = self._counts
        progress = self.progress
        if (done, total) == self._shown or progress is None:
            return
        self._shown = (done, total)
        cancelling = self._cancel is not None and self._cancel.is_set()
        if not cancelling:
            progress.setMaximum(total)
            progress.setLabelText(
                self.tr("Importing {name}: {done:,} of {total:,} chats").format(name=self._name, done=done, total=total)
            )
        self.progressed.emit(done, total)
        if not cancelling:
            # last: a window-modal progress dialog processes events in setValue, where the import may end
            # (its dialog closed, `self.progress` None); nothing here touches it after
            progress.setValue(done)

    def _end(self) -> None:
        self._timer.stop()
        if self._counts != self._shown:  # the last count, said while the dialog still shows
            self._shown = self._counts
            self.progressed.emit(*self._counts)
        self._cancel = None
        if self.progress is not None:
            self.progress.canceled.disconnect(self._cancelled)
            self.progress.close()
            self.progress.deleteLater()
            self.progress = None

    def _done(self, report: ImportReport) -> None:
        self._end()
        self.chats_added.emit()
        said = self._said(report)
        where = self._where(report.imported)
        if where:
            said += " " + where
        refused = self._refused(report)
        if refused:
            said += " " + refused
        if report.skipped:
            said += " " + self.tr("Not brought along: {what}.").format(what="; ".join(report.skipped))
        self.ctx.notifier.show_notice(said, cause="import")  # (about what the list shows now: goes when a chat opens)
        waiting = [p for p in report.into if p.made and p.folders + p.files]
        if len(waiting) == 1:  # (its settings open on Knowledge, where each path waits for a Confirm)
            (project,) = waiting
            self._set_action(
                self.tr("Project settings"),
                lambda: self.open_project.emit(project.folder_id),
                self.tr("The knowledge of “{project}”, to confirm").format(project=project.name),
            )
        elif len(report.imported) == 1:
            (chat,) = report.imported
            self._set_action(
                self.tr("Open"),
                lambda: self.reveal.emit(chat.id),
                self.tr("Open “{title}”").format(title=chat.title),
            )
        elif report.archived:
            self._set_action(
                self.tr("Show Archived"),
                lambda: self.show_view.emit("archived"),
                self.tr("The archived chats, where the chats archived in the file went"),
            )
        self.finished.emit(report)

    def _said(self, report: ImportReport) -> str:
        """What came in: the chats (their messages), and the project they went into when the file names
        one (a project's export, or chats exported from a project): made, with its knowledge waiting to be
        confirmed, or one here already that they joined, left as it was."""
        into, n = report.into, report.chats
        values = {"chats": n, "messages": report.messages, "name": self._name}
        if len(into) == 1 and into[0].chats == n:  # (all of them in one project)
            p = into[0]
            values["project"] = p.name
            if p.made and not n:
                said = self.tr("Imported the project “{project}” (no chats yet) from {name}")
            elif not n:
                return self.tr(
                    "The project “{project}” in {name} is here already: nothing was imported, and yours was left "
                    "as it was."
                ).format(**values)
            elif p.made and n == 1:
                said = self.tr("Imported 1 chat ({messages:,} messages) from {name} into the new project “{project}”")
            elif p.made:
                said = self.tr(
                    "Imported {chats:,} chats ({messages:,} messages) from {name} into the new project “{project}”"
                )
            elif n == 1:
                return self.tr(
                    "Imported 1 chat ({messages:,} messages) from {name}; it joined your {place}, which was left as "
                    "it was."
                ).format(place=self._place(p), **values)
            else:
                return self.tr(
                    "Imported {chats:,} chats ({messages:,} messages) from {name}; they joined your {place}, which "
                    "was left as it was."
                ).format(place=self._place(p), **values)
            return said.format(**values) + self._waiting(p) + "."
        if n == 1:
            said = self.tr("Imported 1 chat ({messages:,} messages) from {name}.").format(**values)
        else:
            said = self.tr("Imported {chats:,} chats ({messages:,} messages) from {name}.").format(**values)
        for p in into:  # (chats of several projects, or some in none)
            if p.made and not p.chats:  # (the file's project block, its chats in none: a crafted file)
                made = self.tr("It also made the new project “{project}”, with no chats in it").format(project=p.name)
                said += " " + made + self._waiting(p) + "."
            elif not p.chats:
                said += " " + self.tr("The {place} the file names is here already and was left as it was.").format(
                    place=self._place(p)
                )
            elif p.made:
                went = self.tr("{n:,} of them went into the new project “{project}”").format(n=p.chats, project=p.name)
                said += " " + went + self._waiting(p) + "."
            else:
                said += " " + self.tr("{n:,} of them joined your {place}, which was left as it was.").format(
                    n=p.chats, place=self._place(p)
                )
        return said

    def _place(self, p: ImportedProject) -> str:
        if p.project:
            return self.tr("project “{project}”").format(project=p.name)
        return self.tr("folder “{project}”").format(project=p.name)

    def _waiting(self, p: ImportedProject) -> str:
        """ "; its 2 folders wait to be confirmed in Project settings ▸ Knowledge" for a project the import
        made with knowledge paths (paused: another computer named them); one is said without its count ("its
        folder waits", "its folder and 2 files wait")."""
        if not p.made or not p.folders + p.files:
            return ""
        what = []
        if p.folders:
            what.append(self.tr("folder") if p.folders == 1 else self.tr("{n:,} folders").format(n=p.folders))
        if p.files:
            what.append(self.tr("file") if p.files == 1 else self.tr("{n:,} files").format(n=p.files))
        both = self.tr("{first} and {second}").format(first=what[0], second=what[1]) if len(what) == 2 else what[0]
        if p.folders + p.files == 1:
            return self.tr("; its {what} waits to be confirmed in Project settings ▸ Knowledge").format(what=both)
        return self.tr("; its {what} wait to be confirmed in Project settings ▸ Knowledge").format(what=both)

    def _where(self, chats: tuple[ImportedChat, ...]) -> str:
        """Where the chats went when that is not simply the chat list, and which are copies."""
        archived = [c for c in chats if c.archived]
        copies = [c for c in chats if c.copy_of is not None]
        parts: list[str] = []
        if len(chats) == 1 and archived:
            parts.append(self.tr("It went into Archived: it was archived when it was exported."))
        elif archived:
            parts.append(
                self.tr("{n:,} of them went into Archived: they were archived when they were exported.").format(
                    n=len(archived)
                )
            )
        if len(chats) == 1 and copies:
            parts.append(self.tr("It is a copy of a chat you already have."))
        elif len(copies) == 1:
            parts.append(self.tr("“{title}” is a copy of a chat you already have.").format(title=copies[0].title))
        elif copies:
            parts.append(self.tr("{n:,} of them are copies of chats you already have.").format(n=len(copies)))
        return " ".join(parts)

    def _refused(self, report: ImportReport) -> str:
        """What Ember refused of what the chats carried, said plainly: a file's "always allow" grants
        would run tools with no question, so they never come in (the user allows tools again), and
        settings Ember does not know, of the wrong kind or out of range are left out for the defaults."""
        refused, one = report.refused, len(report.imported) == 1
        parts: list[str] = []
        if refused.grants_chats and one:
            parts.append(
                self.tr("Its tool permissions were not imported: allow tools again in the chat if you trust it.")
            )
        elif refused.grants_chats:
            parts.append(
                self.tr(
                    "The tool permissions of {n:,} of them were not imported: allow tools again in a chat if you "
                    "trust it."
                ).format(n=refused.grants_chats)
            )
        if refused.settings:
            names = setting_names(refused.setting_names)
            if refused.settings == 1:
                text = self.tr(
                    "1 setting Ember does not know or could not use was left out: the chat uses its default ({names})."
                )
            elif one:
                text = self.tr(
                    "{n:,} settings Ember does not know or could not use were left out: the chat uses the defaults "
                    "({names})."
                )
            else:
                text = self.tr(
                    "{n:,} settings Ember does not know or could not use, in {chats:,} of them, were left out: "
                    "those chats use the defaults ({names})."
                )
            parts.append(text.format(n=refused.settings, chats=refused.settings_chats, names=names))
        return " ".join(parts)

    def _failed(self, message: str) -> None:
        cancelled = self._cancel is not None and self._cancel.is_set()
        self._end()
        if cancelled:
            self.ctx.notifier.show_notice(message)
        else:
            self.ctx.notifier.show_error(message)
        self.failed.emit(message)


__all__ = ["ImportChats"]
