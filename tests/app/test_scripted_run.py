"""The window's scripted mode (shell/scripted_run.py), as CI's smoke test and the demos run it:
`ember-chat --model FILE --send TEXT --screenshot PNG` in its own process (offscreen) loads the model,
sends the message once it is loaded, says what arrived, saves the window's pixels once the answer is
done and quits by itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from tests.helpers.paths import REPO


@pytest.mark.slow
def test_send_and_screenshot_answer_save_the_window_and_quit(tmp_path: Path, tiny_model: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "QT_QPA_PLATFORM": "offscreen",
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(tmp_path / "config"),
    }
    shot = tmp_path / "shots" / "window.png"
    command = ["--model", str(tiny_model), "--send", "Hello", "--max-tokens", "4", "--temperature", "0"]
    out = subprocess.run(
        [sys.executable, "-m", "ember_chat.app.main", *command, "--screenshot", str(shot)],
        env=env,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "ember: answer: " in out.stderr and " · 4 tokens · " in out.stderr, out.stderr  # what arrived
    assert f"ember: screenshot saved to {shot}" in out.stderr, out.stderr
    image = QImage(str(shot))  # (the folder made for it)
    assert not image.isNull() and image.width() > 400 and image.height() > 300
