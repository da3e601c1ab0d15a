"""ruff (lint and format) is part of the suite, so a red lint fails CI like a red test."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> list[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed; it is part of the [test] extra")
    return [exe]


def test_ruff_check() -> None:
    out = subprocess.run([*_ruff(), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format() -> None:
    out = subprocess.run([*_ruff(), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
