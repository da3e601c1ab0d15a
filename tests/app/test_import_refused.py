"""An import says what Ember refused of what a chat file carried (issue 28): a file's "always allow"
grants (tests/hostile/chat_export_grants_consent.json) would run its tools with no question, so they never
come in, and settings of the wrong kind or out of range (chat_export_bad_settings.json) take their
defaults; both were dropped silently, and the user trusting the chat did not know to allow its tools
again. The banner of File ▸ Import in the real window and `ember-chat chats import` (the installed entry
point) say so plainly, from the import's report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.backups_window import _open
from tests.helpers.chats_cli import cli
from tests.helpers.import_window import choose
from tests.helpers.paths import TESTS


@pytest.fixture
def paths(chats_paths: AppPaths) -> AppPaths:
    """A data folder whose chat database holds two chats: tests/app/conftest.py's chats_paths."""
    return chats_paths


HOSTILE = TESTS / "hostile"
GRANTS = HOSTILE / "chat_export_grants_consent.json"
SETTINGS = HOSTILE / "chat_export_bad_settings.json"
PERMISSIONS = "Its tool permissions were not imported: allow tools again in the chat if you trust it."
RESET = (
    "11 settings Ember does not know or could not use were left out: the chat uses the defaults (temperature, "
    "top_k, min_p, max_tokens, stop, thinking, response_format, grammar, …)."
)


def _imported(qtbot: QtBot, w: MainWindow, path: Path) -> str:
    """File ▸ Import chats of `path`; the banner's text once it is done."""
    importer = choose(qtbot, w, path)
    with qtbot.waitSignal(importer.finished, timeout=20_000):
        pass
    assert w.banner.isVisible()
    return w.banner.text()


def test_the_banner_says_an_imported_chats_tool_permissions_were_not_imported(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    said = _imported(qtbot, w, GRANTS)
    assert said.startswith("Imported 1 chat (2 messages) from chat_export_grants_consent.json.")
    assert PERMISSIONS in said and "settings" not in said
    chat = next(c for c in w.store.conversations() if c.title == "Look at my notes")
    assert w.store.chat_tools(chat.id).always == frozenset()  # (as before: refused, now also said)


def test_the_banner_says_how_many_settings_out_of_range_were_reset(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    said = _imported(qtbot, w, SETTINGS)
    assert RESET in said and "permissions" not in said


def test_several_chats_say_in_how_many_of_them(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow], tmp_path: Path
) -> None:
    both = tmp_path / "both.json"
    chats = [json.loads(p.read_text(encoding="utf-8")) for p in (GRANTS, SETTINGS, GRANTS)]
    both.write_text(json.dumps(chats), encoding="utf-8")
    w = _open(qtbot, paths, windows)
    said = _imported(qtbot, w, both)
    assert "The tool permissions of 2 of them were not imported: allow tools again in a chat if you trust it." in said
    assert "11 settings Ember does not know or could not use, in 1 of them, were left out: those chats use the" in said


def test_chats_import_on_the_command_line_says_the_same(paths: AppPaths) -> None:
    out = cli(paths.data_dir, "import", str(GRANTS))
    assert out.returncode == 0, out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("Chat ")]
    assert line.endswith(
        "“Look at my notes”: its tool permissions were not imported (allow tools again in the chat if you trust it)."
    )
    out = cli(paths.data_dir, "import", str(SETTINGS))
    assert out.returncode == 0, out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("Chat ")]
    assert line.endswith(
        "“Odd settings”: 11 settings Ember does not know or could not use were left out: the chat uses the defaults "
        "(temperature, top_k, min_p, max_tokens, stop, thinking, response_format, grammar, …)."
    )


def test_a_chat_files_title_and_setting_names_cannot_drive_the_terminal(paths: AppPaths, tmp_path: Path) -> None:
    """A title or a setting's name with an escape sequence (recolour, clear the screen, retitle the window)
    is printed without its control characters by `chats import` and `chats list`."""
    doc = json.loads(SETTINGS.read_text(encoding="utf-8"))
    doc["title"] = "Odd\x1b[2J\x1b]0;owned\x07 settings"
    doc["params"] = {"\x1b[31mred\x1b[0m": 1, **doc["params"]}
    hostile = tmp_path / "escapes.json"
    hostile.write_text(json.dumps(doc), encoding="utf-8")
    out = cli(paths.data_dir, "import", str(hostile))
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("Chat ")]
    assert "“Odd[2J]0;owned settings”" in line and "([31mred[0m, temperature," in line
    listed = cli(paths.data_dir, "list")
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "Odd[2J]0;owned settings" in listed.stdout
