"""The launcher starts light and on every OS: choosing between the command line and the window
imports nothing heavy, and the paths that need no model never import llama.cpp, the HTTP stack or
psutil — checked in a fresh interpreter where `resource` (a Unix-only module) cannot be imported, as
on Windows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("llama_cpp", "httpx2", "psutil", "huggingface_hub")

PROBE = """
import contextlib, io, json, sys
sys.modules["resource"] = None  # as on Windows: importing it fails
argv, HEAVY = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = io.StringIO()
code = None
with contextlib.redirect_stdout(out):
    try:
        if argv == ["<window>"]:
            from ember_chat.app.shell.main_window import MainWindow  # everything the window needs to open
            code = 0
        else:
            from ember_chat.app.launch import main
            code = main(argv)
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "heavy": [m for m in HEAVY if m in sys.modules]}))
"""


def _probe(argv: list[str], tmp_path: Path) -> dict[str, object]:
    env = {"EMBER_DATA_DIR": str(tmp_path / "data"), "EMBER_CONFIG_DIR": str(tmp_path / "config"),
           "QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # fmt: skip
    cmd = [sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["--help"], ["run", "--help"], ["bench", "--help"], ["models", "list", "--json"], ["<window>"]],
)
def test_starting_imports_nothing_heavy_and_no_unix_only_module(argv: list[str], tmp_path: Path) -> None:
    result = _probe(argv, tmp_path)
    assert result["code"] in (0, None)
    assert result["heavy"] == []


def test_version_and_help_say_what_they_should(tmp_path: Path) -> None:
    assert _probe(["--version"], tmp_path)["out"].startswith("ember-chat ")
    helped = str(_probe(["run", "--help"], tmp_path)["out"])
    assert "256–1,048,576" in helped and "e+06" not in helped  # ranges in plain numbers
