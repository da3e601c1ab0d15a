"""The app's icon (SVG source and every size each OS needs), its freedesktop entry and AppStream
metadata, and the per-user Linux installer."""

from __future__ import annotations

import configparser
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot

from tests.helpers.paths import REPO

ROOT = REPO
RESOURCES = ROOT / "resources" / "ember_chat" / "resources"
ICONS = RESOURCES / "icons"
APP_ID = "io.emberchat.Ember"


def test_every_icon_size_is_rendered_from_the_svg(qtbot: QtBot) -> None:
    from ember_chat.app.style.theme import app_icon

    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        image = QImage(str(ICONS / f"ember-{size}.png"))
        assert (image.width(), image.height()) == (size, size) and image.hasAlphaChannel()
    ico = (ICONS / "ember.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind, count) == (0, 1, 7)
    icns = (ICONS / "ember.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    assert b"ic09" in icns and b"icp4" in icns  # 512 and 16 px
    for name in ("ember.ico", "ember.icns"):  # Qt's own readers accept them
        assert not QImage(str(ICONS / name)).isNull()
    icon = app_icon()
    assert icon.availableSizes() and not icon.pixmap(64, 64).isNull()


def test_icons_are_up_to_date_with_the_svg(tmp_path: Path) -> None:
    """packaging/make_icons.py renders the committed files exactly (run it after changing the SVG)."""
    copy = tmp_path / "repo"
    icons = copy / RESOURCES.relative_to(ROOT) / "icons"
    shutil.copytree(ICONS, icons)
    (copy / "packaging").mkdir()
    shutil.copy(ROOT / "packaging" / "make_icons.py", copy / "packaging" / "make_icons.py")
    for p in icons.glob("ember-*.png"):
        p.unlink()
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    subprocess.run([sys.executable, str(copy / "packaging" / "make_icons.py")], check=True, env=env, timeout=120)
    for size in (16, 256):
        ours = QImage(str(icons / f"ember-{size}.png"))
        committed = QImage(str(ICONS / f"ember-{size}.png"))
        assert ours.size() == committed.size()
        assert _largest_channel_difference(ours, committed) <= 2  # Qt releases round antialiasing a level apart


def _largest_channel_difference(a: QImage, b: QImage) -> int:
    return max(
        abs(((a.pixel(x, y) >> shift) & 0xFF) - ((b.pixel(x, y) >> shift) & 0xFF))
        for y in range(a.height())
        for x in range(a.width())
        for shift in (0, 8, 16, 24)
    )


def test_the_window_uses_the_icon(qtbot: QtBot, tmp_path: Path) -> None:
    from ember_chat.app.main import build_window
    from ember_chat.engine.storage.paths import AppPaths

    w = build_window(AppPaths(tmp_path / "data", tmp_path / "config"))
    qtbot.addWidget(w)
    try:
        assert not w.windowIcon().isNull() and w.windowIcon().availableSizes()
    finally:
        w.close()
        w.store.close()


def test_desktop_entry_and_metainfo() -> None:
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # keys are case-sensitive
    entry.read(RESOURCES / "linux" / f"{APP_ID}.desktop")
    e = entry["Desktop Entry"]
    assert e["Type"] == "Application" and e["Name"] == "Ember" and e["Icon"] == APP_ID
    assert e["Exec"].startswith("ember-chat") and e["Categories"].endswith(";") and e["Terminal"] == "false"
    validate = shutil.which("desktop-file-validate")
    if validate:
        out = subprocess.run([validate, str(RESOURCES / "linux" / f"{APP_ID}.desktop")],
                             capture_output=True, text=True)  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
    meta = ET.parse(RESOURCES / "linux" / f"{APP_ID}.metainfo.xml").getroot()
    assert meta.get("type") == "desktop-application" and meta.findtext("id") == APP_ID
    assert meta.find("launchable").text == f"{APP_ID}.desktop" and meta.findtext("metadata_license") == "CC0-1.0"


@pytest.mark.skipif(shutil.which("install") is None, reason="needs coreutils' install")
def test_install_linux_installs_and_uninstalls_for_the_user(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "ember-chat"
    dist.mkdir(parents=True)
    exe = dist / "ember-chat"
    exe.write_text("#!/bin/sh\necho ember\n")
    exe.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    script = ROOT / "packaging" / "install-linux.sh"
    out = subprocess.run(["bash", str(script), str(dist)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    share = home / ".local" / "share"
    desktop = (share / "applications" / f"{APP_ID}.desktop").read_text()
    installed = home / ".local" / "opt" / "ember-chat" / "ember-chat"
    assert f"Exec={installed}\n" in desktop and installed.exists()  # no %U: the window opens no files
    assert (home / ".local" / "bin" / "ember-chat").resolve() == installed.resolve()
    assert (share / "icons" / "hicolor" / "48x48" / "apps" / f"{APP_ID}.png").exists()
    assert (share / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg").exists()
    assert (share / "metainfo" / f"{APP_ID}.metainfo.xml").exists()
    out = subprocess.run(["bash", str(script), "--uninstall"], env=env, capture_output=True, text=True, timeout=60)
    assert (
        out.returncode == 0 and not installed.exists() and not (share / "applications" / f"{APP_ID}.desktop").exists()
    )
    missing = subprocess.run(["bash", str(script), str(tmp_path / "nowhere")], env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and "build it first" in missing.stderr
