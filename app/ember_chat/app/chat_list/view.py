"""The conversations sidebar: New chat, the search box, and the chat list (a tree view over
`ChatTreeModel`): Pinned on top, folders, chats by newest activity, then Archived and Trash, which
show those lists (with a bar to go back, and Empty Trash). Multi-select with Shift/Ctrl; the Delete
key asks the window to move the selection to the Trash (`delete_pressed`)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QMargins, QModelIndex, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QIcon, QKeyEvent, QMouseEvent, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.chat_list.model import (
    ARCHIVED,
    CHAT,
    FOLDER,
    HIT,
    PINNED,
    TRASH,
    ChatTreeModel,
    FolderRow,
    ident_of,
    key_of,
    kind_of,
)
from ember_chat.app.chat_list.rows import OneLineRows
from ember_chat.app.chat_list.search_scope import SearchScope
from ember_chat.app.qt.elided_label import elided
from ember_chat.app.style.icons import icon_image, themed_icon
from ember_chat.app.style.theme import Colors
from ember_chat.engine.storage.conversations import ChatRow, Conversation, SearchHit


class ChatListWidget(QTreeView):
    """A right click leaves the selection alone: it stays on the open chat, and the context menu
    acts on the row under the pointer (or on the selection, when that row is in it)."""

    delete_pressed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setViewportMargins(1, 1, 1, 1)  # room inside the frame for the whole focus ring
        self.setHeaderHidden(True)
        self.setUniformRowHeights(True)  # 5,000 rows lay out without measuring each
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DragDrop)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.setDropIndicatorShown(True)
        self.setIndentation(14)
        self.setAnimated(False)

    def updateGeometries(self) -> None:  # Qt override
        """QTreeView sets the viewport's margins for its (hidden) header: keep the focus ring's room."""
        super().updateGeometries()
        if self.viewportMargins() != QMargins(1, 1, 1, 1):
            self.setViewportMargins(1, 1, 1, 1)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.RightButton:
            event.accept()
            return
        super().mousePressEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Delete and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            self.delete_pressed.emit()
            event.accept()
            return
        super().keyPressEvent(event)


class ConversationList(QWidget):
    """The selected chat is the open one: selecting one row (click, arrow keys) opens its chat, opening
    a chat selects its row; Ctrl/Shift add rows to the selection without opening them."""

    selected = Signal(int)
    search_hit = Signal(int, int)  # conversation id, message id
    search_changed = Signal(str)
    view_requested = Signal(str)  # "chats", "archived", "trash"
    delete_pressed = Signal()
    folder_collapsed = Signal(int, bool)  # folder id, collapsed
    empty_trash = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 0, 8)
        self.new_button = QPushButton(self.tr("New chat"))
        self.new_button.setAccessibleName(self.tr("New chat"))
        self.new_button.setToolTip(self.tr("Start a new chat (Ctrl+N)"))
        layout.addWidget(self.new_button)
        self.search = QLineEdit()
        self.search.setPlaceholderText(self.tr("Search all chats"))
        self.search.setAccessibleName(self.tr("Search all chats"))
        self.search.setToolTip(self.tr("Full-text search across every chat (Ctrl+F)"))
        self._search_icon = self.search.addAction(QIcon(), QLineEdit.ActionPosition.LeadingPosition)
        self._search_icon.setText(self.tr("Search"))
        self._search_icon.setToolTip(self.tr("Search all chats"))
        self._search_icon.triggered.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.setClearButtonEnabled(True)
        clear = self.search.findChild(QAction, "_q_qlineeditclearaction")  # Qt's own clear button: name it
        if clear is not None:
            clear.setText(self.tr("Clear search"))
            clear.setToolTip(self.tr("Clear the search and show every chat"))
        self.scope = SearchScope()  # where the search looks: every chat, or one project's
        self.scope.chosen.connect(self._scope_chosen)
        search_row = QHBoxLayout()
        search_row.setContentsMargins(0, 0, 0, 0)
        search_row.setSpacing(4)
        search_row.addWidget(self.search, 1)
        search_row.addWidget(self.scope)
        layout.addLayout(search_row)
        self.view_bar = QWidget()  # over the Archived and Trash lists: where you are, the way back
        bar = QHBoxLayout(self.view_bar)
        bar.setContentsMargins(0, 0, 0, 0)
        self.back_button = QPushButton(self.tr("◂ Chats"))
        self.back_button.setAccessibleName(self.tr("Back to the chats"))
        self.back_button.setToolTip(self.tr("Back to the chat list"))
        self.back_button.clicked.connect(lambda: self.view_requested.emit("chats"))
        self.view_title = QLabel()
        self.view_title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens it
        self.empty_button = QPushButton(self.tr("Empty Trash…"))
        self.empty_button.setAccessibleName(self.tr("Empty Trash"))
        self.empty_button.setToolTip(self.tr("Delete every chat in the Trash for good"))
        self.empty_button.clicked.connect(self.empty_trash)
        self.empty_button.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)  # the list's width
        bar.addWidget(self.back_button)
        bar.addWidget(self.view_title, 1)
        self.empty_button.hide()  # under the Trash's list (beside the title it widened a narrow sidebar)
        self.view_bar.hide()
        layout.addWidget(self.view_bar)
        self.model = ChatTreeModel(self)
        self.model.decorate = self._icon
        self.list = ChatListWidget()
        self.list.setModel(self.model)
        self.list.setAccessibleName(self.tr("Conversations"))
        self.list.setAccessibleDescription(
            self.tr("Your chats: pinned, in folders, newest first; Enter opens one, Delete moves it to the Trash")
        )
        self.list.setWordWrap(False)  # a title is one line, elided at its end (whole in its tooltip)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.rows = OneLineRows(self.list)
        self.list.setItemDelegate(self.rows)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty_button)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(150)
        self._debounce.timeout.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.textChanged.connect(lambda _t: self._debounce.start())
        self.list.activated.connect(self._activate)
        self.list.clicked.connect(self._activate)
        self.list.selectionModel().selectionChanged.connect(lambda *_: self._on_selection())
        self.list.expanded.connect(lambda i: self._on_expanded(i, True))
        self.list.collapsed.connect(lambda i: self._on_expanded(i, False))
        self.list.delete_pressed.connect(self.delete_pressed)
        self.mode = "chats"  # "chats", "hits", "archived", "trash"
        self._open: int | None = None  # the chat the window shows, as this list knows it
        self._icons: dict[int, QIcon] = {}
        self.emblems: frozenset[int] = frozenset()  # folders whose name starts with their own icon (projects')
        self._quiet = False  # expanding rows ourselves: not a user's collapse to save

    def cancel_pending_search(self) -> None:
        """Drop a search still waiting for the typing to pause (the window is closing)."""
        self._debounce.stop()

    def set_colors(self, colors: Colors) -> None:
        self.new_button.setIcon(themed_icon("new-chat", colors))
        self._search_icon.setIcon(themed_icon("search", colors, colors.secondary))
        self.scope.set_colors(colors)
        self._icons = {key: self._row_icon(name, colors) for key, name in ((FOLDER, "folder"), (TRASH, "delete"))}
        self._icons[ARCHIVED] = self._row_icon("archive", colors)
        self.list.viewport().update()

    @staticmethod
    def _row_icon(name: str, colors: Colors) -> QIcon:
        """Ember's line icons, as the buttons': the text colour, the selection's text colour when selected."""
        icon = themed_icon(name, colors, colors.secondary)
        for size in (16, 20):
            for ratio in (1.0, 2.0):
                selected = QPixmap.fromImage(icon_image(name, colors.highlighted_text, size, ratio))
                icon.addPixmap(selected, QIcon.Mode.Selected)
        return icon

    def _icon(self, key: int) -> QIcon | None:
        if kind_of(key) == FOLDER and ident_of(key) in self.emblems:
            return None  # (its emoji, first in its name, in place of the folder's icon)
        return self._icons.get(key if key in (TRASH, ARCHIVED) else kind_of(key))

    # ----- what is shown
    def show_conversations(
        self,
        conversations: Sequence[ChatRow | Conversation],
        current: int | None,
        folders: Sequence[FolderRow] = (),
        collapsed: frozenset[int] = frozenset(),
        archived: int = 0,
        trashed: int = 0,
    ) -> None:
        """The chat tree: `conversations` newest first (pinned ones go on top), in `folders` (those in
        `collapsed` shown closed); the Archived and Trash entries with their counts."""
        was = self.mode
        self.mode = "chats"
        self._open = current
        self.view_bar.hide()
        self.empty_button.hide()
        self.list.setUniformRowHeights(True)
        self.list.setRootIsDecorated(True)  # (folders' arrows)
        entries = {
            ARCHIVED: self.tr("Archived ({n})").format(n=archived),
            TRASH: self.tr("Trash ({n})").format(n=trashed),
        }
        self._fill(lambda: self.model.set_tree(folders, conversations, entries, {"pinned": self.tr("Pinned")}), was)
        self._quiet = True
        self.list.setExpanded(self.model.index_for(PINNED), True)
        for f in folders:
            index = self.model.index_of(FOLDER, f.id)
            if self.list.isExpanded(index) == (f.id in collapsed):
                self.list.setExpanded(index, f.id not in collapsed)
        self._quiet = False
        self._select_open()

    def show_list(self, mode: str, conversations: Sequence[Conversation], tips: dict[int, str] | None = None) -> None:
        """The archived chats (`mode` "archived") or the Trash ("trash"), with the bar to go back."""
        was = self.mode
        self.mode = mode
        self.view_bar.show()
        self.list.setRootIsDecorated(False)  # a flat list: no room kept for arrows
        self.empty_button.setVisible(mode == "trash")
        self.empty_button.setEnabled(bool(conversations))
        self.view_title.setText(self.tr("Trash") if mode == "trash" else self.tr("Archived"))
        empty = self.tr("The Trash is empty.") if mode == "trash" else self.tr("No archived chats.")
        self._fill(lambda: self.model.set_flat(conversations, empty, tips), was)
        if mode == "archived":
            self._select_open()

    def show_hits(self, hits: list[SearchHit]) -> None:
        was = self.mode
        self.mode = "hits"
        self.view_bar.hide()
        self.empty_button.hide()
        self.list.setUniformRowHeights(False)  # a hit is two lines
        self.list.setRootIsDecorated(False)
        name = self.scope.project_name()
        empty = self.tr("No matches")
        if name is not None:
            empty = self.tr("No matches in “{name}”").format(name=elided(name, self.list))
        self._fill(lambda: self.model.set_hits(hits, empty), was)

    def set_projects(self, projects: Sequence[tuple[int, str, str]]) -> bool:
        """The projects the search can be narrowed to, (folder id, icon, name); True when the one searched
        is gone (the search is over every chat again)."""
        gone = self.scope.set_projects(projects)
        self._say_scope()
        return gone

    def _scope_chosen(self) -> None:
        self._say_scope()
        if self.search.text().strip():
            self._debounce.stop()
            self.search_changed.emit(self.search.text())

    def _say_scope(self) -> None:
        name = self.scope.project_name()
        said = self.tr("Search all chats") if name is None else self.tr("Search in “{name}”").format(name=name)
        shown = said if name is None else self.tr("Search in “{name}”").format(name=elided(name, self.search))
        self.search.setPlaceholderText(shown)  # (the scope button's tooltip has the whole name)
        self.search.setAccessibleName(said)

    def _fill(self, build: object, was: str) -> None:
        self.list.blockSignals(True)
        self.list.selectionModel().blockSignals(True)
        if was != self.mode:
            self.list.clearSelection()
            self.list.setCurrentIndex(QModelIndex())
        build()  # type: ignore[operator]
        self.list.selectionModel().blockSignals(False)
        self.list.blockSignals(False)

    def _select_open(self) -> None:
        """Only the open chat selected, none for a new chat (a selection of several chats is kept as it is)."""
        if len(self.selected_ids()) > 1:
            return
        index = self.model.index_of(CHAT, self._open) if self._open is not None else QModelIndex()
        sm = self.list.selectionModel()
        selected = sm.selectedIndexes()
        if selected == ([index] if index.isValid() else []) and (not index.isValid() or sm.currentIndex() == index):
            return  # so already (the list read again after a message was saved): no repaint of every row
        self._quietly_select(index)

    def _quietly_select(self, index: QModelIndex) -> None:
        """Select this row only (none when `index` is invalid) without a `selected` signal: the chat is open
        already. The view is repainted by hand, since it learns of a selection through those signals."""
        sm = self.list.selectionModel()
        sm.blockSignals(True)
        if index.isValid():
            sm.setCurrentIndex(index, sm.SelectionFlag.ClearAndSelect)
        else:
            sm.clearSelection()
        sm.blockSignals(False)
        self.list.viewport().update()

    def select(self, conversation_id: int) -> None:
        """Highlight this chat (opened from elsewhere: a search hit, the keyboard, a script)."""
        self._open = conversation_id
        if self.mode not in ("chats", "archived"):
            return
        index = self.model.index_of(CHAT, conversation_id)
        if index.isValid():
            self._quietly_select(index)
            self.list.scrollTo(index)

    # ----- reading the rows
    def selected_ids(self) -> list[int]:
        """The chats selected, top to bottom."""
        if self.mode == "hits":
            return []
        keys = {k for i in self.list.selectionModel().selectedIndexes() if kind_of(k := i.internalId()) == CHAT}
        if len(keys) <= 1:  # (one chat: no walk over every row, a click asks this several times)
            return [ident_of(k) for k in keys]
        return [ident_of(k) for k in self.model.chat_keys() if k in keys]

    def selected_folder(self) -> int | None:
        """The folder selected, when a folder is all that is selected."""
        keys = [i.internalId() for i in self.list.selectionModel().selectedIndexes()]
        return ident_of(keys[0]) if len(keys) == 1 and kind_of(keys[0]) == FOLDER else None

    def current_id(self) -> int | None:
        """The selected chat (a row merely current, as focus leaves the first one, is not selected)."""
        ids = self.selected_ids()
        return ids[0] if len(ids) == 1 else None

    def chat_ids(self) -> list[int]:
        """Every chat listed, top to bottom."""
        return [ident_of(k) for k in self.model.chat_keys()] if self.mode != "hits" else []

    def row_texts(self) -> list[str]:
        """What each top-level row says (search hits: title and snippet)."""
        return [self.model.text(k) for k in self.model.row_keys()]

    def index_of(self, conversation_id: int) -> QModelIndex:
        return self.model.index_of(CHAT, conversation_id)

    def folder_index(self, folder_id: int) -> QModelIndex:
        return self.model.index_of(FOLDER, folder_id)

    def key_at(self, pos: QPoint) -> int | None:
        index = self.list.indexAt(pos)
        return index.internalId() if index.isValid() else None

    def mark_menu_row(self, key: int | None) -> None:
        """Ring the row whose context menu is open (None: the menu closed)."""
        self.rows.menu_key = key
        self.list.viewport().update()

    def id_at(self, pos: QPoint) -> int | None:
        """The chat of the row at `pos` (viewport coordinates), if any."""
        key = self.key_at(pos)
        return ident_of(key) if key is not None and kind_of(key) == CHAT else None

    # ----- what the user does
    def _on_selection(self) -> None:
        if self.mode not in ("chats", "archived"):
            return
        cid = self.current_id()
        if cid is not None and cid != self._open:
            self._open = cid
            self.selected.emit(cid)

    def _on_expanded(self, index: QModelIndex, expanded: bool) -> None:
        key = index.internalId()
        if not self._quiet and self.mode == "chats" and kind_of(key) == FOLDER:
            self.folder_collapsed.emit(ident_of(key), not expanded)

    def _activate(self, index: QModelIndex) -> None:
        if not index.isValid():
            return
        key = index.internalId()
        kind = kind_of(key)
        if key in (ARCHIVED, TRASH):
            self.view_requested.emit("archived" if key == ARCHIVED else "trash")
        elif kind == HIT:
            hit = self.model.hit(key)
            if hit is not None:
                self.search_hit.emit(hit.conversation_id, hit.message_id)
        elif kind == CHAT and self.mode in ("chats", "archived") and len(self.selected_ids()) <= 1:
            cid = ident_of(key)
            if cid != self._open:  # (a click has selected, and so opened, it already)
                self._open = cid
                self.selected.emit(cid)


__all__ = ["ChatListWidget", "ConversationList", "FolderRow", "key_of"]
