"""Shared by the attachment tests of the window: sending with files attached, waiting for the window to settle, a fake
engine that sees images, and slow or refused files."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import Settings, SettingsFile
from tests.helpers.fake_backend import FakeBackend
from tests.hostile.slow_or_inflating_files import quadratic_html

WAIT_MS = 60_000
FACT = "The lighthouse keeper's cat is named Biscuit."


class SeeingFake(FakeBackend):
    """The fake engine as a vision model (one loaded with its projector)."""

    @property
    def description(self) -> ModelDescription | None:
        d = super().description
        return dataclasses.replace(d, vision=True) if d is not None else None


def settle(qtbot: QtBot, w: MainWindow) -> None:
    """Wait until every attachment is read and counted, and the engine's plan of them is shown."""
    bar = w.composer.attachments
    qtbot.waitUntil(lambda: bool(bar.items) and not bar.busy and not bar.planning, timeout=WAIT_MS)


def send(qtbot: QtBot, w: MainWindow, text: str) -> None:
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=WAIT_MS):
        w.composer.editor.setPlainText(text)
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    if w.transcript.rendering:
        with qtbot.waitSignal(w.transcript.rendered, timeout=WAIT_MS):
            pass


SLOW_HTML = 400_000  # repeats of `a </x `: 2.4 MB, minutes for Python's parser


def with_settings(paths: AppPaths, **changes: Any) -> None:
    """settings.json as the user left it before starting Ember."""
    SettingsFile(paths.settings_file).save(Settings().with_changes(**changes))


def slow_file(tmp_path: Path, name: str = "page.html") -> Path:
    path = tmp_path / name
    path.write_bytes(quadratic_html(SLOW_HTML))
    return path
