"""What the chat list does to chats and folders (`window.chats.organise`): move, pin, archive, put in
the Trash and restore, folders made, renamed and deleted, a message and what follows it deleted. Each
change a user may regret goes through the undo stack (undo.py, `UndoActions.apply`); deleting for good
asks first and runs on the task runner. Built by the chat list's actions from the AppContext, the undo
stack, the chat shown, the list widget (no click on rows going away) and the way its questions are
asked; what it does to the rest of the window is said by its signals, which the composition connects."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal
from PySide6.QtWidgets import QDialog, QMessageBox, QWidget

from ember_chat.app.chat_list.shown_chat import ShownChat
from ember_chat.app.chat_list.undo import UndoActions
from ember_chat.app.chat_list.view import ConversationList
from ember_chat.app.context import AppContext
from ember_chat.app.qt.name_dialog import name_dialog
from ember_chat.app.qt.plain_text import plain_message
from ember_chat.engine.errors import EmberError
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.organise import Organiser, Undo

SWEEP_RETRY_MS = 30_000  # a deletion's sweep held up by another reader is tried again this often


class ChatOrganise(QObject):
    switching = Signal()  # the open chat closes: the side panel's "Current answer" was its
    edit_ends = Signal()  # an edit of one of the open chat's messages ends (the box gets its draft back)
    shown_changed = Signal()  # the open chat closed: the window's centre may show another page
    deleting_all = Signal(str)  # every chat goes for good: a comparison running stops, saying this

    def __init__(
        self,
        ctx: AppContext,
        undo: UndoActions,
        chat: ShownChat,
        conversations: ConversationList,
        *,
        reload: Callable[[Iterable[int] | None], None],
        ask: Callable[[QDialog], None],
        dialog_parent: QWidget,
        parent: QObject | None = None,
    ) -> None:
        """`reload`: the list read again (only the chats named; None: all); `ask`: a question shown
        without blocking and kept while open (the chat list's actions keep it)."""
        super().__init__(parent)
        self.ctx = ctx
        self.undo = undo
        self.chat = chat
        self.conversations = conversations
        self._reload = reload
        self._ask = ask
        self._dialog_parent = dialog_parent

    @property
    def store(self) -> Organiser:
        return self.ctx.store.organise

    def _apply(self, change: Callable[[], Undo], ids: Iterable[int]) -> Undo | None:
        return self.undo.apply(change, ids)

    # ----- chats
    def trash(self, ids: Iterable[int]) -> None:
        """Move chats to the Trash, no question (Ctrl+Z brings them back)."""
        ids = list(ids)
        if ids:
            self._closing(ids, lambda: self.store.trash_chats(ids))

    def _closing(self, ids: list[int], change: Callable[[], Undo]) -> None:
        """A change that takes `ids` out of the list: an answer streaming into the open chat, when it is
        one of them, stops first, and the open chat closes."""

        def act() -> None:
            if self._apply(change, ids) is not None and self.chat.conversation_id in ids:
                self.switching.emit()  # "Current answer" (and Why this answer) were the closed chat's
                self.chat.conversation_id = None
                self.edit_ends.emit()  # (an edit of one of its messages: the box gets its draft back)
                self.chat.refresh()
                self.shown_changed.emit()

        if self.chat.conversation_id in ids:
            self.chat.after_stop(act)
        else:
            act()

    def move(self, ids: Iterable[int], folder_id: int | None) -> None:
        ids = list(ids)
        if ids:
            self._apply(lambda: self.store.move_chats(ids, folder_id), ids)

    def archive(self, ids: Iterable[int], archived: bool = True) -> None:
        ids = list(ids)
        if ids:
            self._apply(lambda: self.store.archive_chats(ids, archived), ids)

    def pin(self, ids: Iterable[int], pinned: bool) -> None:
        ids = list(ids)
        if ids:
            self._apply(lambda: self.store.set_pinned(ids, pinned), ids)

    def restore(self, ids: Iterable[int]) -> None:
        """Take chats out of the Trash (back where they were)."""
        ids = list(ids)
        n = self.store.restore_chats(ids)
        self._reload(ids)
        self.ctx.notifier.show_notice(self.tr("Restored {n} from the Trash.").format(n=_chats(n)))

    def purge(self, ids: Iterable[int], confirmed: bool = False) -> None:
        """Delete chats in the Trash for good, once the user has said yes (or `confirmed`)."""
        ids = list(ids)
        if not ids:
            return
        if confirmed:
            self._for_good(
                lambda: self.store.purge_chats(ids), ids, lambda n: self.tr("Deleted {n} for good.").format(n=_chats(n))
            )
            return
        text = self.tr(
            "Delete {n} for good? This cannot be undone. All the saved conversation caches are cleared too, "
            "your other chats' included (a cache can hold several chats' words; a long chat is read again "
            "once). Backups made earlier still hold {them}: Settings ▸ "
            "Backups… ▸ Open folder shows them, to delete if {them} must be gone."
        ).format(n=_chats(len(ids)), them=self.tr("it") if len(ids) == 1 else self.tr("them"))
        self._question(self.tr("Delete for good"), text, self.tr("Delete for good"), lambda: self.purge(ids, True))

    def empty_trash(self, confirmed: bool = False) -> None:
        """Delete every chat in the Trash for good, once the user has said yes (or `confirmed`)."""
        if confirmed:
            self._for_good(
                self.store.empty_trash,
                [],  # (none of the chats listed changed)
                lambda n: self.tr("Emptied the Trash: {n} deleted for good.").format(n=_chats(n)),
            )
            return
        n = len(self.store.trashed())
        if not n:
            self.ctx.notifier.show_notice(self.tr("The Trash is empty."))
            return
        text = self.tr(
            "Delete the {n} in the Trash for good? This cannot be undone. All the saved conversation caches are "
            "cleared too, your other chats' included (a cache can hold several chats' words; a long chat is "
            "read again once). Backups made earlier still hold "
            "{them}: Settings ▸ Backups… ▸ Open folder shows them, to delete if {them} must be gone."
        ).format(n=_chats(n), them=self.tr("it") if n == 1 else self.tr("them"))
        self._question(self.tr("Empty Trash"), text, self.tr("Empty Trash"), lambda: self.empty_trash(True))

    def delete_all(self, confirmed: bool = False) -> None:
        """Chat ▸ Delete all chats…: every chat, the Trash included, deleted for good once the user has said
        yes (or `confirmed`); an answer streaming stops first and the open chat closes."""
        if confirmed:

            def act() -> None:
                self.undo.stack.clear()  # what it would reverse is gone for good
                self.undo.banner_replaced()
                self.deleting_all.emit(self.tr("The comparison stopped: all chats were deleted."))
                if self.chat.conversation_id is not None:
                    self.switching.emit()
                self.chat.conversation_id = None
                self.edit_ends.emit()
                self.chat.refresh()
                self.shown_changed.emit()
                self._for_good(
                    self.store.delete_all_chats,
                    None,  # (every chat listed changed)
                    lambda n: self.tr("All chats were deleted for good: {n}.").format(n=_chats(n)),
                )

            self.chat.after_stop(act)
            return
        n = len(self.ctx.store.conversations()) + len(self.ctx.store.conversations(archived=True))
        n += len(self.store.trashed())
        if not n:
            self.ctx.notifier.show_notice(self.tr("There are no chats to delete."))
            return
        text = self.tr(
            "Delete all {n}, the archived ones and the Trash included, for good? This cannot be undone. "
            "The saved conversation caches are cleared too. Backups made earlier still hold them: Settings ▸ "
            "Backups… ▸ Open folder shows them."
        ).format(n=_chats(n))
        self._question(self.tr("Delete all chats"), text, self.tr("Delete all chats"), lambda: self.delete_all(True))

    def _for_good(self, delete: Callable[[], int], ids: list[int] | None, said: Callable[[int], str]) -> None:
        """A deletion for good on the task runner: it rewrites the database file (secure delete,
        VACUUM: most of a second for a few tens of MB), which the GUI thread must not wait on. The model's
        conversation caches go with it (they hold the chats' tokens): the saved ones, in memory and on disk,
        there too, first (a cache being written then is dropped, not left behind), and the live sequences
        on the engine thread once its running answers end (EngineService.forget_conversations)."""
        service = self.ctx.bridge.service

        def delete_and_forget() -> int:
            service.forget_conversations()
            return delete()

        def done(n: int) -> None:
            self.conversations.setEnabled(True)
            self._reload(ids)
            self.ctx.notifier.show_notice(said(n))
            self._finish_sweep_later()

        def failed(reason: str) -> None:
            self.conversations.setEnabled(True)
            self._reload(ids)
            self.ctx.notifier.show_error(
                self.tr("The chats could not be deleted for good: {reason}").format(reason=reason)
            )

        self.ctx.notifier.show_notice(self.tr("Deleting for good…"))
        self.conversations.setEnabled(False)  # its rows may be the ones going: no click until they have
        self.ctx.tasks.run(delete_and_forget, done, failed)

    def _finish_sweep_later(self, tries: int = 10) -> None:
        """While another reader (a backup being written, `ember-chat chats` in a terminal) held up the sweep,
        deleted words may still be in the WAL: try again every 30 s until it is done (or at close)."""
        if tries and self.store.sweep_pending:
            QTimer.singleShot(
                SWEEP_RETRY_MS,
                self,
                lambda: self.ctx.tasks.run(
                    self.store.finish_sweep, lambda finished: finished or self._finish_sweep_later(tries - 1)
                ),
            )

    def _question(self, title: str, text: str, button: str, yes: Callable[[], None]) -> None:
        box = plain_message(
            QMessageBox(QMessageBox.Icon.Question, title, text, QMessageBox.StandardButton.Cancel, self._dialog_parent)
        )
        box.addButton(button, QMessageBox.ButtonRole.DestructiveRole).clicked.connect(yes)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self._ask(box)

    # ----- folders
    def new_folder(self, parent_id: int | None = None, then_move: Iterable[int] = (), name: str | None = None) -> None:
        """Make a folder (inside `parent_id`), named `name` or what the user types; `then_move` chats
        go into it."""
        ids = list(then_move)
        if name is None:
            self._ask_name(self.tr("New folder"), "", lambda text: self._new_folder(parent_id, ids, text))
            return
        refused = self._new_folder(parent_id, ids, name)
        if refused:
            self.ctx.notifier.show_error(refused)

    def _new_folder(self, parent_id: int | None, ids: list[int], name: str) -> str | None:
        """Made (None), or why not (the dialog asking stays open, saying it)."""
        try:
            folder = self.store.create_folder(name, parent_id)
        except EmberError as exc:
            if parent_id is not None and self._gone(parent_id):  # (deleted while the dialog was open)
                self.ctx.notifier.show_error(self.tr("The folder to make it in is gone: no folder was made."))
                return None  # (the dialog closes: no name would do)
            return str(exc)
        if ids:
            self.move(ids, folder.id)
        else:
            self._reload([])
        return None

    def rename_folder(self, folder_id: int, name: str | None = None) -> None:
        """Rename a folder, or a project (its name kept apart from the other projects'): to `name`, else to
        what the user types in a dialog titled for what it is, which stays open saying why a name is refused."""
        if name is None:
            old = self.store.folder(folder_id).name
            project = ProjectStore(self.ctx.store).is_project(folder_id)
            title = self.tr("Rename project") if project else self.tr("Rename folder")
            self._ask_name(title, old, lambda text: self._rename_folder(folder_id, text))
            return
        refused = self._rename_folder(folder_id, name)
        if refused:
            self.ctx.notifier.show_error(refused)

    def _rename_folder(self, folder_id: int, name: str) -> str | None:
        """Renamed (None), or why not."""
        try:
            projects = ProjectStore(self.ctx.store)
            if projects.is_project(folder_id):
                projects.update(folder_id, name=name)  # (no two projects with one name: the CLI names them)
            else:
                self.store.rename_folder(folder_id, name)
        except EmberError as exc:
            if self._gone(folder_id):  # (deleted while the dialog was open)
                self.ctx.notifier.show_error(self.tr("That folder is gone: it was deleted, so it was not renamed."))
                return None  # (the dialog closes: no name would do)
            return str(exc)
        self._reload([])
        return None

    def delete_folder(self, folder_id: int, confirmed: bool = False) -> None:
        """The folder goes, its chats (and its subfolders') to the Trash: undoable, so no question — but for
        a project (its instructions, defaults and knowledge list go with it, until undone): asked first."""
        if not confirmed and ProjectStore(self.ctx.store).is_project(folder_id):
            self._ask_delete_project(folder_id)
            return
        inside = {f.id for f in self.store.folders() if f.id == folder_id or f.parent_id == folder_id}
        listed = [*self.ctx.store.conversations(), *self.ctx.store.conversations(archived=True)]  # (both go)
        ids = [c.id for c in listed if c.folder_id in inside]
        self._closing(ids, lambda: self.store.delete_folder(folder_id))

    def _ask_delete_project(self, folder_id: int) -> None:
        inside = {f.id for f in self.store.folders() if f.id == folder_id or f.parent_id == folder_id}
        listed = [*self.ctx.store.conversations(), *self.ctx.store.conversations(archived=True)]
        n = sum(1 for c in listed if c.folder_id in inside)
        name = self.store.folder(folder_id).name
        if n == 0:  # (not "Its 0 chats go to the Trash")
            text = self.tr(
                "Delete the project “{name}”? It has no chats; its instructions, defaults and list of knowledge "
                "go (Undo, or Ctrl+Z, brings them back). The files on disk are not touched."
            ).format(name=name)
        else:
            go = self.tr("Its chat goes") if n == 1 else self.tr("Its {n} go").format(n=_chats(n))
            text = self.tr(
                "Delete the project “{name}”? {chats_go} to the Trash, and its instructions, defaults and list of "
                "knowledge go with it (Undo, or Ctrl+Z, brings them back). The files on disk are not touched."
            ).format(name=name, chats_go=go)
        self._question(
            self.tr("Delete project"), text, self.tr("Delete project"), lambda: self.delete_folder(folder_id, True)
        )

    def set_collapsed(self, folder_id: int, collapsed: bool) -> None:
        try:
            self.store.set_collapsed(folder_id, collapsed)
        except (EmberError, KeyError):
            self._reload(None)

    def _gone(self, folder_id: int) -> bool:
        """The folder is no longer there (the list is shown again as it is now)."""
        try:
            self.store.folder(folder_id)
        except EmberError:
            self._reload([])
            return True
        return False

    def _ask_name(self, title: str, value: str, done: Callable[[str], str | None]) -> None:
        self._ask(name_dialog(self._dialog_parent, title, self.tr("Name:"), value, done))

    # ----- messages
    def delete_message(self, message_id: int) -> None:
        """A message and what follows it in its branch go (undoable); the answer streaming stops first."""

        def act() -> None:
            try:
                cid = self.ctx.store.message(message_id).conversation_id
            except KeyError:
                return
            undo = self._apply(lambda: self.store.delete_messages(message_id), [cid])
            if undo is not None and self.chat.conversation_id == cid:
                self.edit_ends.emit()
                self.chat.refresh()

        self.chat.after_stop(act)


def _chats(n: int) -> str:
    return (
        QCoreApplication.translate("ChatOrganise", "1 chat")
        if n == 1
        else QCoreApplication.translate("ChatOrganise", "{n} chats").format(n=n)
    )
