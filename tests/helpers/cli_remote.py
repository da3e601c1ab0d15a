"""`ember-chat` run against a remote server, with the environment of a test's own folder."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.entry_point import ember_chat
from tests.helpers.paths import REPO

ROOT = REPO


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EMBER_DATA_DIR": str(tmp / "data"),
        "EMBER_CONFIG_DIR": str(tmp / "config"),
        **extra,
    }


def cli(tmp: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ember_chat(), *args],
        capture_output=True,
        text=True,
        env=_env(tmp, **env),
        timeout=300,
        input=stdin,
    )
