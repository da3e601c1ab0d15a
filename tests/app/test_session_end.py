"""A SIGTERM (a plain `kill`, a logout) or a SIGHUP ends Ember as closing its window does, not as a crash:
the launcher exits 0, the crash folder keeps no `running` note and no model in use, and the next start
reloads the last model and says nothing about the run. The window's close asks nothing then (no one is
there to answer): the API server's question and a project's unsaved settings do not hold it open."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.qt.crash import MODEL_IN_USE, RUNNING, CrashReporter
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import SettingsFile
from tests.helpers.entry_point import ember_chat
from tests.helpers.paths import REPO
from tests.helpers.window_support import start_api_in_window

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no SIGTERM sent to a process on Windows")
START_S = 120


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "QT_QPA_PLATFORM": "offscreen",
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(tmp_path / "config"),
    }


def _last_session_with(tmp_path: Path, tiny_model: Path) -> Path:
    """A data folder whose last session had the tiny model loaded (the next start loads it); its crash folder."""
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    paths.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, paths.default_models_dir / "tiny.gguf")
    settings = SettingsFile(paths.settings_file)
    settings.save(settings.load().with_changes(last_model="tiny.gguf"))
    return paths.data_dir / "crashes"


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    """Until `path` exists (the running Ember writes it), or the process ended (a failure)."""
    deadline = time.monotonic() + START_S
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)  # (another process: nothing of it to wait on here but its files)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminate_signal_quits_cleanly_and_the_next_start_reloads_the_model(
    tmp_path: Path, tiny_model: Path, sig: signal.Signals
) -> None:
    crashes = _last_session_with(tmp_path, tiny_model)

    proc = subprocess.Popen([ember_chat()], env=_env(tmp_path), stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(crashes / MODEL_IN_USE, proc)  # (the window is up and the model of the last run loading)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=START_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert not (crashes / RUNNING).exists() and not (crashes / MODEL_IN_USE).exists()
    assert CrashReporter(crashes).previous_crash() is None

    again = subprocess.run(
        [ember_chat(), "--quit-when-ready"], env=_env(tmp_path), timeout=START_S, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    assert "loading tiny.gguf, the model of the last session" in again.stderr
    assert "crash" not in again.stderr


def test_more_terminate_signals_while_it_ends_do_not_cut_the_ending_short(tmp_path: Path, tiny_model: Path) -> None:
    """A `kill` sent again and again (an impatient user, a supervisor) while Ember ends: it still ends as
    closing its window does, its store closed, exit status 0."""
    crashes = _last_session_with(tmp_path, tiny_model)
    proc = subprocess.Popen([ember_chat()], env=_env(tmp_path), stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(crashes / MODEL_IN_USE, proc)
        sent = 0
        while proc.poll() is None and sent < 2_000:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            sent += 1
            time.sleep(0.005)  # (another process: a signal every 5 ms until it is gone)
        _out, err = proc.communicate(timeout=START_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert sent > 1 and proc.returncode == 0, err
    assert not (crashes / RUNNING).exists() and CrashReporter(crashes).previous_crash() is None


@pytest.mark.usefixtures("nothing_blocks")
def test_the_session_ending_closes_the_window_without_its_questions(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    start_api_in_window(qtbot, w)
    w.close()  # a close by hand asks first: the server runs
    assert w.isVisible() and w.api.quit_question is not None and w.api.quit_question.isVisible()
    w.end_session()
    assert not w.isVisible() and w.api.server is None
