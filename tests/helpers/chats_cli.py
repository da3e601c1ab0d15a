"""`ember-chat chats …` run on a data folder of the test's own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.entry_point import ember_chat
from tests.helpers.paths import REPO

ROOT = REPO


def cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EMBER_DATA_DIR": str(data_dir)}
    env["EMBER_CONFIG_DIR"] = str(data_dir / "config")
    return subprocess.run(
        [ember_chat(), "chats", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
