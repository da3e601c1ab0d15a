"""The window's state kept between runs in window.ini: its geometry (and the screen's size then, see
window_size.grows_back), the splitter's sizes, whether the side panel is wanted and the chat open at
quit (the composition opens it again)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSettings, QSize
from PySide6.QtWidgets import QApplication, QMainWindow, QSplitter, QWidget

from ember_chat.app.shell.side_fit import SidePanelFit
from ember_chat.app.shell.window_size import default_geometry, default_splitter_sizes, grows_back


def relayout(splitter: QSplitter) -> None:
    """The window's minimum size follows its splitter's at once (a side panel hidden sets none)."""
    splitter.updateGeometry()
    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


def restore_window(
    window: QMainWindow, st: QSettings, splitter: QSplitter, side: QWidget, side_fit: SidePanelFit
) -> None:
    """The saved size and place (or the default one, see window_size.py), then the splitter's sizes."""
    # first: a hidden panel sets no minimum height
    side_fit.restore(st.value("side_panel", True, type=bool))
    relayout(splitter)
    available = window.screen().availableGeometry()
    default = default_geometry(available, window.minimumSizeHint())  # 1280×800, less on a smaller screen
    if st.value("geometry"):
        window.restoreGeometry(st.value("geometry"))
        saved_screen = st.value("screen")
        if grows_back(window.size(), saved_screen if isinstance(saved_screen, QSize) else None, default):
            window.setGeometry(default)  # (kept small by a smaller screen: this one has room)
    else:  # the status bar stays on the screen
        window.setGeometry(default)
    side_fit.fit()  # (narrow: the side panel hides)
    if st.value("splitter"):
        splitter.restoreState(st.value("splitter"))
    side_width = side.minimumSizeHint().width()
    if not st.value("splitter") or (not side.isHidden() and splitter.sizes()[2] < side_width):
        # (a panel saved hidden for the width has no width of its own to come back to)
        splitter.setSizes(default_splitter_sizes(window.width(), side_width))


def save_window(
    window: QMainWindow, st: QSettings, splitter: QSplitter, side_fit: SidePanelFit, open_chat: int | None
) -> None:
    st.setValue("geometry", window.saveGeometry())
    st.setValue("splitter", splitter.saveState())
    st.setValue("side_panel", side_fit.wanted)  # (the user's, not the width's)
    st.setValue("screen", window.screen().availableGeometry().size())  # (see grows_back)
    st.setValue("open_chat", open_chat or 0)  # 0: a new chat
    st.sync()
