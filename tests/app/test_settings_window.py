"""Issue 28, the gap to LM Studio and Jan: one Settings window with sections (there were five dialogs under
Settings, the theme and text size under View, Connections under Models). Settings ▸ Settings… (Ctrl+,)
opens it; the old entries open it at their section; the pages are the dialogs' own (a change made there
takes effect); one instance, raised when opened again; it fits an 800×600 screen and remembers its last
section and size. In the real window (offscreen), through its menus."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtGui import QAccessible, QKeySequence
from PySide6.QtWidgets import QApplication, QRadioButton, QScrollArea, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.qt.window_frame import TITLE_BAR_ALLOWANCE
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.presets import PresetLibrary
from ember_chat.engine.storage.settings import SettingsFile
from tests.helpers.accessibility import _missing_names

if TYPE_CHECKING:  # (imported lazily: before the window existed, each test failed on its own)
    pass
from tests.helpers.settings_window import SECTIONS, _entry, _open


def _settings_windows() -> list[QWidget]:
    return [t for t in QApplication.topLevelWidgets() if t.windowTitle() == "Settings" and t.isVisible()]


def test_settings_opens_one_window_with_every_section(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    entry = _entry(w, "&Settings", "&Settings…")
    assert QKeySequence("Ctrl+,") in entry.shortcuts()  # (the platform's Preferences key too, where it has one)
    sw = _open(qtbot, w)
    assert [sw.list.item(i).text() for i in range(sw.list.count())] == SECTIONS
    assert sw.current_key == "appearance" and sw.page("appearance") is not None and sw.page("appearance").isVisible()
    # every section shows its page in the same window (none opens a window of its own)
    for row, title in enumerate(SECTIONS):
        sw.list.setCurrentRow(row)
        scroll = sw.stack.currentWidget()
        assert isinstance(scroll, QScrollArea) and scroll.accessibleName() == title
        page = scroll.widget()
        assert page is not None and page.isVisible() and not page.isWindow(), title
    assert _settings_windows() == [sw]
    QAccessible.setActive(True)
    # the window's own controls and pages have a name and a description (the dialogs' pages: their own tests)
    for control in (sw.list, sw.close_button):
        iface = QAccessible.queryAccessibleInterface(control)
        assert iface.text(QAccessible.Text.Name).strip() and iface.text(QAccessible.Text.Description).strip()
    assert _missing_names(sw.page("appearance")) == [] and _missing_names(sw.page("models")) == []
    # the window's Close closes it; the Help ▸ Keyboard shortcuts list shows the new key (read from the menus)
    # the pages close with it (their own clean-up runs: the Tools page stops following its servers)
    assert w.tools.dialog is not None
    with qtbot.waitSignal(w.tools.dialog.finished, timeout=5_000):
        qtbot.mouseClick(sw.close_button, Qt.MouseButton.LeftButton)
    assert not sw.isVisible()
    from ember_chat.app.shell.menus import menu_shortcuts

    assert any(action == "Settings…" for _menu_name, action, _key in menu_shortcuts(w.menuBar()))


def test_each_old_entry_opens_the_window_at_its_section(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    for menu, text, key, dialog in (
        ("&Settings", "Local &API server…", "api", lambda: w.api.dialog),
        ("&Settings", "&Tools…", "tools", lambda: w.tools.dialog),
        ("&Settings", "&Presets…", "presets", lambda: w.presets.dialog),
        ("&Settings", "&Backups…", "backups", lambda: w.backups.dialog),
        ("&Settings", "&Conversation caches…", "kv_caches", lambda: w.kv_caches.dialog),
        ("&Models", "&Connections…", "connections", lambda: w.models.connections_dialog),
    ):
        _entry(w, menu, text).trigger()
        sw = w.settings_window
        assert sw.isVisible() and sw.current_key == key, text
        page = dialog()
        assert page is not None and sw.page(key) is page and page.isVisible() and not page.isWindow(), text
        assert sw.isAncestorOf(page), text
    assert _settings_windows() == [w.settings_window]  # one window all along


def test_a_change_in_a_section_takes_effect(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    w = make_window()
    sw = _open(qtbot, w)
    sw.list.setCurrentRow(SECTIONS.index("Appearance"))
    dark = sw.page("appearance").findChildren(QRadioButton)[1]
    assert dark.text() == "Dark"
    qtbot.mouseClick(dark, Qt.MouseButton.LeftButton, pos=QPoint(8, dark.height() // 2))  # (its round button)
    assert w.settings.theme == "dark" and SettingsFile(paths.settings_file).load().theme == "dark"
    view_theme = next(a for a in w.theme_group.actions() if a.isChecked())
    assert view_theme.text() == "Dark"  # the View menu says the same
    next(a for a in w.theme_group.actions() if a.text() == "Light").trigger()  # and a change there shows here
    assert sw.page("appearance").findChildren(QRadioButton)[0].isChecked() and not dark.isChecked()

    sw.list.setCurrentRow(SECTIONS.index("Presets"))
    presets = w.presets.dialog
    assert presets is not None and sw.page("presets") is presets
    made = presets.create_from_chat()
    assert made is not None
    qtbot.keyClicks(presets.editor.name, "Reviewer")
    qtbot.mouseClick(presets.save_button, Qt.MouseButton.LeftButton)
    saved = PresetLibrary(paths.config_dir).get(made.id)
    assert saved is not None and saved.name.endswith("Reviewer")  # on disk
    assert w.side.params.preset_picker.combo.findText(saved.name) >= 0  # and in the side panel's picker


def test_opening_it_again_raises_the_same_window_at_the_last_section(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    sw = _open(qtbot, w)
    _entry(w, "&Settings", "&Backups…").trigger()
    assert w.settings_window is sw and _settings_windows() == [sw] and sw.current_key == "backups"
    sw.resize(sw.width() - 20, sw.height() - 20)
    size = sw.size()
    qtbot.keyClick(sw.list, Qt.Key.Key_Escape)  # Esc closes it
    assert not sw.isVisible()
    sw = _open(qtbot, w)
    assert sw.isVisible() and sw.current_key == "backups" and sw.size() == size  # where and as it was
    # Esc in a page's own field closes the window too, and the page stays in it
    sw.list.setCurrentRow(SECTIONS.index("Conversation caches"))
    cap = w.kv_caches.dialog.cap
    cap.setFocus()
    qtbot.keyClick(cap, Qt.Key.Key_Escape)
    assert not sw.isVisible()
    sw = _open(qtbot, w)
    assert sw.current_key == "kv_caches" and sw.page("kv_caches") is w.kv_caches.dialog and cap.isVisible()


def test_it_fits_an_800x600_screen(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    sw = _open(qtbot, w)
    room = QSize(800, 600 - TITLE_BAR_ALLOWANCE)
    for row in range(sw.list.count()):
        sw.list.setCurrentRow(row)  # (each page made: its own minimum counts no more than a scroll area's)
    hint = sw.minimumSizeHint()
    assert hint.width() <= room.width() and hint.height() <= room.height()
    sw.resize(room)
    for row, title in enumerate(SECTIONS):
        sw.list.setCurrentRow(row)
        assert sw.size() == room, title
        scroll = sw.stack.currentWidget()
        assert isinstance(scroll, QScrollArea)
        assert scroll.geometry().bottom() < sw.close_button.mapTo(sw, sw.close_button.rect().topLeft()).y(), title
        assert sw.rect().contains(sw.close_button.geometry().translated(sw.close_button.parentWidget().pos()))


def test_the_text_size_shown_follows_the_view_menu(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """Review of issue 28: with Appearance open, View ▸ Bigger text (Ctrl+= in the window) changed the
    size but the page kept saying the old one, although the page and the menu are the same controls."""
    w = make_window()
    sw = _open(qtbot, w)
    label = sw.page("appearance").size_label
    before = w.font_size.points
    _entry(w, "&View", "&Bigger text").trigger()
    assert w.font_size.points > before
    assert label.text() == f"{w.font_size.points} pt"
