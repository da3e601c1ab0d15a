"""The main window's chat actions: the chat list (open, search, rename, the views: chats, Archived,
Trash; its context menu and the Chat menu's entries for it) and a new chat; sending and editing from the
message box are `window.compose` (conversation/compose.py), exporting `self.exports` (chat_list/export.py).
Changes to chats that can be undone go through `self.organise` (chat_list/undo.py). A part of the main
window (`window.chats`), which uses the window's widgets and stores and owns the menu and questions it
opened."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from PySide6.QtCore import QDateTime, QObject, QPoint, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDialog, QInputDialog, QMenu, QMessageBox

from ember_chat.app.chat_list.export import ChatExports
from ember_chat.app.chat_list.menu import build_row_menu, fill_move_menu
from ember_chat.app.chat_list.undo import ChatOrganise
from ember_chat.app.chat_list.view import FolderRow
from ember_chat.engine.core.params import SamplingParams, chat_settings
from ember_chat.engine.storage.conversations import ChatRow

_ID, _UPDATED = attrgetter("id"), attrgetter("updated_at")  # (sort keys of the listed chats)


class ChatActions(QObject):
    def __init__(self, window: Any) -> None:  # (the main window, until it comes off it)
        super().__init__(window)
        self.w = window
        self.chat_menu: QMenu | None = None  # the chat list's context menu, while open
        self.chat_question: QDialog | None = None  # a rename or delete question, while open
        self.organise = ChatOrganise(window)  # folders, pins, archive, Trash: undoable (chat_list/undo.py)
        self.exports = ChatExports(window)  # File ▸ Export and the list's Export (chat_list/export.py)
        self._listed: dict[int, ChatRow] | None = None  # the chats the tree lists, as last read
        self._order: list[ChatRow] = []  # the same, newest activity first

    def wire_list(self) -> None:
        """Connect the chat list's own signals (the window made it)."""
        lst = self.w.conversations
        lst.view_requested.connect(self.show_view)
        lst.delete_pressed.connect(self.delete_selected)
        lst.folder_collapsed.connect(self.organise.set_collapsed)
        lst.empty_trash.connect(lambda: self.organise.empty_trash())
        lst.model.on_drop = self.organise.move
        changed = self.w.controller.conversations_changed
        with contextlib.suppress(RuntimeError, RuntimeWarning):  # (the window connected the full reload)
            changed.disconnect(self.reload_conversations)  # this one reads only the open chat again
        changed.connect(self.on_conversations_changed)
        self.w.controller.delete_requested.connect(self.organise.delete_message)

    def add_menu_entries(self, chat: QMenu) -> None:
        """Chat menu: Undo, New folder, Move to ▸ (the keyboard's way to move the selected chats),
        Pin, Archive; the Archived and Trash lists."""
        undo = chat.addAction(self.tr("&Undo"), lambda: self.w.undo.undo_last())
        undo.setShortcut(QKeySequence(QKeySequence.StandardKey.Undo))  # (a text field keeps its own Ctrl+Z)
        chat.addSeparator()
        chat.addAction(self.tr("New &folder…"), lambda: self.organise.new_folder())
        move = chat.addMenu(self.tr("Mo&ve to"))
        move.aboutToShow.connect(lambda: fill_move_menu(move, self.organise, self.chosen_chats))
        fill_move_menu(move, self.organise, self.chosen_chats)
        chat.addAction(self.tr("&Pin or unpin"), self.toggle_pin)
        chat.addAction(self.tr("&Archive"), lambda: self.organise.archive(self.chosen_chats()))
        chat.addAction(self.tr("Show arc&hived chats"), lambda: self.show_view("archived"))
        chat.addAction(self.tr("Show the &Trash"), lambda: self.show_view("trash"))
        chat.addSeparator()
        chat.addAction(self.tr("Delete all chats…"), lambda: self.organise.delete_all())

    def chosen_chats(self) -> list[int]:
        """What the Chat menu acts on: the chats selected in the list, else the open one (none in the
        Trash: a trashed chat is restored or deleted for good, from its own menu)."""
        if self.w.conversations.mode == "trash":
            return []
        ids = self.w.conversations.selected_ids()
        cid = self.w.controller.conversation_id
        return ids or ([cid] if cid is not None else [])

    def pinned(self, cid: int) -> bool:
        try:
            return self.w.store.conversation(cid).pinned
        except KeyError:
            return False

    def toggle_pin(self) -> None:
        ids = self.chosen_chats()
        if ids:
            self.organise.pin(ids, not all(self.pinned(i) for i in ids))

    def delete_selected(self) -> None:
        """The Delete key in the list: the selected chats go to the Trash (no question: Ctrl+Z); in the
        Trash, they are deleted for good (with a question); a folder selected alone is deleted."""
        lst = self.w.conversations
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
        lst, store = self.w.conversations, self.w.store
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
            folders = store.organise.folders()
            rows = [FolderRow(f.id, f.name, f.parent_id) for f in folders]
            closed = frozenset(f.id for f in folders if f.collapsed)
            archived = store.archived_count()
            trashed = store.organise.trash_count()
            open_id = self.w.controller.conversation_id
            lst.show_conversations(self._active(changed), open_id, rows, closed, archived, trashed)
        self.w.update_welcome()

    def _active(self, changed: Iterable[int] | None) -> list[ChatRow]:
        """The chats the tree lists (neither archived nor in the Trash), newest activity first: read
        whole once (only the columns the list shows), then only the `changed` ones again."""
        store = self.w.store
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

    def on_conversations_changed(self) -> None:
        """The controller changed the open chat (a message sent, an answer ended): only it is read again."""
        cid = self.w.controller.conversation_id
        self.reload_conversations(None if cid is None else [cid])

    def reveal(self, cid: int) -> None:
        """Open a chat where the list keeps it: an archived one in the Archived list, any other in the
        chat list (an import's Open: the chat may have come in archived)."""
        if not self._exists(cid):
            self.open_conversation(cid)  # (says it no longer exists)
            return
        archived = self.w.store.conversation(cid).archived_at is not None
        want = "archived" if archived else "chats"
        if self.w.conversations.mode != want or self.w.conversations.search.text():
            self.show_view(want)
        self.open_conversation(cid)

    def show_view(self, mode: str) -> None:
        """Show the chat tree ("chats"), the archived chats or the Trash in the list."""
        lst = self.w.conversations
        if lst.search.text():
            lst.search.blockSignals(True)
            lst.search.clear()
            lst.search.blockSignals(False)
        lst.mode = mode
        self.reload_conversations([])  # (the changes made meanwhile were applied as they were made)

    def _stopping(self, target: int | None) -> str | None:
        """What to say when opening `target` (None: a new chat) stops the answer streaming in the chat
        shown (after_stop): which chat's answer stopped; None when nothing streams there."""
        cid = self.w.controller.conversation_id
        if not self.w.controller.generating or cid is None:
            return None
        said = (
            self.tr("The answer in “{title}” stopped to show that message; what it wrote is kept.")
            if cid == target  # (a search result in the chat answering: shown once the answer stopped)
            else self.tr("The answer in “{title}” stopped when you left that chat; what it wrote is kept.")
        )
        return said.format(title=self.w.store.conversation(cid).title)

    def new_chat(self) -> None:
        stopping = self._stopping(None)

        def act() -> None:
            if self.w.controller.conversation_id is not None:
                self.w.side.metrics.reset()  # "Current answer" was the other chat's
            self.w.controller.conversation_id = None
            self.w.banner.leave_chat()  # what was said about the chat left behind (Ctrl+Z still undoes)
            self.w.compose.end_edit()
            self.w._apply_settings_defaults()
            self.w.controller.refresh()
            self.reload_conversations()  # (and the welcome panel, when no model is loaded)
            self.w.composer.editor.setFocus()
            if stopping:
                self.w.show_notice(stopping, cause="answer")

        self.w.controller.after_stop(act)

    def open_conversation(self, cid: int, jump_to: int | None = None) -> None:
        if not self._exists(cid):  # (a row left from before a deletion, a script, a stale search hit)
            self.w.show_error(self.tr("That chat no longer exists; the list is shown again as it is now."))
            self.reload_conversations()
            return
        stopping = self._stopping(cid)

        def act() -> None:
            if cid != self.w.controller.conversation_id:
                self.w.side.metrics.reset()  # "Current answer" was the other chat's
            conv = self.w.store.conversation(cid)
            # a chat's settings came from anyone (an imported file, an older Ember): each one of the wrong
            # type or out of range is dropped, and its default shown, instead of failing to open the chat
            saved, dropped = chat_settings(conv.params)
            params = {k: v for k, v in saved.items() if k != "context_length"}
            given = any(k != "context_length" for k in conv.params)  # (none saved: the panel's stay)
            sp = SamplingParams.from_dict(params) if given else self.w.side.params.params()
            ctx = saved.get("context_length", self.w.settings.context_length)  # (not the last chat's)
            self.w.side.params.set_params(sp, conv.system_prompt, ctx)
            self.w.compose.end_edit()
            self.w.conversations.select(cid)
            if cid != self.w.controller.conversation_id:
                self.w.banner.leave_chat()  # what was said about the chat left behind (Ctrl+Z still undoes)
            if dropped:
                self.w.show_notice(
                    self.tr(
                        "Some of this chat's saved settings could not be used ({names}: of the wrong kind or out "
                        "of range); the Parameters panel shows the defaults for them."
                    ).format(names=", ".join(name[:40] for name in dropped[:8])),
                    cause="settings",
                )
            if stopping:
                self.w.show_notice(stopping, cause="answer")

        self.w.controller.after_stop(act)
        self.w.controller.open_conversation(cid, jump_to)
        self.w.controller.after_stop(self.w.update_welcome)

    def reopen(self, saved: object) -> None:
        """At launch: the chat that was open when Ember quit (`saved`: its id as the window state kept
        it). One deleted, purged or put in the Trash since is not opened, and nothing is said: the
        window starts on a new chat as it did before."""
        try:
            cid = int(str(saved))
        except ValueError:
            return  # (none saved, or a hand-edited state file)
        try:
            gone = self.w.store.conversation(cid).deleted_at is not None
        except KeyError:
            return
        if not gone:
            self.reveal(cid)  # (an archived chat in the Archived list)

    def open_hit(self, cid: int, mid: int) -> None:
        if mid not in [m.id for m in self.w.store.thread(cid)]:  # the hit is on another branch: show it
            self.w.store.update_conversation(cid, active_leaf=self.w.store.newest_leaf(mid))
        self.open_conversation(cid, jump_to=mid)

    def on_search(self, text: str) -> None:
        if text.strip():
            self.w.conversations.show_hits(self.w.store.search(text))
        else:
            self.reload_conversations([])  # the tree again, from the chats as last read

    def conversation_menu(self, pos: QPoint) -> None:
        """The context menu of the row right-clicked: it acts on the selection when that row is in it,
        else on that row alone (the selection stays on the open chat)."""
        lst = self.w.conversations
        key = lst.key_at(pos)
        menu = QMenu(self.w)
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
            self.w.store.conversation(cid)
        except KeyError:
            return False
        return True

    def _chosen_chat(self) -> int | None:
        """What Chat ▸ Rename and Delete act on: the chat selected in the list, else the open one."""
        return self.w.conversations.current_id() or self.w.controller.conversation_id

    def rename_current(self, title: str | None = None) -> None:
        """Chat ▸ Rename (F2): the folder selected alone in the list, else the chosen chat."""
        folder = self.w.conversations.selected_folder()
        if folder is not None:  # (the menu's action passes its `checked` False: no title then)
            self.organise.rename_folder(folder, title if isinstance(title, str) and title else None)
            return
        cid = self._chosen_chat()
        if cid is not None:
            self.rename_chat(cid, title)

    def delete_current(self, confirmed: bool = False) -> None:
        if self.w.conversations.mode == "trash":  # in the Trash, Delete means for good (as the Delete key)
            self.organise.purge(self.w.conversations.selected_ids(), confirmed)
            return
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
            self.reload_conversations([cid])

    def delete_chat(self, cid: int, confirmed: bool = False) -> None:
        """Chat ▸ Delete chat…: move a chat to the Trash once the user has said yes (or `confirmed`).
        The Delete key and the list's menu move to the Trash without asking (it is undoable)."""
        if confirmed:
            self.organise.trash([cid])
            return
        title = self.w.store.conversation(cid).title
        box = QMessageBox(
            QMessageBox.Icon.Question,
            self.tr("Delete chat"),
            self.tr("Move “{title}” to the Trash? You can restore it from the Trash, or press Ctrl+Z.").format(
                title=title
            ),
            QMessageBox.StandardButton.Cancel,
            self.w,
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
