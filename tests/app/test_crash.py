"""The crash handler: a Python error writes a log and shows a dialog with a copy button; a native
crash leaves its stack in a log; the next start says the last run crashed and where its log is."""

from __future__ import annotations

import faulthandler
import os
import subprocess
import sys
import threading
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from ember_chat.app.qt.crash import CrashReporter
from tests.helpers.paths import REPO

ROOT = REPO


def test_a_python_error_is_logged_shown_and_copyable(qtbot: QtBot, tmp_path: Path) -> None:
    crash = CrashReporter(tmp_path / "crashes")
    crash.install()
    try:
        try:
            raise ValueError("a bug in a slot")
        except ValueError:
            with qtbot.waitSignal(crash._show, timeout=5_000):
                sys.excepthook(*sys.exc_info())  # what PySide6 calls for an exception in a slot
        qtbot.waitUntil(lambda: crash.dialog is not None and crash.dialog.isVisible(), timeout=5_000)
        box = crash.dialog
        assert box is not None
        logs = list((tmp_path / "crashes").glob("crash-*.log"))
        assert len(logs) == 1 and "ValueError: a bug in a slot" in logs[0].read_text()
        assert "ValueError: a bug in a slot" in box.text() and str(logs[0]) in box.text()
        copy = next(b for b in box.buttons() if b.text() == "Copy details")
        copy.click()
        assert "a bug in a slot" in QGuiApplication.clipboard().text() and box.isVisible()
        box.done(QMessageBox.StandardButton.Close)

        def worker() -> None:
            raise RuntimeError("a bug on another thread")

        with qtbot.waitSignal(crash._show, timeout=5_000):  # threads too, shown on the GUI thread
            t = threading.Thread(target=worker, name="some-worker")
            t.start()
            t.join()
        assert any("some-worker" in p.read_text() for p in (tmp_path / "crashes").glob("crash-*.log"))
        crash.dialog.done(QMessageBox.StandardButton.Close)
    finally:
        crash.uninstall()
    again = CrashReporter(tmp_path / "crashes").previous_crash()
    assert again is not None and "unexpected error" in again and "crash-" in again
    assert CrashReporter(tmp_path / "crashes").previous_crash() is None  # said once


def test_a_clean_run_reports_nothing(tmp_path: Path) -> None:
    crash = CrashReporter(tmp_path / "crashes")
    assert crash.previous_crash() is None
    crash.install()
    crash.uninstall()
    assert CrashReporter(tmp_path / "crashes").previous_crash() is None
    assert not (tmp_path / "crashes" / "native.log").exists()


def test_a_native_crash_is_reported_at_the_next_start(tmp_path: Path) -> None:
    code = (
        "import faulthandler, sys\n"
        "from pathlib import Path\n"
        "from ember_chat.app.qt.crash import CrashReporter\n"
        "CrashReporter(Path(sys.argv[1])).install()\n"
        "faulthandler._sigsegv()\n"  # what a segfault in llama.cpp or Qt looks like
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "crashes")], env=env, timeout=60,
                         capture_output=True)  # fmt: skip
    assert out.returncode != 0
    message = CrashReporter(tmp_path / "crashes").previous_crash()
    assert message is not None and "crashed" in message and "native" in message
    kept = next((tmp_path / "crashes").glob("crash-*-native.log"))
    assert str(kept) in message and "Segmentation fault" in kept.read_text()


def test_a_killed_run_is_mentioned(tmp_path: Path) -> None:
    (tmp_path / "crashes").mkdir()
    (tmp_path / "crashes" / "running").write_text("1")
    message = CrashReporter(tmp_path / "crashes").previous_crash()
    assert message is not None and "did not end normally" in message


def test_a_run_that_had_an_error_and_then_did_not_end_says_both_in_their_order(tmp_path: Path) -> None:
    """A run with an unexpected error (its log noted) that then did not end cleanly: an unexpected error does
    not end a run (its dialog says to keep working), so the start says what ended it, then the error before
    it and where its log is, as one sequence, not as two causes of one end (01_start)."""
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    (crashes / "running").write_text("1")
    log = crashes / "crash-20261207-095800.log"
    log.write_text("ValueError: a bug", encoding="utf-8")
    (crashes / "last-crash.txt").write_text(str(log), encoding="utf-8")
    message = CrashReporter(crashes).previous_crash()
    assert message == (
        "The last run of Ember did not end normally (it was killed or the computer stopped). "
        f"Before that it had an unexpected error; its log is {log}."
    )
    again = CrashReporter(crashes).previous_crash()  # the log said once; no record now: killed, as before
    assert again is not None and "did not end normally" in again and "unexpected error" not in again


def test_a_run_that_had_an_error_then_crashed_says_the_crash_then_the_error(tmp_path: Path) -> None:
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    (crashes / "running").write_text("1")
    (crashes / "native.log").write_text("Fatal Python error: Segmentation fault\n", encoding="utf-8")
    log = crashes / "crash-20261207-095800.log"
    log.write_text("ValueError: a bug", encoding="utf-8")
    (crashes / "last-crash.txt").write_text(str(log), encoding="utf-8")
    message = CrashReporter(crashes).previous_crash()
    kept = next(crashes.glob("crash-*-native.log"))
    assert message == (
        f"The last run of Ember crashed (a native error, in llama.cpp or Qt); its log is {kept}. "
        f"Before that it had an unexpected error; its log is {log}."
    )


def test_a_run_that_had_an_error_and_ended_cleanly_says_the_error(tmp_path: Path) -> None:
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    log = crashes / "crash-20261207-095800.log"
    log.write_text("ValueError: a bug", encoding="utf-8")
    (crashes / "last-crash.txt").write_text(str(log), encoding="utf-8")
    assert (
        CrashReporter(crashes).previous_crash() == f"The last run of Ember had an unexpected error; its log is {log}."
    )


def test_an_error_outside_the_event_loop_ended_the_run_and_is_said_so(qtbot: QtBot, tmp_path: Path) -> None:
    """An error on the main thread before the event loop runs (building the window) or after it ends the
    run itself (the `running` file stays behind): the next start says it ended with that error, not that it
    was killed with an error before. One reported while the loop runs (a slot) does not end it."""
    crashes = tmp_path / "crashes"
    crash = CrashReporter(crashes)
    crash.install()
    try:
        raise RuntimeError("the window could not be built")
    except RuntimeError:
        with qtbot.waitSignal(crash._show, timeout=5_000):
            sys.excepthook(*sys.exc_info())  # (what Python calls as main() raises: no event loop runs)
    _ends_without_a_clean_exit(crash)
    [log] = crashes.glob("crash-*.log")
    message = CrashReporter(crashes).previous_crash()
    assert message == f"The last run of Ember ended with an unexpected error; its log is {log}."

    crash = CrashReporter(crashes)
    crash.install()
    try:
        try:
            raise ValueError("a bug in a slot")
        except ValueError:
            info = sys.exc_info()
        with qtbot.waitSignal(crash._show, timeout=5_000):
            QTimer.singleShot(0, lambda: sys.excepthook(*info))  # (reported while the event loop runs)
    finally:
        _ends_without_a_clean_exit(crash)  # (then killed)
    message = CrashReporter(crashes).previous_crash()
    assert message is not None and message.startswith("The last run of Ember did not end normally")
    assert "Before that it had an unexpected error" in message


def _ends_without_a_clean_exit(crash: CrashReporter) -> None:
    """The run's hooks and native log let go of as a process that ends leaves them: `running` stays behind."""
    if crash.dialog is not None:
        crash.dialog.done(QMessageBox.StandardButton.Close)
    sys.excepthook, threading.excepthook = crash._previous
    faulthandler.disable()
    assert crash._native is not None
    crash._native.close()
