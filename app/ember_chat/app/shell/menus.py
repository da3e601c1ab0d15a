"""The main window's menus: File, Chat, Models (its fixed entries made once, so their shortcuts work
from the start; the list of models refreshed from the model picker each time it opens), View, Help;
and the About text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QMessageBox

from ember_chat.app.chat_list.actions import ChatActions
from ember_chat.app.conversation.controller import ChatController
from ember_chat.app.importing.dialog import ImportChats
from ember_chat.app.models.model_bar import ModelBar
from ember_chat.app.shell.settings_window import SettingsHost, build_settings_window
from ember_chat.app.voice.conversation import VoiceConversation
from ember_chat.engine import __version__
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.storage.settings import Settings


class MenuHost(SettingsHost, Protocol):
    """What the menus need from the window (the window satisfies it; menus never import it): what the
    Settings window they build needs (settings_window.py's SettingsHost: the model actions, the font
    size, the theme and side panel actions, the settings' controllers), and what their entries call."""

    models_menu: ModelsMenu
    model_bar: ModelBar
    controller: ChatController
    settings: Settings
    importer: ImportChats  # File ▸ Import chats…
    chats: ChatActions  # the chat list's actions (chat_list/actions.py)
    voice: VoiceConversation  # Chat ▸ Voice conversation
    close: Callable[[], bool]
    stop: Callable[[], None]
    toggle_side_panel: Callable[[], None]
    show_shortcuts: Callable[[], None]
    focus_pane: Callable[[str], None]

    @property
    def model(self) -> ModelDescription | None: ...  # the model loaded
    def menuBar(self) -> QMenuBar: ...
    def set_theme(self, name: str) -> None: ...


def tr(text: str) -> str:
    return QCoreApplication.translate("Menus", text)


def build_menus(self: MenuHost) -> None:
    mb = self.menuBar()
    file = mb.addMenu(tr("&File"))
    _action(file, tr("&New chat"), self.chats.new_chat, QKeySequence.StandardKey.New)
    file.addSeparator()
    _action(file, tr("Export chat as &Markdown…"), lambda: self.chats.exports.export_dialog("md"), "Ctrl+E")
    _action(file, tr("Export chat as &JSON…"), lambda: self.chats.exports.export_dialog("json"))
    _action(file, tr("&Import chats…"), lambda: self.importer.choose())  # ChatGPT or Ember exports
    file.addSeparator()
    _action(file, tr("&Quit"), self.close, QKeySequence.StandardKey.Quit)

    chat = mb.addMenu(tr("&Chat"))
    _action(chat, tr("&Stop answer"), self.stop, "Esc")
    # lambdas: QAction.triggered passes `checked`, which must not land in an optional parameter
    _action(chat, tr("&Regenerate last answer"), lambda: self.controller.regenerate(), "Ctrl+R")
    _action(chat, tr("Re&name chat…"), self.chats.rename_current, "F2")
    _action(chat, tr("&Delete chat…"), self.chats.delete_current, "Ctrl+Shift+Backspace")
    self.voice.add_menu_entry(chat)  # Voice conversation (voice/conversation.py)
    self.chats.add_menu_entries(chat)  # Undo, folders, Move to, Pin, Archive, Archived, Trash
    _action(chat, tr("&Find in chats"), lambda: self.focus_pane("search"), QKeySequence.StandardKey.Find)

    self.models_menu = ModelsMenu(self, mb.addMenu(tr("&Models")))

    # One Settings window with a page per section (settings_window.py); the entries under it, the way
    # these settings were reached before it, open it at their page
    settings = mb.addMenu(tr("&Settings"))
    self.settings_window = build_settings_window(self)
    window = self.settings_window
    preferences = _action(settings, tr("&Settings…"), lambda: window.open_section())
    keys = QKeySequence.keyBindings(QKeySequence.StandardKey.Preferences)  # the platform's (Cmd+, on macOS)
    preferences.setShortcuts(keys + [k for k in [QKeySequence("Ctrl+,")] if k not in keys])
    settings.addSeparator()
    for key, label in (
        ("appearance", tr("A&ppearance…")),
        ("connections", tr("C&onnections…")),
        ("api", tr("Local &API server…")),
        ("tools", tr("&Tools…")),
        ("presets", tr("&Presets…")),
        ("backups", tr("&Backups…")),
        ("kv_caches", tr("&Conversation caches…")),
    ):
        _action(settings, label, lambda _=False, k=key: window.open_section(k))

    view = mb.addMenu(tr("&View"))
    self.side_action = _action(view, tr("&Side panel"), self.toggle_side_panel, "Ctrl+Shift+S")
    self.side_action.setCheckable(True)
    self.side_action.setChecked(True)
    theme = view.addMenu(tr("&Theme"))
    group = QActionGroup(self)
    self.theme_group = group  # (Settings ▸ Appearance shows the same actions)
    for name, label in (("light", tr("Light")), ("dark", tr("Dark")), ("system", tr("System"))):
        a = theme.addAction(label)
        a.setCheckable(True)
        a.setChecked(self.settings.theme == name)
        a.triggered.connect(lambda _=False, n=name: self.set_theme(n))
        group.addAction(a)
    view.addSeparator()  # the transcript's text size (transcript/font_size.py)
    bigger = _action(view, tr("&Bigger text"), lambda: self.font_size.bigger(), "Ctrl+=")
    bigger.setShortcuts([QKeySequence("Ctrl+="), QKeySequence("Ctrl++")])
    _action(view, tr("S&maller text"), lambda: self.font_size.smaller(), "Ctrl+-")
    _action(view, tr("&Normal size"), lambda: self.font_size.normal(), "Ctrl+0")
    go = view.addMenu(tr("&Go to"))
    for pane, label, key in (
        ("chats", tr("Chat &list"), "Alt+1"),
        ("transcript", tr("&Transcript"), "Alt+2"),
        ("composer", tr("&Message box"), "Alt+3"),
        ("side", tr("Side &panel"), "Alt+4"),
        ("model", tr("Model &picker"), "Ctrl+Shift+M"),
    ):
        _action(go, label, lambda _=False, p=pane: self.focus_pane(p), key)

    help_menu = mb.addMenu(tr("&Help"))
    _action(help_menu, tr("&Keyboard shortcuts"), self.show_shortcuts, "Ctrl+/")
    _action(help_menu, tr("&About Ember"), lambda: QMessageBox.about(mb.window(), tr("About Ember"), about_text()))


# Keys that work without a menu entry (the composer's, and the transcript's links).
def fixed_shortcuts() -> list[tuple[str, str]]:
    return [
        (tr("Enter"), tr("Send the message")),
        (tr("Shift+Enter"), tr("New line in the message")),
        (tr("Esc"), tr("Stop the answer, end a voice conversation (in the message box)")),
        (tr("Tab / Shift+Tab"), tr("Next / previous control; in the transcript, next / previous message action")),
        (tr("Enter (on a message action)"), tr("Run it: copy, edit, regenerate, continue, previous or next version")),
        (tr("Delete (in the chat list)"), tr("Move the selected chats to the Trash (Ctrl+Z brings them back)")),
        (tr("Shift+click / Ctrl+click (in the chat list)"), tr("Select several chats to move, archive or delete")),
    ]


def menu_shortcuts(menu_bar: QMenuBar) -> list[tuple[str, str, str]]:
    """(menu, action, key) for every menu entry with a shortcut, read from the menus themselves so the
    list can never disagree with them."""
    out: list[tuple[str, str, str]] = []

    def walk(menu: QMenu, path: str) -> None:
        for a in menu.actions():
            if a.menu() is not None:
                walk(a.menu(), f"{path} ▸ {a.text().replace('&', '')}")
            elif not a.shortcut().isEmpty():
                key = a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
                out.append((path, a.text().replace("&", ""), key))

    for top in menu_bar.actions():
        if top.menu() is not None:
            walk(top.menu(), top.text().replace("&", ""))
    return out


def _action(menu: QMenu, text: str, slot: object, shortcut: object = None) -> QAction:
    a = menu.addAction(text)
    a.triggered.connect(slot)
    if shortcut is not None:
        a.setShortcut(QKeySequence(shortcut))
    return a


class ModelsMenu:
    """The Models menu. Its fixed entries exist from the start (Ctrl+M opens the Model Manager before
    the menu was ever opened); the models between the two separators are refreshed when it opens, from
    the model picker's list (no disk scan on the GUI thread)."""

    def __init__(self, host: MenuHost, menu: QMenu) -> None:
        self.host = host
        self.menu = menu
        self.manager = _action(menu, tr("Model &Manager…"), host.models.open_model_manager, "Ctrl+M")
        self._list_start = menu.addSeparator()
        self._list_end = menu.addSeparator()
        _action(menu, tr("&Connections…"), host.models.open_connections)
        _action(menu, tr("&Benchmark…"), host.models.open_benchmark)
        menu.addSeparator()
        self.unload = _action(menu, tr("&Unload model"), host.models.unload_model)
        _action(menu, tr("Open &models folder"), host.models.open_models_folder)
        _action(menu, tr("&Change models folder…"), lambda: host.models.change_models_folder())
        _action(menu, tr("&Refresh list"), host.models.reload_models)
        self._models: list[QAction] = []
        self._group = QActionGroup(menu)
        self.manager.setEnabled(host.downloads is not None)
        menu.aboutToShow.connect(self.refresh)

    def refresh(self) -> None:
        host = self.host
        self.manager.setEnabled(host.downloads is not None)
        self.unload.setEnabled(host.model is not None)
        for a in self._models:
            self._group.removeAction(a)
            self.menu.removeAction(a)
            a.deleteLater()
        self._models = []
        loaded = host.models.loaded_name if host.model is not None else None
        for label, name in host.model_bar.choices():
            a = QAction(label, self.menu)
            a.setCheckable(True)
            a.setChecked(loaded == name)
            a.triggered.connect(lambda _=False, n=name: host.models.load_model(n))
            self._group.addAction(a)
            self._models.append(a)
        if not self._models:
            none = QAction(tr("No models yet — import or download one"), self.menu)
            none.setEnabled(False)
            self._models.append(none)
        self.menu.insertActions(self._list_end, self._models)

    def actions(self) -> list[QAction]:
        return self.menu.actions()


def about_text() -> str:
    import PySide6
    from PySide6.QtCore import qVersion

    try:
        import llama_cpp

        from ember_chat.engine.inference.llama.loader import system_info

        llama = f"llama-cpp-python {llama_cpp.__version__}<br><small>{system_info()}</small>"
    except ImportError:
        llama = tr("llama-cpp-python not installed")
    return (
        f"<h3>Ember {__version__}</h3><p>{tr('Private AI chat with local models.')}</p>"
        f"<p>{llama}</p><p>Qt {qVersion()} · PySide6 {PySide6.__version__}</p>"
        f"<p>{tr('No telemetry. Your chats and models stay on this computer.')}</p>"
    )
