"""The window's undoable changes to chats, and their undo: every move, pin, archive, move to the
Trash, folder deletion and message deletion goes through `UndoActions.apply`, which runs the store's
change, keeps its `Undo` on a stack, reloads the list and says what happened in the banner with an
"Undo" link. Ctrl+Z (Chat ▸ Undo, when the focus is not in a text field) and the link undo the last
one; the open chat is shown again when the change touched it (`window.undo`).

The stack belongs to the chat list, not the shell: it holds only the chat store's organising changes
(`Organiser`'s Undo records: chats moved, pinned, archived, put in the Trash, folders and messages
deleted), and undoing one reloads the list and may open a chat again; a text field's Ctrl+Z and every
other feature keep their own. The shell only hosts its link in the banner (`attach_banner`) and drops
the stack when the chats it would reverse are gone (a backup restored). Built from the AppContext and
the chat shown; the list it reloads and the chat it opens again are its `reload` and `reopen`
signals, which the chat list's actions connect."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from ember_chat.app.chat_list.shown_chat import ShownChat
from ember_chat.app.context import AppContext
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.organise import Undo

UNDO_DEPTH = 50  # changes kept to undo, newest last


@dataclass(frozen=True)
class Done:
    """One change on the stack: its Undo, the chats it touched, and the chat that was open then."""

    undo: Undo
    chats: frozenset[int]
    was_open: int | None


class UndoActions(QObject):
    reload = Signal(object)  # the chats a change touched (ids), or None: the list read whole again
    reopen = Signal(int)  # the chat open when an undone change was made: shown again

    def __init__(self, ctx: AppContext, chat: ShownChat, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.chat = chat
        self._banner: QWidget | None = None  # the banner the link sits in (attach_banner)
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

    def attach_banner(self, banner: QWidget) -> None:
        """Put the link in the banner's row, before its close button (the window has made both)."""
        self._banner = banner
        row = banner.layout()
        if isinstance(row, QHBoxLayout):
            row.insertWidget(row.count() - 1, self.link, 0, Qt.AlignmentFlag.AlignTop)
        banner.installEventFilter(self)
        self.link.setText(f'<a href="undo">{self.tr("Undo")}</a>')

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self._banner and event.type() == QEvent.Type.Hide:
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
        was_open = self.chat.conversation_id
        try:
            undo = change()
        except (EmberError, KeyError) as exc:
            self.ctx.notifier.show_error(self._sentence(exc))
            self.reload.emit(None)  # (all read again: what is there now)
            return None
        done = Done(undo, frozenset(chats), was_open)
        self.stack.append(done)
        del self.stack[:-UNDO_DEPTH]
        self.reload.emit(done.chats)
        self._say(done)
        return undo

    def _say(self, done: Done) -> None:
        self.ctx.notifier.show_notice(
            done.undo.label, cause="undo"
        )  # (hides the link: a new message; goes with the chat)
        self._shown = done
        self.link.show()

    def undo_last(self) -> bool:
        """Undo the newest change; False when there is none (or it can no longer be undone: said)."""
        if not self.stack:
            self.ctx.notifier.show_notice(self.tr("Nothing to undo."))
            return False
        done = self.stack.pop()

        def act() -> None:
            try:
                self.ctx.store.organise.undo(done.undo)
            except (EmberError, KeyError) as exc:
                self.ctx.notifier.show_error(self._sentence(exc))
                return
            self._reload(done)  # (may open the chat again: the sentence comes after, or it would go with it)
            self.ctx.notifier.show_notice(self.tr("Undone: {what}").format(what=done.undo.label), cause="undo")

        self.chat.after_stop(act)  # (an answer streaming into a chat the undo touches stops)
        return True

    def _reload(self, done: Done) -> None:
        """The list again; the chat that was open when the change was made is shown again if the
        change touched it (a chat moved back from the Trash opens again, a message comes back)."""
        self.reload.emit(done.chats)
        open_now = self.chat.conversation_id
        if done.was_open is not None and done.was_open in done.chats and open_now in (None, done.was_open):
            if self._listed(done.was_open):
                self.reopen.emit(done.was_open)
                self.chat.refresh()
        elif open_now is not None and open_now in done.chats:
            self.chat.refresh()

    def _listed(self, cid: int) -> bool:
        """Whether the chat is in the list (it exists and is not in the Trash)."""
        try:
            return self.ctx.store.conversation(cid).deleted_at is None
        except KeyError:
            return False

    def _sentence(self, exc: BaseException) -> str:
        if isinstance(exc, KeyError):
            return self.tr("That chat no longer exists; the list is shown again as it is now.")
        return str(exc)
