"""The crash handler: an unexpected Python error on any thread is written to a crash log under the
data folder and shown in a dialog whose text can be copied; a native crash (llama.cpp, Qt) leaves
its stack in a log through `faulthandler`; and the next start says that the last run crashed and
where its log is. (The chat being written is already saved up to the last second.) It also notes the
model in use (loading or loaded), so that a start after a crash does not load that model again by
itself: it may be what crashed (too big for the memory, a file llama.cpp cannot read)."""

from __future__ import annotations

import contextlib
import faulthandler
import platform
import sys
import threading
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import IO

from PySide6.QtCore import QObject, QThread, Signal, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox, QWidget

from ember_chat.app.qt.plain_text import plain_message
from ember_chat.engine import __version__

RUNNING = "running"  # present while Ember runs; left behind when a run does not end cleanly
NATIVE = "native.log"  # faulthandler's output for this run
LAST = "last-crash.txt"  # the path of the last crash log (and ENDED after it), until the next start has said so
ENDED = "ended the run"  # LAST's second line: the error came outside the event loop, and the run ended with it
MODEL_IN_USE = "model-in-use.txt"  # the model loading or loaded, while one is


class CrashReporter(QObject):
    _show = Signal(str, str)  # summary, log path: shown on the GUI thread whatever thread failed

    def __init__(self, crash_dir: Path, parent_window: QWidget | None = None) -> None:
        super().__init__()
        self.dir = crash_dir
        self.window = parent_window
        self._native: IO[str] | None = None
        self._previous = (sys.excepthook, threading.excepthook)
        self.dialog: QMessageBox | None = None
        self._show.connect(self._show_dialog)

    # ----- the previous run
    def previous_crash(self) -> str | None:
        """What the next start says about the last run (call before `install`)."""
        messages = []
        native = self.dir / NATIVE
        last = self.dir / LAST
        error_log, ended = "", False
        if last.exists():
            with contextlib.suppress(OSError):
                error_log, _, flag = last.read_text(encoding="utf-8").strip().partition("\n")
                ended = flag.strip() == ENDED
            last.unlink(missing_ok=True)
        if ended and error_log:  # (an error before or after the event loop: it ended the run itself)
            return self.tr("The last run of Ember ended with an unexpected error; its log is {path}.").format(
                path=error_log
            )
        if (self.dir / RUNNING).exists():
            if native.exists() and native.stat().st_size > 0:
                kept = self.dir / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-native.log"
                native.replace(kept)
                messages.append(
                    self.tr(
                        "The last run of Ember crashed (a native error, in llama.cpp or Qt); its log is {path}."
                    ).format(path=kept)
                )
            else:
                messages.append(
                    self.tr("The last run of Ember did not end normally (it was killed or the computer stopped).")
                )
        if error_log and messages:  # an error in the event loop does not end the run (its dialog says to keep
            # working): what ended it came after, and is said first
            messages.append(
                self.tr("Before that it had an unexpected error; its log is {path}.").format(path=error_log)
            )
        elif error_log:
            messages.append(
                self.tr("The last run of Ember had an unexpected error; its log is {path}.").format(path=error_log)
            )
        return " ".join(messages) or None

    def model_at_crash(self) -> str | None:
        """The model that was loading or loaded when the last run ended without a clean exit (call
        before `install`)."""
        if not (self.dir / RUNNING).exists():
            return None
        try:
            return (self.dir / MODEL_IN_USE).read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    # ----- this run
    def note_model(self, name: str | None) -> None:
        """The model now loading or loaded (None: none is), for the next start if this run dies."""
        with contextlib.suppress(OSError):  # a note that cannot be written must not stop a load
            if name:
                (self.dir / MODEL_IN_USE).write_text(name, encoding="utf-8")
            else:
                (self.dir / MODEL_IN_USE).unlink(missing_ok=True)

    def install(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / RUNNING).write_text(str(time.time()))
        (self.dir / MODEL_IN_USE).unlink(missing_ok=True)  # (the last run's, read before)
        self._native = open(self.dir / NATIVE, "w")  # noqa: SIM115 - open for the whole run
        faulthandler.enable(self._native, all_threads=True)
        self._previous = (sys.excepthook, threading.excepthook)
        sys.excepthook = self._on_exception
        threading.excepthook = self._on_thread_exception

    def uninstall(self) -> None:
        """A clean exit: nothing to report next time."""
        sys.excepthook, threading.excepthook = self._previous
        if self._native is not None:
            faulthandler.disable()
            self._native.close()
            self._native = None
            with contextlib.suppress(OSError):
                if (self.dir / NATIVE).stat().st_size == 0:
                    (self.dir / NATIVE).unlink()
        (self.dir / RUNNING).unlink(missing_ok=True)
        (self.dir / MODEL_IN_USE).unlink(missing_ok=True)

    def _on_thread_exception(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        self.report(args.exc_type, args.exc_value, args.exc_traceback, args.thread.name if args.thread else "?")

    def _on_exception(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        self.report(exc_type, exc, tb, threading.current_thread().name)

    def report(
        self, exc_type: type[BaseException], exc: BaseException | None, tb: TracebackType | None, thread: str
    ) -> Path | None:
        """Write the crash log and show the dialog (from any thread)."""
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        header = (
            f"Ember {__version__} on {platform.platform()}, Python {platform.python_version()}\n"
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}, thread {thread}\n\n"
        )
        path = self.dir / f"crash-{time.strftime('%Y%m%d-%H%M%S')}.log"
        # on the main thread outside the event loop (building the window, or after it): the run ends with it
        ends = threading.current_thread() is threading.main_thread() and QThread.currentThread().loopLevel() == 0
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            path.write_text(header + text, encoding="utf-8")
            (self.dir / LAST).write_text(f"{path}\n{ENDED}" if ends else str(path), encoding="utf-8")
        except OSError:
            path = None  # a full disk must not turn a reported error into a second one
        print(header + text, file=sys.stderr)
        self._show.emit(f"{exc_type.__name__}: {exc}", str(path) if path else "")
        return path

    @Slot(str, str)
    def _show_dialog(self, summary: str, log_path: str) -> None:
        box = plain_message(QMessageBox(self.window))
        box.setIcon(QMessageBox.Icon.Critical)
        box.setWindowTitle(self.tr("Ember: unexpected error"))
        intro = self.tr(
            "Something went wrong inside Ember. Your chats are saved; you can keep working, or restart Ember "
            "if the window misbehaves."
        )
        where = ("\n\n" + self.tr("The details are saved in {path}.").format(path=log_path)) if log_path else ""
        box.setText(f"{intro}\n\n{summary}{where}")
        details = Path(log_path).read_text(encoding="utf-8") if log_path else summary
        box.setDetailedText(details)
        copy = box.addButton(self.tr("Copy details"), QMessageBox.ButtonRole.ActionRole)
        copy.setAccessibleName(self.tr("Copy details"))
        copy.setToolTip(self.tr("Copy the error report to the clipboard"))
        copy.clicked.disconnect()  # keep the box open when copying
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(details))
        close = box.addButton(QMessageBox.StandardButton.Close)
        close.setAccessibleName(self.tr("Close"))
        box.setAccessibleName(self.tr("Unexpected error"))
        self.dialog = box
        box.open()
