"""Issue 16, item 20: on a minimal Debian/Ubuntu Qt's xcb platform plugin does not load until its
libraries are installed, and Qt's own error does not say which. The README names them in one
apt-get line, and `ember-chat` prints that line when Qt fails to load the xcb plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember_chat.app.qt.platform_help import XCB_APT_LINE
from tests.helpers.paths import REPO

ROOT = REPO


def test_readme_install_section_names_the_xcb_libraries_in_one_line() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = readme.split("## Install and run", 1)[1].split("\n## ", 1)[0]
    assert XCB_APT_LINE in install.splitlines()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for package in XCB_APT_LINE.split("install", 1)[1].split():
        if package.startswith("lib"):
            assert package in ci, package  # each library is one CI installs for the window


@pytest.mark.skipif(sys.platform != "linux", reason="Qt's xcb platform plugin is Linux's")
def test_ember_chat_prints_the_apt_line_when_the_xcb_plugin_fails_to_load(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY")}
    env.update(QT_QPA_PLATFORM="xcb", EMBER_DATA_DIR=str(tmp_path / "data"), EMBER_CONFIG_DIR=str(tmp_path / "cfg"))
    run = subprocess.run(
        [sys.executable, "-m", "ember_chat.app.launch"], capture_output=True, text=True, env=env, timeout=60
    )
    assert run.returncode != 0
    assert 'platform plugin "xcb"' in run.stderr  # Qt's own message is still shown
    assert XCB_APT_LINE in run.stderr.splitlines()


@pytest.mark.skipif(sys.platform != "linux", reason="Qt's xcb platform plugin is Linux's")
def test_a_working_platform_prints_no_apt_line(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "EMBER_DATA_DIR": str(tmp_path / "data"),
           "EMBER_CONFIG_DIR": str(tmp_path / "cfg")}  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "ember_chat.app.launch", "--quit-when-ready"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "window ready" in run.stderr
    assert "apt-get" not in run.stderr
