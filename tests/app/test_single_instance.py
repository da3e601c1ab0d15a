"""One Ember per data folder: a second launch raises the first window and exits; a lock left by a
killed process does not block the next start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.qt.single_instance import SingleInstance
from tests.helpers.paths import REPO

ROOT = REPO


def test_second_instance_asks_the_first_to_show_itself(qtbot: QtBot, tmp_path: Path) -> None:
    first = SingleInstance(tmp_path / "data")
    second = SingleInstance(tmp_path / "data")
    try:
        assert first.acquire()
        with qtbot.waitSignal(first.activated, timeout=5_000):
            assert not second.acquire()
        other = SingleInstance(tmp_path / "other-data")  # another data folder is another Ember
        assert other.acquire()
        other.release()
    finally:
        first.release()
    third = SingleInstance(tmp_path / "data")
    assert third.acquire()  # released: the next start gets it
    third.release()


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    code = (
        "import os, signal, sys\n"
        "from PySide6.QtCore import QLockFile\n"
        "lock = QLockFile(sys.argv[1])\n"
        "assert lock.tryLock(0)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(data / "ember.lock")], timeout=60)
    assert (data / "ember.lock").exists()  # left behind by the killed process
    guard = SingleInstance(data)
    try:
        assert guard.acquire()
    finally:
        guard.release()


def test_launching_ember_again_brings_the_running_window_forward(qtbot: QtBot, tmp_path: Path) -> None:
    running = SingleInstance(tmp_path / "data")
    assert running.acquire()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EMBER_DATA_DIR": str(tmp_path / "data"),
           "EMBER_CONFIG_DIR": str(tmp_path / "config")}  # fmt: skip
    try:
        with qtbot.waitSignal(running.activated, timeout=60_000):
            second = subprocess.Popen(
                [sys.executable, "-m", "ember_chat.app.launch"], env=env, stderr=subprocess.PIPE, text=True
            )
            qtbot.waitUntil(lambda: second.poll() is not None, timeout=60_000)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 0 and "already running" in err
    finally:
        running.release()
    assert not (tmp_path / "data" / "chats.sqlite3").exists()  # the second launch never opened the database
