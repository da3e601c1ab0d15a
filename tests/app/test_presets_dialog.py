"""Settings ▸ Presets… (the library dialog) and `/` in an empty message box (the saved prompts popup),
in the real window over a real data folder (presets.json, the SQLite chat file)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from ember_chat.app.presets.dialog import PresetsDialog
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.presets import DEFAULT_PRESET_ID, PresetLibrary
from tests.helpers.presets_support import load


@pytest.fixture
def make_window(make_presets_window: Callable[[], MainWindow]) -> Callable[[], MainWindow]:
    """Windows on that folder: tests/app/conftest.py's make_presets_window."""
    return make_presets_window


@pytest.fixture
def paths(two_models_paths: AppPaths) -> AppPaths:
    """The tiny model as tiny.gguf and other.gguf: tests/app/conftest.py's two_models_paths."""
    return two_models_paths


popup_grab = pytest.mark.qt_log_ignore("This plugin does not support grabbing the keyboard")  # (offscreen)


def open_from_menu(w: MainWindow) -> PresetsDialog:
    settings = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Settings")
    entry = next(a for a in settings.actions() if a.text() == "&Presets…")
    entry.trigger()
    assert w.presets.dialog is not None and w.presets.dialog.isVisible()
    return w.presets.dialog


def test_the_library_creates_from_the_chat_searches_duplicates_edits_and_deletes(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    w = make_window()
    w.side.params.system_prompt.setPlainText("You review Python code.")
    w.side.params.temperature.setValue(0.15)
    w.side.params.max_tokens.setValue(600)
    d = open_from_menu(w)
    assert d.names() == ["Default"]
    made = d.create_from_chat()
    assert made is not None and made.system_prompt == "You review Python code."
    assert made.params["temperature"] == 0.15 and made.params["max_tokens"] == 600
    assert d.current_id() == made.id and d.focusWidget() is d.editor.name  # ready to be renamed
    qtbot.keyClicks(d.editor.name, "Reviewer")
    assert d.save_button.isEnabled()
    d.editor.sets["top_k"].setChecked(True)
    d.editor.values["top_k"].setValue(12)
    d.editor.thinking.setCurrentIndex(2)  # Off
    qtbot.mouseClick(d.save_button, Qt.MouseButton.LeftButton)
    saved = PresetLibrary(paths.config_dir).get(made.id)  # on disk
    assert saved is not None and saved.name == "Reviewer" and saved.params["top_k"] == 12 and saved.thinking is False
    assert w.side.params.preset_picker.combo.findText("Reviewer") >= 0  # the side panel's picker follows

    qtbot.mouseClick(d.duplicate_button, Qt.MouseButton.LeftButton)
    assert d.names() == ["Default", "Reviewer", "Reviewer (copy)"]
    qtbot.keyClicks(d.search, "python")  # the prompt's text matches
    assert d.names() == ["Reviewer", "Reviewer (copy)"]
    d.search.clear()
    d.select(made.id)
    qtbot.mouseClick(d.delete_button, Qt.MouseButton.LeftButton)
    assert isinstance(d.question, QMessageBox)
    d.question.button(QMessageBox.StandardButton.Cancel).click()  # asked: Cancel keeps it
    assert "Reviewer" in d.names()
    d.delete()
    delete = next(b for b in d.question.buttons() if b.text() == "Delete")  # type: ignore[union-attr]
    delete.click()
    assert d.names() == ["Default", "Reviewer (copy)"] and PresetLibrary(paths.config_dir).get(made.id) is None
    d.select(DEFAULT_PRESET_ID)
    assert not d.delete_button.isEnabled()  # the built-in one cannot be deleted


def test_import_export_files_and_a_bad_file_says_why_and_changes_nothing(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths, tmp_path: Path
) -> None:
    lib = PresetLibrary(paths.config_dir)
    one = lib.create_from("Translator", "Translate into French.", {"temperature": 0.0}, None)
    w = make_window()
    d = open_from_menu(w)
    d.select(one.id)
    out = tmp_path / "exported.json"
    assert d.export_file(out)
    assert json.loads(out.read_text())["presets"][0]["name"] == "Translator"
    assert "Exported 1" in d.message.text()

    before = (paths.config_dir / "presets.json").read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_text('{"presets": [{"name": "Hot", "params": {"temperature": 40}}]}', encoding="utf-8")
    assert d.import_file(bad) == []
    assert d.message.isVisible() and "preset 1 (“Hot”): temperature must be between 0 and 5" in d.message.text()
    assert d.message.property("error") is True
    assert (paths.config_dir / "presets.json").read_bytes() == before  # nothing imported
    broken = tmp_path / "broken.json"
    broken.write_text("{oops", encoding="utf-8")
    assert d.import_file(broken) == [] and "not JSON (line 1, column 2)" in d.message.text()
    assert d.import_file(tmp_path / "missing.json") == [] and "Could not read" in d.message.text()

    imported = d.import_file(out)
    assert [p.name for p in imported] == ["Translator"]
    assert d.names() == ["Default", "Translator", "Translator"] and "Imported 1" in d.message.text()
    assert d.current_id() == imported[0].id

    (paths.config_dir / "presets.json").write_text("{cut", encoding="utf-8")  # damaged while Ember runs
    qtbot.keyClicks(d.search, "x")
    assert d.names() == [] and d.message.property("error") is True
    assert "presets.damaged-" in d.message.text() and "Default preset is used" in d.message.text()
    d.search.clear()
    assert d.names() == ["Default"]


def test_use_for_new_chats_and_default_for_the_loaded_model(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    lib = PresetLibrary(paths.config_dir)
    brief = lib.create_from("Brief", "Be brief.", {"max_tokens": 64}, None)
    w = make_window()
    d = open_from_menu(w)
    assert not d.model_button.isEnabled()  # no model loaded
    d.select(brief.id)
    qtbot.mouseClick(d.default_button, Qt.MouseButton.LeftButton)
    assert PresetLibrary(paths.config_dir).default_id == brief.id
    assert d.default_button.text() == "Used for new chats" and not d.default_button.isEnabled()
    assert w.side.params.max_tokens.value() == 64  # the new chat on screen follows at once
    assert w.side.params.system_prompt.toPlainText() == "Be brief."
    d.close()

    load(qtbot, w, "tiny.gguf")
    d = w.presets.open_dialog()
    d.select(DEFAULT_PRESET_ID)
    assert d.model_button.isEnabled() and d.model_button.text() == "Default for tiny.gguf"
    qtbot.mouseClick(d.model_button, Qt.MouseButton.LeftButton)
    assert PresetLibrary(paths.config_dir).model_default("tiny.gguf") == lib.get(DEFAULT_PRESET_ID)
    assert "tiny.gguf" in d.list.currentItem().text()  # marked in the list
    assert w.side.params.max_tokens.value() == 1024  # the model's own default (the built-in one) wins
    qtbot.mouseClick(d.model_button, Qt.MouseButton.LeftButton)  # off again
    assert PresetLibrary(paths.config_dir).model_default("tiny.gguf") is None
    assert w.side.params.max_tokens.value() == 64


@popup_grab
def test_slash_in_an_empty_message_box_opens_the_saved_prompts(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    lib = PresetLibrary(paths.config_dir)
    lib.create_from("Translator", "Translate the following into French:", {}, None)
    lib.create_from("Reviewer", "Review this code for bugs:", {}, None)
    lib.create_from("No prompt", "", {"temperature": 0.1}, None)  # no text to insert: not listed
    w = make_window()
    editor = w.composer.editor
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_Slash)
    popup = w.presets.popup
    assert popup is not None and popup.isVisible() and popup.filter.hasFocus()
    assert editor.toPlainText() == ""  # the `/` opened the popup instead of being typed
    assert popup.shown_names() == ["Reviewer", "Translator"]
    qtbot.keyClicks(popup.filter, "fren")  # filters as you type (name or text)
    assert popup.shown_names() == ["Translator"]
    qtbot.keyClick(popup.filter, Qt.Key.Key_Return)
    assert editor.toPlainText() == "Translate the following into French:" and w.presets.popup is None

    editor.clear()
    qtbot.keyClick(editor, Qt.Key.Key_Slash)
    popup = w.presets.popup
    assert popup is not None
    qtbot.keyClick(popup.filter, Qt.Key.Key_Down)
    assert popup.list.currentRow() == 1
    qtbot.keyClicks(popup.filter, "zzz")
    assert popup.shown_names() == [] and popup.empty.isVisible() and "No saved prompt matches" in popup.empty.text()
    qtbot.keyClick(popup.filter, Qt.Key.Key_Escape)  # Esc closes; what was typed goes into the box
    assert w.presets.popup is None and editor.toPlainText() == "/zzz"
    editor.clear()

    editor.setPlainText("a/b")
    cursor = editor.textCursor()
    cursor.movePosition(cursor.MoveOperation.End)
    editor.setTextCursor(cursor)
    qtbot.keyClick(editor, Qt.Key.Key_Slash)  # not empty: `/` is typed as it is
    assert editor.toPlainText() == "a/b/" and w.presets.popup is None


@popup_grab
def test_with_no_saved_prompts_the_popup_says_where_to_make_one(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    w = make_window()
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Slash)
    popup = w.presets.popup
    assert popup is not None and popup.shown_names() == []
    assert "Settings ▸ Presets…" in popup.empty.text()
    qtbot.keyClick(popup.filter, Qt.Key.Key_Escape)
    assert w.presets.popup is None and w.composer.editor.toPlainText() == "/"  # the `/` typed stays


@popup_grab
def test_a_message_can_start_with_a_slash(qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths) -> None:
    PresetLibrary(paths.config_dir).create_from("Translator", "Translate the following into French:", {}, None)
    w = make_window()
    editor = w.composer.editor
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_Slash)
    popup = w.presets.popup
    assert popup is not None
    qtbot.keyClicks(popup.filter, "usr/bin/python --version")
    qtbot.keyClick(popup.filter, Qt.Key.Key_Escape)  # not a saved prompt: what was typed is the message
    assert w.presets.popup is None and editor.toPlainText() == "/usr/bin/python --version" and editor.hasFocus()
    editor.clear()
    qtbot.keyClick(editor, Qt.Key.Key_Slash)
    qtbot.keyClicks(w.presets.popup.filter, "help me")
    qtbot.keyClick(w.presets.popup.filter, Qt.Key.Key_Return)  # Enter with no prompt matching: the same
    assert w.presets.popup is None and editor.toPlainText() == "/help me"
    assert not w.store.conversations()  # (put in the box, not sent)


def test_an_open_library_follows_the_model_loaded_and_unloaded_meanwhile(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    d = w.presets.open_dialog()
    d.select(DEFAULT_PRESET_ID)
    assert d.model_button.text() == "Default for tiny.gguf"
    load(qtbot, w, "other.gguf")  # another model loaded while the library stays open
    assert d.model_button.text() == "Default for other.gguf" and d.model is not None and d.model[0] == "other.gguf"
    qtbot.mouseClick(d.model_button, Qt.MouseButton.LeftButton)
    lib = PresetLibrary(paths.config_dir)
    assert lib.model_default("other.gguf") == lib.get(DEFAULT_PRESET_ID) and lib.model_default("tiny.gguf") is None
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "none", timeout=30_000):
        w.models.unload_model()
    assert d.model is None and not d.model_button.isEnabled()
    assert d.model_button.text() == "Default for the loaded model"


def test_a_starters_default_is_said_with_the_name_the_picker_shows(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    w = make_window()
    load(qtbot, w, "starter")
    shown = w.model_picker.currentText()  # "SmolLM2 135M (chat starter)"
    assert shown != "starter"
    d = w.presets.open_dialog()
    d.select(DEFAULT_PRESET_ID)
    assert d.model_button.text() == f"Default for {shown}" and d.model_button.toolTip().startswith(f"{shown}: ")
    qtbot.mouseClick(d.model_button, Qt.MouseButton.LeftButton)
    assert PresetLibrary(paths.config_dir).model_default("starter") is not None
    assert d.message.text() == f"{shown} starts from “Default” whenever it is loaded."
    assert d.list.currentItem().text().endswith(shown)  # marked in the list by that name too
    qtbot.mouseClick(d.model_button, Qt.MouseButton.LeftButton)
    assert d.message.text() == f"{shown} has no default preset of its own now."


def test_the_message_line_does_not_move_the_form(
    qtbot: QtBot, make_window: Callable[[], MainWindow], tmp_path: Path
) -> None:
    """Issue 28, item 15: the library's message ("Saved …", an error) appeared under the form mid-edit
    and took its height from it: the form's rows moved up by as much as 23 px. Its room is kept."""
    w = make_window()
    d = open_from_menu(w)
    top = d.window()
    QApplication.processEvents()

    def places() -> dict[str, int]:
        editor = d.editor
        shown = {"name": editor.name, "prompt": editor.system_prompt, "thinking": editor.thinking}
        shown |= {n: box for n, box in editor.values.items()} | {"save": d.save_button, "list": d.list}
        return {n: widget.mapTo(top, QPoint(0, 0)).y() for n, widget in shown.items()}

    before = places()
    assert not d.message.text()
    qtbot.keyClicks(d.editor.name, " for code")
    qtbot.mouseClick(d.save_button, Qt.MouseButton.LeftButton)
    QApplication.processEvents()
    assert d.message.text() == "Saved “Default for code”." and d.message.isVisible()
    assert places() == before
    broken = tmp_path / "broken.json"
    broken.write_text("{oops", encoding="utf-8")
    assert d.import_file(broken) == [] and d.message.property("error") is True
    QApplication.processEvents()
    assert places() == before
