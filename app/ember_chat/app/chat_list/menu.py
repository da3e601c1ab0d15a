"""The chat list's menus: a row's context menu (chats: open, rename, pin, move to a folder, archive,
export, Trash; a folder: new subfolder, rename, made a project and back, its project's settings and
export, delete; below the rows: a new folder or project; the Archived and Trash lists: their own), and
the "Move to" submenu the Chat menu offers too (the keyboard's way to move chats)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QMenu

from ember_chat.app.chat_list.model import ARCHIVED, CHAT, FOLDER, TRASH, ident_of, kind_of


def tr(text: str) -> str:
    return QCoreApplication.translate("ChatListMenu", text)


class Organise(Protocol):
    """What the menus call (the window's `chats.organise`)."""

    store: Any

    def trash(self, ids: Sequence[int]) -> None: ...
    def move(self, ids: Sequence[int], folder_id: int | None) -> None: ...
    def archive(self, ids: Sequence[int], archived: bool = True) -> None: ...
    def pin(self, ids: Sequence[int], pinned: bool) -> None: ...
    def restore(self, ids: Sequence[int]) -> None: ...
    def purge(self, ids: Sequence[int], confirmed: bool = False) -> None: ...
    def empty_trash(self, confirmed: bool = False) -> None: ...
    def new_folder(
        self, parent_id: int | None = None, then_move: Sequence[int] = (), name: str | None = None
    ) -> None: ...
    def rename_folder(self, folder_id: int, name: str | None = None) -> None: ...
    def delete_folder(self, folder_id: int, confirmed: bool = False) -> None: ...


class Exports(Protocol):
    def export_many(self, ids: Sequence[int]) -> None: ...
    def export_project(self, folder_id: int) -> None: ...


class Projects(Protocol):
    """What the menus call of the window's projects (`window.projects`, projects/actions.py)."""

    def is_project(self, folder_id: int) -> bool: ...
    def icons(self) -> dict[int, str]: ...
    def new_project(self, name: str | None = None, parent_id: int | None = None) -> object: ...
    def make_project(self, folder_id: int) -> None: ...
    def unmake(self, folder_id: int) -> None: ...
    def open_settings(self, folder_id: int) -> None: ...


class ChatsHost(Protocol):
    """What the menus need of the window's chat actions (`window.chats`)."""

    organise: Organise
    exports: Exports
    projects: Projects | None  # (set by the composition)

    def rename_chat(self, cid: int, title: str | None = None) -> None: ...
    def pinned(self, cid: int) -> bool: ...
    def show_view(self, mode: str) -> None: ...


def build_row_menu(menu: QMenu, chats: ChatsHost, key: int | None, selected: Sequence[int], mode: str) -> bool:
    """Fill `menu` for the row `key` (None: below the rows); False when there is nothing to offer."""
    o = chats.organise
    kind = kind_of(key) if key is not None else None
    if kind == CHAT and key is not None:
        cid = ident_of(key)
        ids = list(selected) if cid in selected and len(selected) > 1 else [cid]
        if mode == "trash":
            menu.addAction(tr("Restore"), lambda: o.restore(ids))
            menu.addAction(tr("Delete for good…"), lambda: o.purge(ids))
            menu.addSeparator()
            menu.addAction(tr("Empty Trash…"), lambda: o.empty_trash())
            return True
        if mode == "archived":
            menu.addAction(tr("Unarchive"), lambda: o.archive(ids, False))
            menu.addAction(tr("Move to Trash"), lambda: o.trash(ids))
            return True
        add_chat_entries(menu, chats, ids)
        return True
    if mode != "chats":
        if mode == "trash":
            menu.addAction(tr("Empty Trash…"), lambda: o.empty_trash())
            return True
        return False
    if kind == FOLDER and key is not None:
        fid = ident_of(key)
        folder = o.store.folder(fid)
        if folder.parent_id is None:
            menu.addAction(tr("New folder inside…"), lambda: o.new_folder(fid))
        projects = chats.projects
        project = projects is not None and projects.is_project(fid)
        if projects is not None and project:
            menu.addAction(tr("Project settings…"), lambda: projects.open_settings(fid))
        rename = tr("Rename project…") if project else tr("Rename folder…")
        menu.addAction(rename, lambda: o.rename_folder(fid))
        if projects is not None:
            if project:
                menu.addAction(tr("Export project…"), lambda: chats.exports.export_project(fid))
                menu.addAction(tr("Turn back into a plain folder…"), lambda: projects.unmake(fid))
            else:
                menu.addAction(tr("Make this folder a project"), lambda: projects.make_project(fid))
        menu.addSeparator()
        if project:
            menu.addAction(tr("Delete project… (its chats go to the Trash)"), lambda: o.delete_folder(fid))
        else:
            menu.addAction(tr("Delete folder (its chats go to the Trash)"), lambda: o.delete_folder(fid))
        return True
    if key in (ARCHIVED, TRASH):
        menu.addAction(tr("Show"), lambda: chats.show_view("archived" if key == ARCHIVED else "trash"))
        if key == TRASH:
            menu.addAction(tr("Empty Trash…"), lambda: o.empty_trash())
        return True
    if key is None:
        menu.addAction(tr("New folder…"), lambda: o.new_folder())
        if chats.projects is not None:
            menu.addAction(tr("New project…"), lambda p=chats.projects: p.new_project())
        return True
    return False


def add_chat_entries(menu: QMenu, chats: ChatsHost, ids: list[int]) -> None:
    """What a chat (or the chats selected) can have done to it."""
    o = chats.organise
    if len(ids) == 1:
        menu.addAction(tr("Rename…"), lambda: chats.rename_chat(ids[0]))
    if all(chats.pinned(i) for i in ids):
        menu.addAction(tr("Unpin"), lambda: o.pin(ids, False))
    else:
        menu.addAction(tr("Pin to the top"), lambda: o.pin(ids, True))
    fill_move_menu(menu.addMenu(tr("Move to")), o, lambda: ids, project_icons(chats))
    menu.addAction(tr("Archive"), lambda: o.archive(ids))
    menu.addAction(tr("Export as JSON…"), lambda: chats.exports.export_many(ids))
    menu.addSeparator()
    trash = menu.addAction(tr("Move to Trash"), lambda: o.trash(ids))
    trash.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))  # (shown: the list's key for it)


def project_icons(chats: ChatsHost) -> dict[int, str]:
    """Each project's folder id and its icon (none without the window's projects)."""
    return chats.projects.icons() if chats.projects is not None else {}


def folder_label(name: str, icon: str | None) -> str:
    """A folder's name as the list and the menus show it: a project's icon before it."""
    return f"{icon}  {name}" if icon else name


def fill_move_menu(
    menu: QMenu, o: Organise, ids: Callable[[], list[int]], icons: Mapping[int, str] | None = None
) -> None:
    """The folders (subfolders under their parent; a project's icon before its name), "No folder", and
    "New folder…"; each moves the chats `ids()` gives when it is chosen."""
    icons = icons or {}
    menu.clear()
    folders = o.store.folders()
    tops = [f for f in folders if f.parent_id is None]
    for top in tops:
        menu.addAction(folder_label(top.name, icons.get(top.id)), lambda f=top.id: o.move(ids(), f))
        for sub in (f for f in folders if f.parent_id == top.id):
            menu.addAction(f"    {folder_label(sub.name, icons.get(sub.id))}", lambda f=sub.id: o.move(ids(), f))
    if folders:
        menu.addSeparator()
    menu.addAction(tr("No folder"), lambda: o.move(ids(), None))
    menu.addAction(tr("New folder…"), lambda: o.new_folder(then_move=ids()))
