"""The window's undoable changes to chats, and their undo: every move, pin, archive, move to the
Trash, folder deletion and message deletion goes through `UndoActions.apply`, which runs the store's
change, keeps its `Undo` on a stack, reloads the list and says what happened in the banner with an
"Undo" link. Ctrl+Z (Chat ▸ Undo, when the focus is not in a text field) and the link undo the last
one; the open chat is shown again when the change touched it. A part of the main window
(`window.undo`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QInputDialog, QLabel, QMessageBox

from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.organise import Organiser, Undo

UNDO_DEPTH = 50  # changes kept to undo, newest last
SWEEP_RETRY_MS = 30_000  # a deletion's sweep held up by another reader is tried again this often


@dataclass(frozen=True)
class Done:
    """One change on the stack: its Undo, the chats it touched, and the chat that was open then."""

    undo: Undo
    chats: frozenset[int]
    was_open: int | None


class UndoActions(QObject):
    def __init__(self, window: Any) -> None:  # (the main window, until it comes off it)
        super().__init__(window)
        self.w = window
        self.stack: list[Done] = []
        self.link = QLabel()  # "Undo" in the banner, while the banner says what the last change did
        self.link.setTextFormat(Qt.TextFormat.RichText)
        self.link.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.link.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.link.setAccessibleName(self.tr("Undo"))
        self.link.setToolTip(self.tr("Undo this change (Ctrl+Z)"))
        self.link.linkActivated.connect(lambda _href: self.undo_last())
        self.link.hide()
        self._shown: Done | None = None  # the change the banner's link undoes

    def attach_banner(self) -> None:
        """Put the link in the banner's row, before its close button (the window has made both)."""
        banner = self.w.banner
        row = banner.layout()
        if isinstance(row, QHBoxLayout):
            row.insertWidget(row.count() - 1, self.link, 0, Qt.AlignmentFlag.AlignTop)
        banner.installEventFilter(self)
        self.link.setText(f'<a href="undo">{self.tr("Undo")}</a>')

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.w.banner and event.type() == QEvent.Type.Hide:
            self.banner_replaced()
        return False

    def banner_replaced(self) -> None:
        """The banner shows something else (or nothing): its link goes."""
        self._shown = None
        self.link.hide()

    # ----- changes
    def apply(self, change: Callable[[], Undo], chats: Iterable[int] = ()) -> Undo | None:
        """Run one undoable store change (`chats`: the chats it touches), keep its Undo, reload the
        list and say what was done, with the Undo link. A refusal is said in the banner; None then."""
        was_open = self.w.controller.conversation_id
        try:
            undo = change()
        except (EmberError, KeyError) as exc:
            self.w.show_error(self._sentence(exc))
            self.w.chats.reload_conversations()  # (all read again: what is there now)
            return None
        done = Done(undo, frozenset(chats), was_open)
        self.stack.append(done)
        del self.stack[:-UNDO_DEPTH]
        self.w.chats.reload_conversations(done.chats)
        self._say(done)
        return undo

    def _say(self, done: Done) -> None:
        self.w.show_notice(done.undo.label, cause="undo")  # (hides the link: a new message; goes with the chat)
        self._shown = done
        self.link.show()

    def undo_last(self) -> bool:
        """Undo the newest change; False when there is none (or it can no longer be undone: said)."""
        if not self.stack:
            self.w.show_notice(self.tr("Nothing to undo."))
            return False
        done = self.stack.pop()

        def act() -> None:
            try:
                self.w.store.organise.undo(done.undo)
            except (EmberError, KeyError) as exc:
                self.w.show_error(self._sentence(exc))
                return
            self._reload(done)  # (may open the chat again: the sentence comes after, or it would go with it)
            self.w.show_notice(self.tr("Undone: {what}").format(what=done.undo.label), cause="undo")

        self.w.controller.after_stop(act)  # (an answer streaming into a chat the undo touches stops)
        return True

    def _reload(self, done: Done) -> None:
        """The list again; the chat that was open when the change was made is shown again if the
        change touched it (a chat moved back from the Trash opens again, a message comes back)."""
        self.w.chats.reload_conversations(done.chats)
        open_now = self.w.controller.conversation_id
        if done.was_open is not None and done.was_open in done.chats and open_now in (None, done.was_open):
            if self._listed(done.was_open):
                self.w.chats.open_conversation(done.was_open)
                self.w.controller.refresh()
        elif open_now is not None and open_now in done.chats:
            self.w.controller.refresh()

    def _listed(self, cid: int) -> bool:
        """Whether the chat is in the list (it exists and is not in the Trash)."""
        try:
            return self.w.store.conversation(cid).deleted_at is None
        except KeyError:
            return False

    def _sentence(self, exc: BaseException) -> str:
        if isinstance(exc, KeyError):
            return self.tr("That chat no longer exists; the list is shown again as it is now.")
        return str(exc)


class ChatOrganise(QObject):
    """What the chat list does to chats and folders (`window.chats.organise`): each change a user may
    regret goes through `UndoActions.apply`; deleting for good asks first."""

    def __init__(self, window: Any) -> None:  # (the main window, until it comes off it)
        super().__init__(window)
        self.w = window

    @property
    def store(self) -> Organiser:
        return self.w.store.organise

    def _apply(self, change: Callable[[], Undo], ids: Iterable[int]) -> Undo | None:
        return self.w.undo.apply(change, ids)

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
            if self._apply(change, ids) is not None and self.w.controller.conversation_id in ids:
                self.w.controller.conversation_id = None
                self.w.compose.end_edit()  # (an edit of one of its messages: the box gets its draft back)
                self.w.controller.refresh()
                self.w.update_welcome()

        if self.w.controller.conversation_id in ids:
            self.w.controller.after_stop(act)
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
        self.w.chats.reload_conversations(ids)
        self.w.show_notice(self.tr("Restored {n} from the Trash.").format(n=_chats(n)))

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
            self.w.show_notice(self.tr("The Trash is empty."))
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
                self.w.undo.stack.clear()  # what it would reverse is gone for good
                self.w.undo.banner_replaced()
                self.w.compare.forget(self.tr("The comparison stopped: all chats were deleted."))
                if self.w.controller.conversation_id is not None:
                    self.w.side.metrics.reset()
                self.w.controller.conversation_id = None
                self.w.compose.end_edit()
                self.w.controller.refresh()
                self.w.update_welcome()
                self._for_good(
                    self.store.delete_all_chats,
                    None,  # (every chat listed changed)
                    lambda n: self.tr("All chats were deleted for good: {n}.").format(n=_chats(n)),
                )

            self.w.controller.after_stop(act)
            return
        n = len(self.w.store.conversations()) + len(self.w.store.conversations(archived=True))
        n += len(self.store.trashed())
        if not n:
            self.w.show_notice(self.tr("There are no chats to delete."))
            return
        text = self.tr(
            "Delete all {n}, the archived ones and the Trash included, for good? This cannot be undone. "
            "The saved conversation caches are cleared too. Backups made earlier still hold them: Settings ▸ "
            "Backups… ▸ Open folder shows them."
        ).format(n=_chats(n))
        self._question(self.tr("Delete all chats"), text, self.tr("Delete all chats"), lambda: self.delete_all(True))

    def _for_good(self, delete: Callable[[], int], ids: list[int] | None, said: Callable[[int], str]) -> None:
        """A deletion for good on the window's task runner: it rewrites the database file (secure delete,
        VACUUM: most of a second for a few tens of MB), which the GUI thread must not wait on. The model's
        conversation caches go with it (they hold the chats' tokens): the saved ones, in memory and on disk,
        there too, first (a cache being written then is dropped, not left behind), and the live sequences
        on the engine thread once its running answers end (EngineService.forget_conversations)."""
        service = self.w.bridge.service

        def delete_and_forget() -> int:
            service.forget_conversations()
            return delete()

        def done(n: int) -> None:
            self.w.conversations.setEnabled(True)
            self.w.chats.reload_conversations(ids)
            self.w.show_notice(said(n))
            self._finish_sweep_later()

        def failed(reason: str) -> None:
            self.w.conversations.setEnabled(True)
            self.w.chats.reload_conversations(ids)
            self.w.show_error(self.tr("The chats could not be deleted for good: {reason}").format(reason=reason))

        self.w.show_notice(self.tr("Deleting for good…"))
        self.w.conversations.setEnabled(False)  # its rows may be the ones going: no click until they have
        self.w.tasks.run(delete_and_forget, done, failed)

    def _finish_sweep_later(self, tries: int = 10) -> None:
        """While another reader (a backup being written, `ember-chat chats` in a terminal) held up the sweep,
        deleted words may still be in the WAL: try again every 30 s until it is done (or at close)."""
        if tries and self.store.sweep_pending:
            QTimer.singleShot(
                SWEEP_RETRY_MS,
                self,
                lambda: self.w.tasks.run(
                    self.store.finish_sweep, lambda finished: finished or self._finish_sweep_later(tries - 1)
                ),
            )

    def _question(self, title: str, text: str, button: str, yes: Callable[[], None]) -> None:
        box = QMessageBox(QMessageBox.Icon.Question, title, text, QMessageBox.StandardButton.Cancel, self.w)
        box.addButton(button, QMessageBox.ButtonRole.DestructiveRole).clicked.connect(yes)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self.w.chats.ask(box)

    # ----- folders
    def new_folder(self, parent_id: int | None = None, then_move: Iterable[int] = (), name: str | None = None) -> None:
        """Make a folder (inside `parent_id`), named `name` or what the user types; `then_move` chats
        go into it."""
        ids = list(then_move)
        if name is None:
            self._ask_name(self.tr("New folder"), "", lambda text: self.new_folder(parent_id, ids, text))
            return
        try:
            folder = self.store.create_folder(name, parent_id)
        except EmberError as exc:
            self.w.show_error(str(exc))
            return
        if ids:
            self.move(ids, folder.id)
        else:
            self.w.chats.reload_conversations([])

    def rename_folder(self, folder_id: int, name: str | None = None) -> None:
        if name is None:
            old = self.store.folder(folder_id).name
            self._ask_name(self.tr("Rename folder"), old, lambda text: self.rename_folder(folder_id, text))
            return
        try:
            self.store.rename_folder(folder_id, name)
        except EmberError as exc:
            self.w.show_error(str(exc))
        self.w.chats.reload_conversations([])

    def delete_folder(self, folder_id: int) -> None:
        """The folder goes, its chats (and its subfolders') to the Trash: undoable, so no question."""
        inside = {f.id for f in self.store.folders() if f.id == folder_id or f.parent_id == folder_id}
        listed = [*self.w.store.conversations(), *self.w.store.conversations(archived=True)]  # (both go)
        ids = [c.id for c in listed if c.folder_id in inside]
        self._closing(ids, lambda: self.store.delete_folder(folder_id))

    def set_collapsed(self, folder_id: int, collapsed: bool) -> None:
        try:
            self.store.set_collapsed(folder_id, collapsed)
        except (EmberError, KeyError):
            self.w.chats.reload_conversations()

    def _ask_name(self, title: str, value: str, done: Callable[[str], None]) -> None:
        dialog = QInputDialog(self.w)
        dialog.setWindowTitle(title)
        dialog.setLabelText(self.tr("Name:"))
        dialog.setTextValue(value)
        dialog.textValueSelected.connect(lambda text: done(text) if text.strip() else None)
        self.w.chats.ask(dialog)

    # ----- messages
    def delete_message(self, message_id: int) -> None:
        """A message and what follows it in its branch go (undoable); the answer streaming stops first."""

        def act() -> None:
            try:
                cid = self.w.store.message(message_id).conversation_id
            except KeyError:
                return
            undo = self._apply(lambda: self.store.delete_messages(message_id), [cid])
            if undo is not None and self.w.controller.conversation_id == cid:
                self.w.compose.end_edit()
                self.w.controller.refresh()

        self.w.controller.after_stop(act)


def _chats(n: int) -> str:
    return (
        QCoreApplication.translate("ChatOrganise", "1 chat")
        if n == 1
        else QCoreApplication.translate("ChatOrganise", "{n} chats").format(n=n)
    )
