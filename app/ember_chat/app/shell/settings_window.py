"""One Settings window (issue 28, the gap to LM Studio's and Jan's settings): a list of sections on the
left, the section's page on the right, a Close button under both. The pages are the dialogs Ember had
under Settings and Models (Local API server, Tools, Presets, Backups, Conversation caches, Connections),
embedded as they are: each controller still makes its dialog and asks for it to be shown, and this
window shows it as a page (SettingsWindow.show_page) instead of a window of its own, so their logic
lives in one place. Appearance (theme, text size, side panel) mirrors the View menu's actions.

One instance (opening it again raises it); it remembers its last section and its size; each page
scrolls, so the window fits an 800×600 screen."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from PySide6.QtCore import QSettings, QSize, Qt
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import (
    QAbstractButton,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.backups.dialog import WindowBackups
from ember_chat.app.models.actions import ModelActions
from ember_chat.app.models.kv_caches import WindowKvCaches
from ember_chat.app.presets.actions import WindowPresets
from ember_chat.app.qt.window_frame import TITLE_BAR_ALLOWANCE
from ember_chat.app.server.api_control import ApiServerControl
from ember_chat.app.tools.actions import WindowTools
from ember_chat.app.transcript.font_size import TranscriptFontSize
from ember_chat.app.voice.read_aloud import ReadAloud
from ember_chat.app.voice.settings_page import VoicePage
from ember_chat.engine.models.download_queue import DownloadQueue
from ember_chat.engine.models.library import ModelLibrary

SECTION_KEY = "settings_window/section"  # in the window state (QSettings): the last section shown
SIZE_KEY = "settings_window/size"
DEFAULT_SIZE = QSize(960, 720)  # (the API page shows its settings and six rows of its log)


class SettingsHost(Protocol):
    """What the window's sections need from the main window (it satisfies this; nothing here imports it).
    The controllers are the window's own (api, tools, presets, backups, kv_caches, models): each opens
    its page with open_dialog() / open_connections()."""

    window_state: QSettings
    settings_window: SettingsWindow
    theme_group: QActionGroup
    side_action: QAction
    font_size: TranscriptFontSize
    library: ModelLibrary
    downloads: DownloadQueue | None  # (None: nothing downloads, so no Model Manager)
    api: ApiServerControl
    tools: WindowTools
    presets: WindowPresets
    backups: WindowBackups
    kv_caches: WindowKvCaches
    models: ModelActions
    read_aloud: ReadAloud


@dataclass(frozen=True)
class Section:
    """`open` shows the section: a controller's open_dialog(), which makes its dialog (once) and gives it
    back through SettingsWindow.show_page; it runs each time the section is chosen, so a page refreshes
    what it lists (backups, cache usage) as it did when it opened as a dialog."""

    key: str
    title: str
    open: Callable[[], object]


class SettingsWindow(QDialog):
    def __init__(self, sections: Sequence[Section], state: QSettings, parent: QWidget) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Settings"))
        self.setObjectName("settingsWindow")
        self.setSizeGripEnabled(True)
        self.state = state
        self.sections = {s.key: s for s in sections}
        self._keys = [s.key for s in sections]
        self._showing = False  # a page being shown: the list's selection follows without opening it again

        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Settings sections"))
        self.list.setAccessibleDescription(self.tr("Choose a section; its settings show on the right"))
        self.list.setFrameShape(QFrame.Shape.NoFrame)
        self.list.setStyleSheet("QListWidget::item { padding: 5px 12px; }")  # (a sidebar's rows, not a table's)
        self.list.addItems([s.title for s in sections])
        self.list.setFixedWidth(max(170, self.list.sizeHintForColumn(0) + 40))
        self.list.currentRowChanged.connect(self._row_chosen)
        self.stack = QStackedWidget()
        self._scrolls: dict[str, QScrollArea] = {}
        self._pages: dict[str, QWidget] = {}
        for s in sections:
            scroll = QScrollArea()
            scroll.setWidgetResizable(True)  # (a page wider or taller than the room scrolls)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setAccessibleName(s.title)
            self._scrolls[s.key] = scroll
            self.stack.addWidget(scroll)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.close_button = buttons.button(QDialogButtonBox.StandardButton.Close)
        self.close_button.setAccessibleName(self.tr("Close"))
        self.close_button.setToolTip(self.tr("Close the settings (changes are already in effect)"))
        buttons.rejected.connect(self.reject)

        # the list and the pages reach the window's edges (a sidebar, as in LM Studio and Jan): the pages'
        # own margins frame them, and a small screen keeps its height for the page
        columns = QHBoxLayout()
        columns.setSpacing(0)
        columns.addWidget(self.list)
        columns.addWidget(self.stack, 1)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addLayout(columns, 1)
        buttons.setContentsMargins(8, 6, 10, 8)
        outer.addWidget(buttons)

    # ----- which section
    @property
    def current_key(self) -> str:
        row = self.list.currentRow()
        return self._keys[row] if 0 <= row < len(self._keys) else ""

    def page(self, key: str) -> QWidget | None:
        """The page shown for `key` (None until the section was opened once)."""
        return self._pages.get(key)

    def open_section(self, key: str | None = None) -> None:
        """Show the window at `key` (None: the section shown last, else the first)."""
        if key is None:
            remembered = self.state.value(SECTION_KEY)
            key = remembered if remembered in self.sections else self._keys[0]
        self.sections[key].open()

    def show_made(self, key: str, make: Callable[[], QWidget]) -> None:
        """Show a page of this window's own (made the first time; refreshed each time it shows)."""
        page = self.page(key) or make()
        refresh = getattr(page, "refresh", None)
        if callable(refresh):
            refresh()
        self.show_page(key, page)

    def _row_chosen(self, row: int) -> None:
        if not self._showing and 0 <= row < len(self._keys):
            self.open_section(self._keys[row])

    def show_page(self, key: str, page: QWidget) -> None:
        """Show `page` as the section `key` (embedded the first time: a dialog becomes a page), and the
        window with it, raised."""
        if not self.isVisible():
            # the window first, laid out at its size: the page then shows at its own final size (the API
            # page shares its height between its settings and its log when it shows)
            self._size_to_screen()
            self.show()
            self.list.setFocus()  # (not a page's field: a key typed at once changes nothing)
        scroll = self._scrolls[key]
        if self._pages.get(key) is not page:
            old = scroll.takeWidget()
            if old is not None:  # (a controller made its dialog anew)
                old.deleteLater()
            self._embed(page)
            self._pages[key] = page
            scroll.setWidget(_top_aligned(page))
        self._showing = True
        try:
            self.list.setCurrentRow(self._keys.index(key))
        finally:
            self._showing = False
        self.stack.setCurrentWidget(scroll)
        page.setVisible(True)
        self.state.setValue(SECTION_KEY, key)
        self.raise_()
        self.activateWindow()

    def _embed(self, page: QWidget) -> None:
        page.setWindowFlags(Qt.WindowType.Widget)
        for close in _close_buttons(page):
            close.hide()  # the window's Close closes every page
            box = close.parentWidget()
            if isinstance(box, QDialogButtonBox) and not any(b.isVisibleTo(box) for b in box.buttons()):
                box.hide()  # (nothing left in its row)
        if isinstance(page, QDialog):
            # Esc in a page, or a page closed by its code, closes the window (the page stays in it)
            page.finished.connect(lambda _result, p=page: self._page_closed(p))

    def _page_closed(self, page: QWidget) -> None:
        page.setVisible(True)
        if self.isVisible():
            self.reject()

    # ----- size
    def _size_to_screen(self) -> None:
        saved = self.state.value(SIZE_KEY)
        size = saved if isinstance(saved, QSize) and saved.isValid() else DEFAULT_SIZE
        screen = self.parentWidget().screen() if self.parentWidget() is not None else self.screen()
        room = screen.availableGeometry()
        width = max(self.minimumSizeHint().width(), min(size.width(), room.width()))
        height = max(self.minimumSizeHint().height(), min(size.height(), room.height() - TITLE_BAR_ALLOWANCE))
        self.resize(width, height)
        frame = self.frameGeometry()
        frame.moveCenter(room.center())
        self.move(max(room.left(), frame.left()), max(room.top(), frame.top()))

    def done(self, result: int) -> None:  # Qt override: Close, Esc or the title bar (closeEvent rejects)
        self.state.setValue(SIZE_KEY, self.size())
        super().done(result)
        for page in self._pages.values():
            if isinstance(page, QDialog):
                page.done(result)  # its own clean-up, as when it closed as a dialog (Tools' timer, a test)


def _top_aligned(page: QWidget) -> QWidget:
    """`page` in a holder the scroll area sizes: a page with nothing that grows (a form) keeps its own
    height at the top instead of spreading its rows over the window's; one with a list or a table grows."""
    holder = QWidget()
    layout = QVBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(page)
    own = page.layout()
    if own is None or not own.expandingDirections() & Qt.Orientation.Vertical:
        layout.addStretch(1)
    return holder


def _close_buttons(page: QWidget) -> list[QAbstractButton]:
    """A dialog's own Close: the one it names `close_button`, or its button box's."""
    named = getattr(page, "close_button", None)
    found = [named] if isinstance(named, QAbstractButton) else []
    for box in page.findChildren(QDialogButtonBox):
        button = box.button(QDialogButtonBox.StandardButton.Close)
        if button is not None and button not in found:
            found.append(button)
    return found


class AppearancePage(QWidget):
    """Theme, the transcript's text size and the side panel: the View menu's own actions, so the menu and
    this page can never disagree (a change made in one shows in the other)."""

    def __init__(
        self,
        themes: QActionGroup,
        side_panel: QAction,
        text_size: Callable[[], int],
        bigger: Callable[[], None],
        smaller: Callable[[], None],
        normal: Callable[[], None],
    ) -> None:
        super().__init__()
        self._text_size = text_size
        theme_row = QVBoxLayout()
        self.themes: dict[str, QRadioButton] = {}
        for action in themes.actions():
            radio = QRadioButton(action.text())
            radio.setToolTip(self.tr("Ember's colours (View ▸ Theme)"))
            radio.setChecked(action.isChecked())
            radio.toggled.connect(lambda on, a=action: on and not a.isChecked() and a.trigger())
            action.toggled.connect(radio.setChecked)
            theme_row.addWidget(radio)
            self.themes[action.text().replace("&", "")] = radio

        self.size_label = QLabel()
        self.size_label.setAccessibleName(self.tr("Text size in chats"))
        size_row = QHBoxLayout()
        size_row.addWidget(self.size_label)
        for text, tip, slot in (
            (self.tr("Smaller"), self.tr("Smaller text in chats (Ctrl+-)"), smaller),
            (self.tr("Bigger"), self.tr("Bigger text in chats (Ctrl+=)"), bigger),
            (self.tr("Normal size"), self.tr("The system's text size (Ctrl+0)"), normal),
        ):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(lambda _=False, s=slot: (s(), self.refresh()))
            size_row.addWidget(button)
        size_row.addStretch(1)

        self.side_panel = QCheckBox(self.tr("Show the side panel (model, parameters, speed)"))
        self.side_panel.setChecked(side_panel.isChecked())
        self.side_panel.setToolTip(self.tr("View ▸ Side panel (Ctrl+Shift+S); a narrow window hides it by itself"))
        self.side_panel.toggled.connect(lambda on: on != side_panel.isChecked() and side_panel.trigger())
        side_panel.toggled.connect(self.side_panel.setChecked)

        form = QFormLayout(self)
        form.addRow(self.tr("Theme"), theme_row)
        form.addRow(self.tr("Text size"), size_row)
        form.addRow("", self.side_panel)
        self.refresh()

    def refresh(self) -> None:
        self.size_label.setText(self.tr("{points} pt").format(points=self._text_size()))


class ModelsPage(QWidget):
    """Where the models are (Models ▸ Open models folder / Change models folder…) and the Model Manager."""

    def __init__(
        self,
        folder: Callable[[], str],
        open_folder: Callable[[], None],
        change_folder: Callable[[], None],
        open_manager: Callable[[], None] | None,
    ) -> None:
        super().__init__()
        self._folder = folder
        self.folder = QLabel()
        self.folder.setWordWrap(True)
        self.folder.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.folder.setAccessibleName(self.tr("Models folder"))
        buttons = QHBoxLayout()
        for text, tip, slot in (
            (self.tr("Open folder"), self.tr("Show the models folder in the file manager"), open_folder),
            (self.tr("Change…"), self.tr("Choose another folder for your models"), change_folder),
        ):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(lambda _=False, s=slot: (s(), self.refresh()))
            buttons.addWidget(button)
        buttons.addStretch(1)
        form = QFormLayout(self)
        form.addRow(self.tr("Models folder"), self.folder)
        form.addRow("", buttons)
        if open_manager is not None:  # (no downloads: no Model Manager)
            manager = QPushButton(self.tr("Model Manager…"))
            manager.setToolTip(self.tr("Download, import and remove models (Ctrl+M)"))
            manager.clicked.connect(lambda: open_manager())
            row = QHBoxLayout()
            row.addWidget(manager)
            row.addStretch(1)
            form.addRow(self.tr("Models"), row)
        self.refresh()

    def refresh(self) -> None:
        self.folder.setText(self._folder())


def build_settings_window(host: SettingsHost) -> SettingsWindow:
    """The window's sections, in the order of the list; made once (the pages when first shown)."""
    tr = SettingsWindow.tr  # (the class's context, as its own texts)

    def appearance() -> None:
        fs = host.font_size

        def page() -> AppearancePage:
            made = AppearancePage(
                host.theme_group, host.side_action, lambda: fs.points, fs.bigger, fs.smaller, fs.normal
            )
            fs.resized.connect(made.refresh)  # (View ▸ Bigger text, Ctrl+= in the window: the page says it too)
            return made

        host.settings_window.show_made("appearance", page)

    def models() -> None:
        m = host.models
        manager = m.open_model_manager if host.downloads is not None else None
        host.settings_window.show_made(
            "models",
            lambda: ModelsPage(
                lambda: str(host.library.models_dir), m.open_models_folder, m.change_models_folder, manager
            ),
        )

    def voice() -> None:
        host.settings_window.show_made("voice", lambda: VoicePage(host.read_aloud))

    sections = [
        Section("appearance", tr("Appearance"), appearance),
        Section("models", tr("Models"), models),
        Section("connections", tr("Connections"), lambda: host.models.open_connections()),
        Section("presets", tr("Presets"), lambda: host.presets.open_dialog()),
        Section("tools", tr("Tools"), lambda: host.tools.open_dialog()),
        Section("api", tr("Local API server"), lambda: host.api.open_dialog()),
        Section("backups", tr("Backups"), lambda: host.backups.open_dialog()),
        Section("kv_caches", tr("Conversation caches"), lambda: host.kv_caches.open_dialog()),
        Section("voice", tr("Voice"), voice),  # read aloud (voice/settings_page.py)
    ]
    assert isinstance(host, QWidget)  # (the main window: the Settings window stays over it)
    return SettingsWindow(sections, host.window_state, host)
