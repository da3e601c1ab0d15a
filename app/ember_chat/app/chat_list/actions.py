"""The chat list's actions (`window.chats`): the list (open, search, rename, the views: chats,
Archived, Trash; its context menu and the Chat menu's entries for it) and a new chat; exporting is
`self.exports` (export.py), changes to chats that can be undone go through `self.organise`
(organise.py) and the undo stack (undo.py). It owns the menu and the questions it opened.

Built from the AppContext, the list widget it drives (ConversationList), the chat shown (the
conversation's controller, as `ShownChat`), the undo stack, the side panel's parameters a chat opened
brings back, the attachment store an export reads and the widget its menus and dialogs open over;
never the window. What opening a chat does to the rest of the window (the banner, the message box,
the side panel's measures and the centre's page) is said by its signals, connected in the
composition (shell/compose.py)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from operator import attrgetter

from PySide6.QtCore import QDateTime, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDialog, QMenu, QMessageBox, QWidget

from ember_chat.app.chat_list.export import ChatExports
from ember_chat.app.chat_list.menu import Projects, build_row_menu, fill_move_menu, folder_label, project_icons
from ember_chat.app.chat_list.organise import ChatOrganise
from ember_chat.app.chat_list.shown_chat import ChatParams, ShownChat
from ember_chat.app.chat_list.undo import UndoActions
from ember_chat.app.chat_list.view import ConversationList, FolderRow
from ember_chat.app.context import AppContext
from ember_chat.app.qt.name_dialog import name_dialog
from ember_chat.app.qt.plain_text import plain_message
from ember_chat.engine.attachments.store import AttachmentStore
from ember_chat.engine.core.params import SamplingParams, chat_settings
from ember_chat.engine.storage.conversations import ChatRow

_ID, _UPDATED = attrgetter("id"), attrgetter("updated_at")  # (sort keys of the listed chats)


class ChatActions(QObject):
    # what showing another chat (or a new one) does to the rest of the window, each said where it happens:
    switching = Signal()  # the chat on screen changes: the side panel's "Current answer" was the last one's
    switched = Signal(int)  # then: this chat is the one on screen (the side panel shows its last answer)
    edit_ends = Signal()  # an edit of a message ends (the message box gets back what it held)
    leaving = Signal()  # what the banner said about the chat left behind goes (Ctrl+Z still undoes)
    new_chat_opening = Signal()  # a new chat: the side panel takes the new-chat defaults, before it shows
    new_chat_opened = Signal()  # the new chat shows: the message box takes the keyboard
    shown_changed = Signal()  # the list or the open chat changed: the window's centre may show another page
    deleting_all = Signal(str)  # every chat goes for good: a comparison running stops, saying this
    relisted = Signal()  # the list read again: a folder or project may be renamed (the side panel names it anew)

    def __init__(
        self,
        ctx: AppContext,
        conversations: ConversationList,
        chat: ShownChat,
        undo: UndoActions,
        params: ChatParams,
        attachments: AttachmentStore,
        dialog_parent: QWidget,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.conversations = conversations
        self.chat = chat
        self.undo = undo
        self.params = params
        self._dialog_parent = dialog_parent
        self.chat_menu: QMenu | None = None  # the chat list's context menu, while open
        self.chat_question: QDialog | None = None  # a rename or delete question, while open
        # folders, pins, archive, Trash: undoable (organise.py)
        self.organise = ChatOrganise(
            ctx,
            undo,
            chat,
            conversations,
            reload=self.reload_conversations,
            ask=self.ask,
            dialog_parent=dialog_parent,
            parent=self,
        )
        self.organise.switching.connect(self.switching)
        self.organise.edit_ends.connect(self.edit_ends)
        self.organise.shown_changed.connect(self.shown_changed)
        self.organise.deleting_all.connect(self.deleting_all)
        # File ▸ Export and the list's Export (export.py)
        self.exports = ChatExports(ctx, attachments, chat, dialog_parent, ask=self.ask, parent=self)
        undo.reload.connect(self.reload_conversations)  # (an undone change: the chats it touched)
        undo.reopen.connect(self.open_conversation)
        self.projects: Projects | None = None  # the window's projects (the composition sets it)
        self._listed: dict[int, ChatRow] | None = None  # the chats the tree lists, as last read
        self._order: list[ChatRow] = []  # the same, newest activity first
        self._wire_list()

    def _wire_list(self) -> None:
        """Connect the chat list's own signals."""
        lst = self.conversations
        lst.new_button.clicked.connect(self.new_chat)
        lst.selected.connect(self.open_conversation)
        lst.search_hit.connect(self.open_hit)
        lst.search_changed.connect(self.on_search)
        lst.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        lst.list.customContextMenuRequested.connect(self.conversation_menu)
        lst.view_requested.connect(self.show_view)
        lst.delete_pressed.connect(self.delete_selected)
        lst.folder_collapsed.connect(self.organise.set_collapsed)
        lst.empty_trash.connect(lambda: self.organise.empty_trash())
        lst.model.on_drop = self.organise.move

    def add_menu_entries(self, chat: QMenu) -> None:
        """Chat menu: Undo, New folder, Move to ▸ (the keyboard's way to move the selected chats),
        Pin, Archive; the Archived and Trash lists."""
        undo = chat.addAction(self.tr("&Undo"), lambda: self.undo.undo_last())
        undo.setShortcut(QKeySequence(QKeySequence.StandardKey.Undo))  # (a text field keeps its own Ctrl+Z)
        chat.addSeparator()
        chat.addAction(self.tr("New &folder…"), lambda: self.organise.new_folder())
        if self.projects is not None:
            chat.addAction(self.tr("New pro&ject…"), lambda p=self.projects: p.new_project())
        move = chat.addMenu(self.tr("Mo&ve to"))
        move.aboutToShow.connect(lambda: fill_move_menu(move, self.organise, self.chosen_chats, project_icons(self)))
        fill_move_menu(move, self.organise, self.chosen_chats, project_icons(self))
        chat.addAction(self.tr("&Pin or unpin"), self.toggle_pin)
        chat.addAction(self.tr("&Archive"), lambda: self.organise.archive(self.chosen_chats()))
        chat.addAction(self.tr("Show arc&hived chats"), lambda: self.show_view("archived"))
        chat.addAction(self.tr("Show the &Trash"), lambda: self.show_view("trash"))
        chat.addSeparator()
        chat.addAction(self.tr("Delete all chats…"), lambda: self.organise.delete_all())

    def chosen_chats(self) -> list[int]:
        """What the Chat menu acts on: the chats selected in the list, else the open one (none in the
        Trash: a trashed chat is restored or deleted for good, from its own menu)."""
        if self.conversations.mode == "trash":
            return []
        ids = self.conversations.selected_ids()
        cid = self.chat.conversation_id
        return ids or ([cid] if cid is not None else [])

    def pinned(self, cid: int) -> bool:
        try:
            return self.ctx.store.conversation(cid).pinned
        except KeyError:
            return False

    def toggle_pin(self) -> None:
        ids = self.chosen_chats()
        if ids:
            self.organise.pin(ids, not all(self.pinned(i) for i in ids))

    def delete_selected(self) -> None:
        """The Delete key in the list: the selected chats go to the Trash (no question: Ctrl+Z); in the
        Trash, they are deleted for good (with a question); a folder selected alone is deleted."""
        lst = self.conversations
        ids = lst.selected_ids()
        if lst.mode == "trash":
            self.organise.purge(ids)
        elif ids:
            self.organise.trash(ids)
        elif lst.selected_folder() is not None:
            self.organise.delete_folder(lst.selected_folder())

    # ----- the chat list
    def reload_conversations(self, changed: Iterable[int] | None = None) -> None:
        """The list as the store has it now: search hits while the search box has text, else the view
        the list shows (the chat tree, the archived chats or the Trash). `changed`: only these chats
        changed since the last reload (they are read again, not all 5,000)."""
        lst, store = self.conversations, self.ctx.store
        folders = store.organise.folders()
        icons = project_icons(self)  # (a project's before its name)
        names = {f.id: f.name for f in folders}
        lst.set_projects([(fid, icon, names[fid]) for fid, icon in icons.items() if fid in names])
        self.relisted.emit()
        if lst.search.text().strip():
            if changed is None:
                self._listed = None  # read whole when the tree shows again
            elif self._listed is not None:
                self._active(changed)  # (kept up to date for when the search is cleared)
            self.on_search(lst.search.text())
            return
        if lst.mode == "archived":
            lst.show_list("archived", store.conversations(archived=True))
        elif lst.mode == "trash":
            trashed = store.organise.trashed()
            tips = {
                c.id: self.tr("{title} — in the Trash since {when}").format(title=c.title, when=_when(c.deleted_at))
                for c in trashed
            }
            lst.show_list("trash", trashed, tips)
        else:
            rows = [FolderRow(f.id, folder_label(f.name, icons.get(f.id)), f.parent_id) for f in folders]
            lst.emblems = frozenset(icons)
            closed = frozenset(f.id for f in folders if f.collapsed)
            archived = store.archived_count()
            trashed = store.organise.trash_count()
            open_id = self.chat.conversation_id
            lst.show_conversations(self._active(changed), open_id, rows, closed, archived, trashed)
        self.shown_changed.emit()

    def _active(self, changed: Iterable[int] | None) -> list[ChatRow]:
        """The chats the tree lists (neither archived nor in the Trash), newest activity first: read
        whole once (only the columns the list shows), then only the `changed` ones again."""
        store = self.ctx.store
        if changed is None or self._listed is None:
            chats = store.chat_rows()
            self._listed = {c.id: c for c in chats}
            self._order = chats
            return chats
        changed = set(changed)
        if changed:
            fresh = store.chat_rows(changed)
            for cid in changed:
                self._listed.pop(cid, None)
            self._listed.update((c.id, c) for c in fresh)
            order = [c for c in self._order if c.id not in changed] + fresh
            # newest activity first, ties by id (two stable sorts of what is nearly in order: keys that are
            # the rows' own values, no tuple made per row, whose garbage set off full collections of 30 ms)
            order.sort(key=_ID, reverse=True)
            order.sort(key=_UPDATED, reverse=True)
            self._order = order
        return self._order

    def changed_elsewhere(self) -> None:
        """Another process changed the store (`chats rm`, a second Ember): the list is read again and, when
        the open chat went to the Trash or for good, it closes as when the list's own Delete takes it
        (an answer into it stops first; what the message box holds stays), saying why — else new messages
        would be saved into a chat the list no longer shows."""
        self.reload_conversations()
        cid = self.chat.conversation_id
        if cid is None:
            return
        try:
            conv = self.ctx.store.conversation(cid)
            title, gone = conv.title, conv.deleted_at is not None
            where = self.tr("moved to the Trash")
        except KeyError:
            title, gone, where = "", True, self.tr("deleted for good")
        if not gone:
            return

        def act() -> None:
            if self.chat.conversation_id != cid:
                return
            self.chat.conversation_id = None
            self.edit_ends.emit()  # (an edit of one of its messages: the box gets its draft back)
            self.chat.refresh()
            self.shown_changed.emit()
            said = self.tr(
                "The chat “{title}” was {where} by another program (ember-chat chats rm, or a second "
                "Ember), so it is closed; your message box keeps what you typed."
            )
            self.ctx.notifier.show_notice(said.format(title=title or self.tr("that was open"), where=where))

        self.chat.after_stop(act)

    def on_conversations_changed(self) -> None:
        """The controller changed the open chat (a message sent, an answer ended): only it is read again."""
        cid = self.chat.conversation_id
        if cid is not None and self._stays_first(cid):
            return
        self.reload_conversations(None if cid is None else [cid])

    def _stays_first(self, cid: int) -> bool:
        """True when the open chat was the newest the tree lists and only its time changed (a message saved
        in the chat at the top, twice a message): the tree stays as it is, only the row kept is brought
        up to date, without reading the folders and counts and building the tree again. False otherwise
        (a search shown: its hits may change; a title, pin, folder change; a chat newly listed or gone).
        No `shown_changed` then: the chats shown are the same (its one listener, the welcome page, reads
        whether a chat is open, which this does not change)."""
        lst = self.conversations
        if lst.mode != "chats" or lst.search.text().strip() or not self._listed or self._order[0].id != cid:
            return False
        old, fresh = self._listed.get(cid), self.ctx.store.chat_rows([cid])
        if old is None or len(fresh) != 1 or fresh[0].updated_at < old.updated_at:
            return False
        if fresh[0]._replace(updated_at=old.updated_at) != old:
            return False
        self._listed[cid] = self._order[0] = fresh[0]
        return True

    def reveal(self, cid: int) -> None:
        """Open a chat where the list keeps it: an archived one in the Archived list, any other in the
        chat list (an import's Open: the chat may have come in archived)."""
        if not self._exists(cid):
            self.open_conversation(cid)  # (says it no longer exists)
            return
        archived = self.ctx.store.conversation(cid).archived_at is not None
        want = "archived" if archived else "chats"
        if self.conversations.mode != want or self.conversations.search.text():
            self.show_view(want)
        self.open_conversation(cid)

    def show_view(self, mode: str) -> None:
        """Show the chat tree ("chats"), the archived chats or the Trash in the list."""
        lst = self.conversations
        if lst.search.text():
            lst.search.blockSignals(True)
            lst.search.clear()
            lst.search.blockSignals(False)
        lst.mode = mode
        self.reload_conversations([])  # (the changes made meanwhile were applied as they were made)

    def _stopping(self, target: int | None) -> str | None:
        """What to say when opening `target` (None: a new chat) stops the answer streaming in the chat
        shown (after_stop): which chat's answer stopped; None when nothing streams there."""
        cid = self.chat.conversation_id
        if not self.chat.generating or cid is None:
            return None
        said = (
            self.tr("The answer in “{title}” stopped to show that message; what it wrote is kept.")
            if cid == target  # (a search result in the chat answering: shown once the answer stopped)
            else self.tr("The answer in “{title}” stopped when you left that chat; what it wrote is kept.")
        )
        return said.format(title=self.ctx.store.conversation(cid).title)

    def new_chat(self) -> None:
        stopping = self._stopping(None)

        def act() -> None:
            if self.chat.conversation_id is not None:
                self.switching.emit()  # "Current answer" was the other chat's
            self.chat.conversation_id = None
            self.leaving.emit()  # what was said about the chat left behind (Ctrl+Z still undoes)
            self.edit_ends.emit()
            self.new_chat_opening.emit()
            self.chat.refresh()
            self.reload_conversations()  # (and the welcome panel, when no model is loaded)
            self.new_chat_opened.emit()
            if stopping:
                self.ctx.notifier.show_notice(stopping, cause="answer")

        self.chat.after_stop(act)

    def open_conversation(self, cid: int, jump_to: int | None = None) -> None:
        if not self._exists(cid):  # (a row left from before a deletion, a script, a stale search hit)
            self.ctx.notifier.show_error(self.tr("That chat no longer exists; the list is shown again as it is now."))
            self.reload_conversations()
            return
        stopping = self._stopping(cid)

        def act() -> None:
            switched = cid != self.chat.conversation_id
            if switched:
                self.switching.emit()  # "Current answer" was the other chat's
            conv = self.ctx.store.conversation(cid)
            # a chat's settings came from anyone (an imported file, an older Ember): each one of the wrong
            # type or out of range is dropped, and its default shown, instead of failing to open the chat
            saved, dropped = chat_settings(conv.params)
            params = {k: v for k, v in saved.items() if k != "context_length"}
            given = any(k != "context_length" for k in conv.params)  # (none saved: the panel's stay)
            sp = SamplingParams.from_dict(params) if given else self.params.params()
            ctx = saved.get("context_length", self.ctx.settings.context_length)  # (not the last chat's)
            self.params.set_params(sp, conv.system_prompt, ctx)
            self.edit_ends.emit()
            self.conversations.select(cid)
            if cid != self.chat.conversation_id:
                self.leaving.emit()  # what was said about the chat left behind (Ctrl+Z still undoes)
            if dropped:
                self.ctx.notifier.show_notice(
                    self.tr(
                        "Some of this chat's saved settings could not be used ({names}: of the wrong kind or out "
                        "of range); the Parameters panel shows the defaults for them."
                    ).format(names=", ".join(name[:40] for name in dropped[:8])),
                    cause="settings",
                )
            if stopping:
                self.ctx.notifier.show_notice(stopping, cause="answer")
            if switched:
                self.switched.emit(cid)

        self.chat.after_stop(act)
        self.chat.open_conversation(cid, jump_to)
        self.chat.after_stop(self.shown_changed.emit)

    def reopen(self, saved: object) -> None:
        """At launch: the chat that was open when Ember quit (`saved`: its id as the window state kept
        it). One deleted, purged or put in the Trash since is not opened, and nothing is said: the
        window starts on a new chat as it did before."""
        try:
            cid = int(str(saved))
        except ValueError:
            return  # (none saved, or a hand-edited state file)
        try:
            gone = self.ctx.store.conversation(cid).deleted_at is not None
        except KeyError:
            return
        if not gone:
            self.reveal(cid)  # (an archived chat in the Archived list)

    def open_hit(self, cid: int, mid: int) -> None:
        if mid not in [m.id for m in self.ctx.store.thread(cid)]:  # the hit is on another branch: show it
            self.ctx.store.update_conversation(cid, active_leaf=self.ctx.store.newest_leaf(mid))
        self.open_conversation(cid, jump_to=mid)

    def on_search(self, text: str) -> None:
        """The chats found (the project's alone when the search is narrowed to one), or the tree again."""
        if text.strip():
            self.conversations.show_hits(self.ctx.store.search(text, within=self.conversations.scope.folder_id))
        else:
            self.reload_conversations([])  # the tree again, from the chats as last read

    def conversation_menu(self, pos: QPoint) -> None:
        """The context menu of the row right-clicked: it acts on the selection when that row is in it,
        else on that row alone (the selection stays on the open chat)."""
        lst = self.conversations
        key = lst.key_at(pos)
        menu = QMenu(self._dialog_parent)
        if not build_row_menu(menu, self, key, lst.selected_ids(), lst.mode):
            menu.deleteLater()
            return
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.destroyed.connect(lambda: setattr(self, "chat_menu", None))
        self.chat_menu = menu  # kept while open (and for tests)
        lst.mark_menu_row(key)  # which row it acts on, while it is open
        menu.aboutToHide.connect(lambda: lst.mark_menu_row(None))
        menu.popup(lst.list.viewport().mapToGlobal(pos))

    def _exists(self, cid: int) -> bool:
        try:
            self.ctx.store.conversation(cid)
        except KeyError:
            return False
        return True

    def _chosen_chat(self) -> int | None:
        """What Chat ▸ Rename and Delete act on: the chat selected in the list, else the open one."""
        return self.conversations.current_id() or self.chat.conversation_id

    def rename_current(self, title: str | None = None) -> None:
        """Chat ▸ Rename (F2): the folder selected alone in the list, else the chosen chat."""
        folder = self.conversations.selected_folder()
        if folder is not None:  # (the menu's action passes its `checked` False: no title then)
            self.organise.rename_folder(folder, title if isinstance(title, str) and title else None)
            return
        cid = self._chosen_chat()
        if cid is not None:
            self.rename_chat(cid, title)

    def delete_current(self, confirmed: bool = False) -> None:
        if self.conversations.mode == "trash":  # in the Trash, Delete means for good (as the Delete key)
            self.organise.purge(self.conversations.selected_ids(), confirmed)
            return
        cid = self._chosen_chat()
        if cid is not None:
            self.delete_chat(cid, confirmed)

    def rename_chat(self, cid: int, title: str | None = None) -> None:
        """Rename a chat: to `title`, else to what the user types in a dialog pre-filled with its title."""
        if title:
            self._rename(cid, title)
            return
        title = self.ctx.store.conversation(cid).title
        self._ask(
            name_dialog(
                self._dialog_parent, self.tr("Rename chat"), self.tr("Title:"), title, partial(self._rename, cid)
            )
        )

    def _rename(self, cid: int, title: str) -> None:
        if not title.strip():
            return
        try:
            self.ctx.store.update_conversation(cid, title=title.strip())
        except KeyError:  # (deleted for good, as from the Trash, while its Rename dialog was open)
            self.ctx.notifier.show_error(self.tr("That chat is gone: it was deleted for good, so it was not renamed."))
            self.reload_conversations()
            return
        self.reload_conversations([cid])

    def delete_chat(self, cid: int, confirmed: bool = False) -> None:
        """Chat ▸ Delete chat…: move a chat to the Trash once the user has said yes (or `confirmed`).
        The Delete key and the list's menu move to the Trash without asking (it is undoable)."""
        if confirmed:
            self.organise.trash([cid])
            return
        title = self.ctx.store.conversation(cid).title
        box = plain_message(
            QMessageBox(
                QMessageBox.Icon.Question,
                self.tr("Delete chat"),
                self.tr("Move “{title}” to the Trash? You can restore it from the Trash, or press Ctrl+Z.").format(
                    title=title
                ),
                QMessageBox.StandardButton.Cancel,
                self._dialog_parent,
            )
        )
        delete = box.addButton(self.tr("Move to Trash"), QMessageBox.ButtonRole.DestructiveRole)
        delete.clicked.connect(lambda: self.organise.trash([cid]))
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self._ask(box)

    def ask(self, dialog: QDialog) -> None:
        self._ask(dialog)

    def _ask(self, dialog: QDialog) -> None:
        """A question about a chat, window-modal without blocking the event loop (an answer streams on)."""
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "chat_question", None))
        self.chat_question = dialog  # kept while open (and for tests)
        dialog.open()


def _when(timestamp: float | None) -> str:
    """A moment as the user's locale writes a date and time."""
    if timestamp is None:
        return ""
    return QDateTime.fromSecsSinceEpoch(int(timestamp)).toString("yyyy-MM-dd HH:mm")
