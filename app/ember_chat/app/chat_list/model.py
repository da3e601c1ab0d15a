"""The chat list's model: a tree of rows (the Pinned section and its chats, folders with their
subfolders and chats, chats in no folder, then the Archived and Trash entries), or a flat list
(search hits, the archived chats, the Trash).

Every row has a stable integer key (its kind in the low bits, its id above), so a rebuild swaps the
tree in one `layoutChanged` (or, when the new tree differs by one row moved or added within one parent —
a message saved, a new chat — moves or inserts that row alone, `_step`) and moves Qt's persistent
indexes by key: the selection, the current row,
each folder's expanded state and the scroll position survive, and no row object is made per chat
(5,000 chats rebuild in a few milliseconds). Chats drag onto folders (`dropMimeData`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QMimeData, QModelIndex, QPersistentModelIndex, Qt

from ember_chat.engine.storage.conversations import ChatRow, Conversation, SearchHit

CHAT, FOLDER, SECTION, ENTRY, HIT, NOTE = range(6)
KIND_BITS = 3
ROOT = 0
PINNED = SECTION | (1 << KIND_BITS)  # the Pinned section's key
ARCHIVED = ENTRY | (1 << KIND_BITS)  # the "Archived" entry
TRASH = ENTRY | (2 << KIND_BITS)  # the "Trash" entry
MIME = "application/x-ember-chat-ids"
KeyIndex = QModelIndex | QPersistentModelIndex


def key_of(kind: int, ident: int) -> int:
    return kind | (ident << KIND_BITS)


def kind_of(key: int) -> int:
    return key & ((1 << KIND_BITS) - 1)


def ident_of(key: int) -> int:
    return key >> KIND_BITS


@dataclass(frozen=True)
class FolderRow:
    """What the list needs of a folder (the store's `Folder` has these fields)."""

    id: int
    name: str
    parent_id: int | None


_KIND_MASK = (1 << KIND_BITS) - 1
_ON, _SEL, _NEVER = Qt.ItemFlag.ItemIsEnabled, Qt.ItemFlag.ItemIsSelectable, Qt.ItemFlag.ItemNeverHasChildren
_DRAG, _DROP = Qt.ItemFlag.ItemIsDragEnabled, Qt.ItemFlag.ItemIsDropEnabled
# by flat (a list) or not (the tree), then by kind: made once, the view asks for every row it lays out
_FLAGS: dict[bool, dict[int, Qt.ItemFlag]] = {
    flat: {
        CHAT: _ON | _SEL | _NEVER | (Qt.ItemFlag.NoItemFlags if flat else _DRAG | _DROP),
        FOLDER: _ON | _SEL | _DROP,
        SECTION: _ON,  # the Pinned section: it holds chats, it is not selected
        ENTRY: _ON | _NEVER,  # the Archived and Trash entries: they act, they are not selected
        HIT: _ON | _SEL | _NEVER,
        NOTE: _NEVER,
    }
    for flat in (False, True)
}
_ROOT_FLAGS = {False: _DROP, True: Qt.ItemFlag.NoItemFlags}
# the same as lists by kind (indexed by a key's low bits: one lookup for the two calls per row a layout makes)
_KIND_FLAGS = {
    flat: [by_kind.get(k, Qt.ItemFlag.NoItemFlags) for k in range(1 << KIND_BITS)] for flat, by_kind in _FLAGS.items()
}
_R = Qt.ItemDataRole
_DISPLAY, _TOOLTIP, _USER, _DECORATION = (
    int(r.value) for r in (_R.DisplayRole, _R.ToolTipRole, _R.UserRole, _R.DecorationRole)
)
_TEXT_ROLES = frozenset(int(r.value) for r in (_R.DisplayRole, _R.EditRole, _R.AccessibleTextRole))


class ChatTreeModel(QAbstractItemModel):
    """Rows by key: `_kids[parent key]` lists the child keys in order, `_up[key]` the parent's key,
    `_row[key]` the row under it, `_text[key]` / `_tip[key]` what is shown."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._kids: dict[int, list[int]] = {ROOT: []}
        self._up: dict[int, int] = {}
        self._row: dict[int, int] = {}
        self._text: dict[int, str] = {}
        self._tip: dict[int, str] = {}
        self._hits: list[SearchHit] = []
        self.flat = False  # a flat list (search hits, archived, Trash): no drag and drop
        self._kind_flags, self._root_flags = _KIND_FLAGS[False], _ROOT_FLAGS[False]  # (as `flat` says)
        self.on_drop: Callable[[list[int], int | None], None] | None = None  # chats dropped on a folder
        self.decorate: Callable[[int], Any] | None = None  # a row's icon by key (the list's icons)

    # ----- building
    def set_tree(
        self,
        folders: Sequence[FolderRow],
        chats: Sequence[ChatRow | Conversation],
        entries: dict[int, str],
        labels: dict[int, str],
    ) -> None:
        """The tree: pinned chats (by newest activity, in their own section), folders (their order)
        with subfolders then chats, chats in no folder, then `entries` (key → text)."""
        kids: dict[int, list[int]] = {ROOT: []}
        text: dict[int, str] = {}
        tip: dict[int, str] = {}
        pinned = [c for c in chats if c.pinned]
        if pinned:
            kids[ROOT].append(PINNED)
            text[PINNED] = labels["pinned"]
            kids[PINNED] = []
        known = {f.id for f in folders}
        for f in folders:
            k = key_of(FOLDER, f.id)
            kids[k] = []
            text[k] = tip[k] = f.name
        for f in folders:
            top = f.parent_id is None or f.parent_id not in known
            kids[ROOT if top else key_of(FOLDER, f.parent_id or 0)].append(key_of(FOLDER, f.id))
        for c in chats:
            k = key_of(CHAT, c.id)
            text[k] = tip[k] = c.title
            if c.pinned:
                kids[PINNED].append(k)
            elif c.folder_id is not None and c.folder_id in known:
                kids[key_of(FOLDER, c.folder_id)].append(k)
            else:
                kids[ROOT].append(k)
        for k, label in entries.items():
            kids[ROOT].append(k)
            text[k] = tip[k] = label
        if self.flat or not self._step(kids, text, tip):
            self._swap(kids, text, tip, flat=False)

    def set_flat(self, chats: Sequence[Conversation], empty_text: str, tips: dict[int, str] | None = None) -> None:
        """A flat list of chats (archived, Trash); `empty_text` when there is none."""
        kids: dict[int, list[int]] = {ROOT: [key_of(CHAT, c.id) for c in chats]}
        text = {key_of(CHAT, c.id): c.title for c in chats}
        tip = {k: (tips or {}).get(ident_of(k), v) for k, v in text.items()}
        if not chats:
            kids[ROOT] = [key_of(NOTE, 0)]
            text[key_of(NOTE, 0)] = empty_text
        self._swap(kids, text, tip, flat=True)

    def set_hits(self, hits: Sequence[SearchHit], empty_text: str) -> None:
        self._hits = list(hits)
        kids = {ROOT: [key_of(HIT, i) for i in range(len(hits))] or [key_of(NOTE, 0)]}
        text = {key_of(HIT, i): f"{h.conversation_title}\n{' '.join(h.text.split())}" for i, h in enumerate(hits)}
        text[key_of(NOTE, 0)] = empty_text
        self._swap(kids, text, dict(text), flat=True)

    def _swap(self, kids: dict[int, list[int]], text: dict[int, str], tip: dict[int, str], flat: bool) -> None:
        """Replace the tree in one layout change; persistent indexes follow their key (or go)."""
        self.layoutAboutToBeChanged.emit()
        old = self.persistentIndexList()
        old_keys = [i.internalId() for i in old]
        self._kids = kids
        self._up = {k: p for p, ks in kids.items() for k in ks}
        self._row = {k: r for ks in kids.values() for r, k in enumerate(ks)}
        self._text, self._tip, self.flat = text, tip, flat
        self._kind_flags, self._root_flags = _KIND_FLAGS[flat], _ROOT_FLAGS[flat]
        new = [self._index(k, i.column()) for k, i in zip(old_keys, old, strict=True)]
        self.changePersistentIndexList(old, new)
        self.layoutChanged.emit()

    def _step(self, kids: dict[int, list[int]], text: dict[int, str], tip: dict[int, str]) -> bool:
        """The tree as `kids` says when it differs from the one shown by at most one row moved within its
        parent or one row added (a message saved moves its chat to the top; a new chat adds one), plus
        texts: one row move or insert and a `dataChanged` per changed text, instead of a new layout that
        has the view lay out and paint every row again. False (nothing done) for any other change."""
        old, was_text, was_tip = self._kids, self._text, self._tip
        if kids.keys() != old.keys():
            return False
        changed = [p for p, ks in kids.items() if ks != old[p]]
        if len(changed) > 1:
            return False
        if changed:
            p = changed[0]
            was, now = old[p], kids[p]
            # the same rows elsewhere, and in this parent: the old ones plus one, or the same ones, one moved
            if len(now) == len(was) + 1:
                at = next((i for i, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), len(was))
                if now[:at] + now[at + 1 :] != was or now[at] in self._up:
                    return False
                self.beginInsertRows(self._index(p), at, at)
                self._set(kids, text, tip)
                self.endInsertRows()
            elif len(now) == len(was):
                first = next(i for i, (a, b) in enumerate(zip(was, now, strict=True)) if a != b)
                last = next(i for i in range(len(was) - 1, -1, -1) if was[i] != now[i])
                if now[first] == was[last] and now[first + 1 : last + 1] == was[first:last]:
                    src, dest = last, first  # a row moved up
                elif now[last] == was[first] and now[first:last] == was[first + 1 : last + 1]:
                    src, dest = first, last + 1  # a row moved down (Qt counts the destination before the move)
                else:
                    return False
                parent = self._index(p)
                if not self.beginMoveRows(parent, src, src, parent, dest):
                    return False
                self._set(kids, text, tip)
                self.endMoveRows()
            else:
                return False
        self._text, self._tip = text, tip
        for k in [k for k, t in text.items() if was_text.get(k) != t or was_tip.get(k) != tip.get(k)]:
            index = self._index(k)
            self.dataChanged.emit(index, index)
        return True

    def _set(self, kids: dict[int, list[int]], text: dict[int, str], tip: dict[int, str]) -> None:
        self._kids, self._text, self._tip = kids, text, tip
        self._up = {k: p for p, ks in kids.items() for k in ks}
        self._row = {k: r for ks in kids.values() for r, k in enumerate(ks)}

    # ----- reading
    def _index(self, key: int, column: int = 0) -> QModelIndex:
        row = self._row.get(key)
        return QModelIndex() if row is None else self.createIndex(row, column, key)

    def index_of(self, kind: int, ident: int) -> QModelIndex:
        return self._index(key_of(kind, ident))

    def index_for(self, key: int) -> QModelIndex:
        return self._index(key)

    def row_keys(self, parent: int = ROOT) -> list[int]:
        return list(self._kids.get(parent, []))

    def chat_keys(self) -> list[int]:
        """Every chat row, top to bottom (folders' chats included, whether or not they are expanded)."""
        out: list[int] = []

        def walk(k: int) -> None:
            for c in self._kids.get(k, []):
                if kind_of(c) == CHAT:
                    out.append(c)
                walk(c)

        walk(ROOT)
        return out

    def hit(self, key: int) -> SearchHit | None:
        return self._hits[ident_of(key)] if kind_of(key) == HIT else None

    def text(self, key: int) -> str:
        return self._text.get(key, "")

    def parent_key(self, key: int) -> int:
        return self._up.get(key, ROOT)

    # ----- QAbstractItemModel (asked for every row the view lays out: an invalid index has id 0, ROOT)
    def index(self, row: int, column: int = 0, parent: KeyIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        kids = self._kids.get(parent.internalId())
        if kids is None or column or row < 0 or row >= len(kids):
            return QModelIndex()
        return self.createIndex(row, 0, kids[row])

    def parent(self, index: KeyIndex = QModelIndex()) -> QModelIndex:  # type: ignore[override]  # noqa: B008
        up = self._up.get(index.internalId(), ROOT)
        return QModelIndex() if up == ROOT else self.createIndex(self._row[up], 0, up)

    def rowCount(self, parent: KeyIndex = QModelIndex()) -> int:  # noqa: B008
        kids = self._kids.get(parent.internalId())
        return 0 if kids is None else len(kids)

    def columnCount(self, parent: KeyIndex = QModelIndex()) -> int:  # noqa: B008
        return 1

    def hasChildren(self, parent: KeyIndex = QModelIndex()) -> bool:  # noqa: B008
        return bool(self._kids.get(parent.internalId()))

    def data(self, index: KeyIndex, role: int = _DISPLAY) -> Any:
        key = index.internalId()
        if key == ROOT:
            return None
        if role in _TEXT_ROLES:
            return self._text.get(key, "")
        if role == _TOOLTIP:
            return self._tip.get(key)
        if role == _USER:
            return key
        if role == _DECORATION and self.decorate is not None:
            return self.decorate(key)
        return None

    def flags(self, index: KeyIndex) -> Qt.ItemFlag:
        key = index.internalId()
        return self._kind_flags[key & _KIND_MASK] if key else self._root_flags  # (key 0: the root)

    # ----- drag and drop
    def supportedDropActions(self) -> Qt.DropAction:
        return Qt.DropAction.MoveAction

    def mimeTypes(self) -> list[str]:
        return [MIME]

    def mimeData(self, indexes: Sequence[QModelIndex]) -> QMimeData:
        ids = [ident_of(i.internalId()) for i in indexes if i.isValid() and kind_of(i.internalId()) == CHAT]
        data = QMimeData()
        data.setData(MIME, json.dumps(ids).encode())
        return data

    def drop_target(self, parent: KeyIndex) -> int | bool | None:  # (False, not an id: ids start at 1)
        """The folder a drop on `parent` moves chats into (None: out of any folder), False: no drop."""
        if self.flat:
            return False
        key = parent.internalId() if parent.isValid() else ROOT
        if kind_of(key) == CHAT:  # onto a chat: into the folder it is in
            key = self._up.get(key, ROOT)
        if key == ROOT:
            return None
        return ident_of(key) if kind_of(key) == FOLDER else False

    def canDropMimeData(self, data: QMimeData, action: Qt.DropAction, row: int, column: int, parent: KeyIndex) -> bool:
        return data.hasFormat(MIME) and self.drop_target(parent) is not False

    def dropMimeData(self, data: QMimeData, action: Qt.DropAction, row: int, column: int, parent: KeyIndex) -> bool:
        """Chats dropped on a folder (or a chat in it) move into it; dropped between top-level rows,
        out of any folder. The move itself is the window's (`on_drop`): an undoable store change."""
        target = self.drop_target(parent)
        if not data.hasFormat(MIME) or target is False or self.on_drop is None:
            return False
        try:
            ids = [int(i) for i in json.loads(bytes(data.data(MIME).data()).decode())]
        except (ValueError, TypeError):
            return False
        if not ids:
            return False
        self.on_drop(ids, None if target is None else int(target))
        return True
