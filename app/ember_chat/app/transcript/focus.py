"""The transcript and the keyboard: Tab walks the links of the messages (their actions), so where a
walk starts matters. Focus that comes from the keyboard (Tab, Shift+Tab, View ▸ Go to) starts in what
the view shows, never at the top of the document (the view does not jump to the oldest message): the
first Tab goes to the first action in view and Tab walks on down, to the message box after the last
one (it went straight to the message box: issue 28, item 12); the first Shift+Tab goes to the last
action in view, the newest message's in a chat just opened, and walks up. While the transcript has
the keyboard focus a ring in the accent colour goes round it (it has no frame of its own to show
focus); the action the keyboard is on has its own ring (style/focus.py).

`TranscriptFocus` is a part of TranscriptView (`view.focus`) and owns whether the ring shows. The
view's Qt overrides (focusInEvent, focusOutEvent, focusNextPrevChild, event) hand over to it: PySide
calls a Python override of a Qt event handler only when it is defined on a subclass of the Qt class."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFocusEvent, QPainter, QPalette, QTextCursor
from PySide6.QtWidgets import QTextBrowser, QTextEdit

from ember_chat.app.style.focus import RING_WIDTH, draw_focus_ring, ring_keyboard_links

_KEYBOARD = (Qt.FocusReason.TabFocusReason, Qt.FocusReason.BacktabFocusReason, Qt.FocusReason.ShortcutFocusReason)


class TranscriptFocus:
    """Keyboard focus in a QTextBrowser: where a Tab walk starts, and the focus ring."""

    def __init__(self, view: QTextBrowser) -> None:
        self.view = view
        self._ring = False
        self._walk_from_view = False  # the next Tab starts at the top of the view (focus came from the keyboard)
        view.setViewportMargins(RING_WIDTH, RING_WIDTH, RING_WIDTH, RING_WIDTH)  # room for the ring
        ring_keyboard_links(view)  # (the action Tab is on)

    @property
    def ring_shown(self) -> bool:
        return self._ring

    def focus_in(self, event: QFocusEvent) -> None:
        """Before the view's own focusInEvent."""
        self._walk_from_view = event.reason() in _KEYBOARD
        if event.reason() in _KEYBOARD:
            self._start_at_view_end()
            self._show_ring(True)

    def focus_out(self) -> None:
        """Before the view's own focusOutEvent."""
        self._show_ring(False)

    def _start_at_view_end(self) -> None:
        """The text cursor (where Tab looks for the next link) at the end of the last line in view,
        with no link selected; the view stays where it is."""
        vp = self.view.viewport()
        c = self.view.cursorForPosition(QPoint(vp.width() - 1, vp.height() - 1))
        c.clearSelection()
        self._set_cursor_in_place(c)

    def next_prev_child(self, next: bool) -> bool:
        """The view's focusNextPrevChild: Tab walks the links from the text cursor. (Qt starts from
        the top of the document, or its end for Shift+Tab, whenever no link is selected; and from a
        selection it finds the next link but not always the previous one. So without a selected link,
        the walk is started here: Qt is asked for the next link after the character before the one
        wanted.)"""
        view = self.view
        c = view.textCursor()
        from_view, self._walk_from_view = self._walk_from_view, False
        if not view.hasFocus() or c.hasSelection():
            return QTextBrowser.focusNextPrevChild(view, next)
        pos = c.position()
        if next and from_view:  # the first Tab: from the top of the view (the cursor is at its end)
            pos = view.cursorForPosition(QPoint(0, 0)).position()
        if not next:
            pos = self._previous_link_start(pos)
            if pos is None:  # none above: the focus goes back to the control before the transcript
                return QTextEdit.focusNextPrevChild(view, False)
        mark = QTextCursor(view.document())
        if pos > 0:  # (at 0 no selection is needed: Qt starts at the top)
            mark.setPosition(pos - 1)
            mark.setPosition(pos, QTextCursor.MoveMode.KeepAnchor)
        self._set_cursor_in_place(mark)
        moved = QTextBrowser.focusNextPrevChild(view, True)
        now = view.textCursor()
        if (now.anchor(), now.position()) == (mark.anchor(), mark.position()):  # no link after it
            mark.clearSelection()
            self._set_cursor_in_place(mark)
        return moved

    def _previous_link_start(self, pos: int) -> int | None:
        """Where the last link that ends at or before `pos` starts."""
        block = self.view.document().findBlock(pos)
        while block.isValid():
            start = None
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                if frag.position() + frag.length() > pos:
                    break
                if frag.charFormat().isAnchor() and frag.charFormat().anchorHref():
                    start = frag.position()
                it += 1
            if start is not None:
                return start
            block = block.previous()
        return None

    def _set_cursor_in_place(self, c: QTextCursor) -> None:
        """Set the text cursor without scrolling the view."""
        bar = self.view.verticalScrollBar()
        value = bar.value()
        self.view.setTextCursor(c)
        bar.setValue(value)

    def _show_ring(self, on: bool) -> None:
        if self._ring != on:
            self._ring = on
            self.view.update()  # (the frame around the viewport)

    def paint_frame(self) -> None:
        """After the view painted itself: the margin round the viewport (base colour), and the ring."""
        view = self.view
        painter = QPainter(view)
        painter.fillRect(view.rect(), view.palette().color(QPalette.ColorRole.Base))
        if self._ring:
            draw_focus_ring(painter, view.rect(), view.palette(), 4.0)
        painter.end()
