"""The side panel gives way on a narrow window (issue 28, item 4): below the width where the chat list,
the centre and the panel fit with some room (COMFORT), the panel hides by itself, as the sidebars of
LM Studio and Jan do, and comes back when the window is wide again. Its minimum width then no longer
holds the window wide (at 800×600 the window was 848 px, the chat list cut to "Sea…" and the message
box 140 px). View ▸ Side panel (Ctrl+Shift+S) still opens it on a narrow window: the user's choice then
holds until the window is wide again, and what is kept in window.ini is the user's choice, not the
width's (a panel hidden at 800 px comes back on a bigger screen)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QSplitter, QWidget

from ember_chat.app.shell.window_size import default_splitter_sizes

COMFORT = 96  # px beyond the columns' minimum widths before the panel hides: not every column at its least


def _least_width(widget: QWidget) -> int:
    return max(widget.minimumWidth(), widget.minimumSizeHint().width())


class WindowSplitter(QSplitter):
    """The window's columns: chats, centre, side panel (the last). Its minimum width leaves the side
    panel out unless `side_counts` (the user opened it on a narrow window): a narrower window hides
    the panel (SidePanelFit) instead of being held wider."""

    def __init__(self, chats: QWidget, centre: QWidget, side: QWidget) -> None:
        super().__init__(Qt.Orientation.Horizontal)
        self.side_counts = False
        self.addWidget(chats)
        self.addWidget(centre)
        self.addWidget(side)
        # a wider or narrower window changes the chat list and the centre in proportion to their widths
        # (the chat list stayed ~200 px at 1920); the side panel keeps its own
        self.setStretchFactor(0, 1)
        self.setStretchFactor(1, 1)
        self.setSizes([200, 790, 290])  # (until the saved or default sizes: window_size.py)

    def minimumSizeHint(self) -> QSize:  # Qt override
        hint = super().minimumSizeHint()
        side = self.widget(2)
        if side is None or side.isHidden() or self.side_counts:
            return hint
        return QSize(hint.width() - _least_width(side) - self.handleWidth(), hint.height())

    def full_width(self) -> int:
        """The least width the three columns take together, the panel shown or not."""
        widgets = [self.widget(i) for i in range(self.count())]
        return sum(_least_width(w) for w in widgets) + self.handleWidth() * (len(widgets) - 1)


class SidePanelFit(QObject):
    """Hides and shows the side panel with the window's width; `toggle` is the user's View ▸ Side panel."""

    def __init__(self, window: QMainWindow, splitter: WindowSplitter, side: QWidget, action: QAction) -> None:
        super().__init__(window)
        self.window = window
        self.splitter = splitter
        self.side = side
        self.action = action
        self.wanted = True  # the user's choice (kept in window.ini)
        self.hidden_for_width = False
        self._wide: list[int] = []  # the columns' widths at the last resize with the panel shown
        window.installEventFilter(self)

    def collapse_width(self) -> int:
        """Below this window width the panel hides by itself (it follows the font: the panel's least
        width grows with it)."""
        return self.splitter.full_width() + COMFORT

    def narrow(self) -> bool:
        return self.window.width() < self.collapse_width()

    def restore(self, wanted: bool) -> None:
        """At start: the user's last choice; `fit` then decides with the window's width."""
        self.wanted = wanted
        self.hidden_for_width = False
        self._show(wanted)

    def toggle(self) -> None:
        """View ▸ Side panel: the user's choice, on a narrow window too (the window then widens to fit the
        panel at its least, as it did before the panel could hide)."""
        show = self.side.isHidden()
        self.wanted = show
        self.hidden_for_width = False
        self.splitter.side_counts = show and self.narrow()
        self._show(show)

    def fit(self) -> None:
        """Hide the panel on a narrow window, bring it back (as the user left it) on a wide one. The
        columns keep the widths they had with the panel (the splitter has shrunk or grown them in
        proportion before the window's resize reaches here: the chat list was cut to 100 px)."""
        if self.narrow():
            if not self.side.isHidden() and not self.splitter.side_counts:
                self.hidden_for_width = True
                self._show(False)
                total = sum(self.splitter.sizes())
                chats = self._wide[0] if self._wide else self.splitter.sizes()[0]
                chats = max(0, min(chats, total - _least_width(self.splitter.widget(1))))
                self.splitter.setSizes([chats, total - chats, 0])  # the panel's room goes to the centre
            return
        self.splitter.side_counts = False
        if self.hidden_for_width:
            self.hidden_for_width = False
            if self.wanted:
                self._show(True)
                self._give_back_widths()
        if not self.side.isHidden():
            self._wide = self.splitter.sizes()

    def _show(self, on: bool) -> None:
        self.side.setVisible(on)
        self.action.setChecked(on)
        self.splitter.updateGeometry()  # the window's minimum size follows at once

    def _give_back_widths(self) -> None:
        """The panel as wide as it was, the chat list and the centre sharing the rest as they did."""
        total = sum(self.splitter.sizes())
        # (hidden since the window opened narrow: the first layout's widths)
        chats, centre, side = self._wide or default_splitter_sizes(total, _least_width(self.side))
        side = max(side, _least_width(self.side))
        rest = max(0, total - side)
        chats = rest * chats // max(1, chats + centre)
        self.splitter.setSizes([chats, rest - chats, side])

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.window and event.type() == QEvent.Type.Resize:
            self.fit()
        return False
