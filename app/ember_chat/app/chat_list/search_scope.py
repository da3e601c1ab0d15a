"""Where the chat list's search looks: every chat, or one project's chats (its folder's and its
subfolders'). A small button beside the search field, shown while there is a project to choose; its menu
lists "All chats" and each project, its icon before its name. Nothing of it is kept between launches, and a
project deleted or made a plain folder gives "All chats" back."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QIcon
from PySide6.QtWidgets import QMenu, QToolButton, QWidget

from ember_chat.app.qt.elided_label import elided
from ember_chat.app.style.icons import themed_icon
from ember_chat.app.style.theme import Colors


class SearchScope(QToolButton):
    chosen = Signal()  # the user chose another scope

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.folder_id: int | None = None  # the project searched (its folder); None: every chat
        self._projects: list[tuple[int, str, str]] = []  # (folder id, icon, name), in the chat list's order
        self._filter: QIcon | None = None  # the funnel, in the theme's colours (set_colors)
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setAccessibleName(self.tr("Search in"))
        self.menu_ = QMenu(self)
        self.menu_.setToolTipsVisible(True)  # (a long project name, shortened in its entry: the whole)
        self.setMenu(self.menu_)
        self._group = QActionGroup(self)
        self._group.setExclusive(True)
        self.hide()  # (until there is a project)
        self._show()

    def set_colors(self, colors: Colors) -> None:
        self._filter = themed_icon("filter", colors, colors.secondary)
        self._show()

    def set_projects(self, projects: Sequence[tuple[int, str, str]]) -> bool:
        """The projects there are, (folder id, icon, name) in the chat list's order. True when the project
        searched is no longer one of them: the search is over every chat again."""
        projects = list(projects)
        if projects == self._projects and self.menu_.actions():
            return False  # (as they were: the menu, maybe open, is left alone)
        self._projects = projects
        gone = self.folder_id is not None and all(p[0] != self.folder_id for p in self._projects)
        if gone:
            self.folder_id = None
        self._fill()
        self.setVisible(bool(self._projects) or self.folder_id is not None)
        self._show()
        return gone

    def choose(self, folder_id: int | None) -> None:
        """Search this project's chats (None: every chat), as a choice in the menu does."""
        self.folder_id = folder_id
        self._fill()
        self._show()
        self.chosen.emit()

    def project_name(self) -> str | None:
        return next((name for fid, _icon, name in self._projects if fid == self.folder_id), None)

    def _fill(self) -> None:
        self.menu_.clear()
        for action in self._group.actions():
            self._group.removeAction(action)
        everything = self._add(self.tr("All chats"), None)
        self.menu_.addSeparator()
        for fid, icon, name in self._projects:
            self._add(f"{icon}  {elided(name, self.menu_)}", fid).setToolTip(name)  # (the whole on hover)
        if self.folder_id is None:
            everything.setChecked(True)

    def _add(self, text: str, folder_id: int | None) -> QAction:
        action = self.menu_.addAction(text.replace("&", "&&"))
        action.setCheckable(True)
        action.setChecked(folder_id is not None and folder_id == self.folder_id)
        action.triggered.connect(lambda _on=False, f=folder_id: self.choose(f))
        self._group.addAction(action)
        return action

    def _show(self) -> None:
        """The button: the funnel over every chat, the project's icon when one is searched."""
        name = self.project_name()
        icon = next((i for fid, i, _name in self._projects if fid == self.folder_id), "")
        if name is None:
            self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
            if self._filter is not None:
                self.setIcon(self._filter)
            self.setText(self.tr("All chats"))
            tip = self.tr("Search in: all chats. Choose a project to search its chats alone.")
        else:
            self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            self.setText(icon)
            tip = self.tr(
                "Search in: “{name}” (its chats and its folders' chats). Choose All chats to search every chat."
            ).format(name=name)
        self.setToolTip(tip)
        self.setAccessibleDescription(tip)
