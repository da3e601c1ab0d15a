"""`ember-chat` run as a user runs it (the installed entry point, a data folder of the test's choosing)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.entry_point import ember_chat
from tests.helpers.paths import REPO

ROOT = REPO


def cli(*args: str, data_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if data_dir is not None:
        env["EMBER_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [ember_chat(), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
