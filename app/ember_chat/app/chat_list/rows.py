"""How the chat list draws its rows: as wide as the list, not as their text (a long title is elided),
a search hit as its chat's title over the passage found, the matched words in bold, and the row whose
context menu is open with a ring in the accent colour (the menu may act on a row that is not selected:
nothing showed which one)."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionViewItem

from ember_chat.app.chat_list.model import ChatTreeModel
from ember_chat.app.style.focus import draw_focus_ring
from ember_chat.engine.storage.conversations import SearchHit

_LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
_ELIDE = Qt.TextElideMode.ElideRight


class OneLineRows(QStyledItemDelegate):
    """Rows as wide as the list, not as their text: a long title is elided to fit."""

    menu_key: int | None = None  # the row whose context menu is open (ConversationList.mark_menu_row)

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        return QSize(1, super().sizeHint(option, index).height())

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        self._paint_row(painter, option, index)
        if self.menu_key is not None and index.internalId() == self.menu_key and index.column() == 0:
            draw_focus_ring(painter, option.rect, option.palette, 3.0)

    def _paint_row(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        model = index.model()
        hit = model.hit(index.internalId()) if isinstance(model, ChatTreeModel) else None
        if hit is None:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""  # the row's background, focus and selection as the style draws them; the text is ours
        style = opt.widget.style() if opt.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, opt.widget)
        painter.save()
        _draw_hit(painter, opt, rect, hit)
        painter.restore()


def _draw_hit(painter: QPainter, opt: QStyleOptionViewItem, rect: QRect, hit: SearchHit) -> None:
    """The chat's title (bold) over the passage (secondary colour, the matched words bold in the text
    colour), each line elided at the right edge."""
    selected = bool(opt.state & QStyle.StateFlag.State_Selected)
    text_color = opt.palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
    quiet = text_color if selected else opt.palette.color(QPalette.ColorRole.PlaceholderText)
    plain, bold = QFont(opt.font), QFont(opt.font)
    bold.setBold(True)
    line = QFontMetrics(plain).height()
    top = rect.top() + max(0, (rect.height() - 2 * line) // 2)
    painter.setFont(bold)
    painter.setPen(text_color)
    title = QFontMetrics(bold).elidedText(hit.conversation_title, _ELIDE, rect.width())
    painter.drawText(QRect(rect.left(), top, rect.width(), line), _LEFT, title)
    x, y, right = rect.left(), top + line, rect.right()
    for text, matched in _match_in_view(hit.parts(), QFontMetrics(plain), rect.width()):
        font = bold if matched else plain
        metrics = QFontMetrics(font)
        width = metrics.horizontalAdvance(text)
        painter.setFont(font)
        painter.setPen(text_color if matched else quiet)
        if x + width > right:  # the rest does not fit: cut here with "…"
            painter.drawText(QRect(x, y, right - x, line), _LEFT, metrics.elidedText(text, _ELIDE, right - x))
            break
        painter.drawText(QRect(x, y, width, line), _LEFT, text)
        x += width


def _match_in_view(parts: list[tuple[str, bool]], metrics: QFontMetrics, width: int) -> list[tuple[str, bool]]:
    """The passage's pieces on one line (line breaks as spaces), its start cut ("…") when the first match
    would otherwise fall past the first two thirds of the row: the match is what the row is for."""
    parts = [(text.replace("\n", " "), matched) for text, matched in parts]
    first = next((i for i, (_, matched) in enumerate(parts) if matched), None)
    if not first:  # no match, or the passage starts with one
        return parts
    before = "".join(text for text, _ in parts[:first])
    if metrics.horizontalAdvance(before) <= width * 2 // 3:
        return parts
    cut = len(before)  # the last words before the match that fit in a third of the row
    while cut > 0 and metrics.horizontalAdvance("…" + before[cut - 1 :]) <= width // 3:
        cut -= 1
    space = before.find(" ", cut)
    start = space + 1 if 0 <= space < len(before) - 1 else cut  # (from a word's start)
    return [("…" + before[start:], False), *parts[first:]]
