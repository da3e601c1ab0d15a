"""Damaged files never stop Ember: the app and the CLI start, say what happened, and keep what can be
kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from engine.storage.paths import AppPaths
from tests.test_app import make_window, paths

__all__ = ["make_window", "paths"]
ROOT = Path(__file__).resolve().parent.parent


def test_app_starts_with_a_damaged_settings_file_and_says_so(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    paths.settings_file.parent.mkdir(parents=True, exist_ok=True)
    paths.settings_file.write_text(json.dumps({"theme": "dark", "temperature": "hot", "context_length": 10}))
    w = make_window()
    assert w.banner.isVisible()
    text = w.banner.text()
    assert "temperature" in text and "context_length" in text and "default" in text
    assert w.settings.theme == "dark" and w.settings.temperature == 0.7  # the good value kept, the bad one reset


def test_app_starts_with_an_unreadable_settings_file(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    paths.settings_file.parent.mkdir(parents=True, exist_ok=True)
    paths.settings_file.write_bytes(b"\x00\xff garbage")
    w = make_window()
    assert "could not be read" in w.banner.text() and "settings.damaged-" in w.banner.text()
    assert any(p.name.startswith("settings.damaged-") for p in paths.config_dir.iterdir())


def test_cli_says_what_was_wrong_with_the_settings_and_carries_on(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_text(json.dumps({"top_k": -5}))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(config),
    }
    out = subprocess.run([sys.executable, "-m", "engine.cli.main", "models", "list", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "top_k must be between 0 and 100000, got -5" in out.stderr and "default (40)" in out.stderr
    assert json.loads(out.stdout)[0]["name"] == "starter"
