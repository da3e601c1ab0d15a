"""Files built to be slow or to inflate (tests/hostile/slow_or_inflating_files.py), attached in the real
window, and sent to the API server the window runs. Each file is read in a child process with the
limits of settings.json: past one, the banner says which and the chip goes; a chip's ✕ kills its
reader; slow files wait on the attachments' own runner, never on the window's shared one (backups, the
Trash and caches use it); turning the API server off while it reads a request's file does not stop
the window's event loop. A PDF that makes pypdf warn on every page is one line of Ember's log, not a
line per page on the terminal."""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import psutil
import pytest
from PySide6.QtCore import Qt, QTimer
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments import reader_turns
from ember_chat.engine.attachments.reader_turns import MAX_READERS, Requester
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.attachment_files import reading_processes
from tests.helpers.attachments_window import SLOW_HTML, slow_file, with_settings
from tests.helpers.window_support import start_api_in_window
from tests.hostile.slow_or_inflating_files import (
    docx_zip_bomb,
    pdf_that_warns_on_every_page,
    quadratic_html,
    unknown_section_html,
)

WAIT_MS = 60_000
MB = 1024 * 1024


@pytest.fixture(autouse=True)
def no_reader_left(qtbot: QtBot) -> Iterator[None]:
    yield
    qtbot.waitUntil(lambda: not reading_processes(), timeout=10_000)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_slow_file_stops_at_the_time_limit_and_says_so(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    with_settings(paths, attachment_read_seconds=2)
    w = make_window()
    w.composer.editor.setPlainText("my question")
    with qtbot.waitSignal(w.composer.attachments.failed, timeout=WAIT_MS) as failed:
        w.composer.attach_paths([slow_file(tmp_path)])
    said = failed.args[0]
    assert said.startswith("page.html took longer than 2 seconds to read, so Ember stopped reading it"), said
    assert w.banner.isVisible() and w.banner.text() == said
    assert w.composer.attachments.items == [] and w.composer.editor.toPlainText() == "my question"


def test_a_docx_zip_bomb_stops_at_the_memory_limit_and_says_so(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    with_settings(paths, attachment_read_memory_mb=400)
    w = make_window()
    bomb = tmp_path / "report.docx"
    bomb.write_bytes(docx_zip_bomb(40 * MB))  # (under the unpacked-size check)
    with qtbot.waitSignal(w.composer.attachments.failed, timeout=WAIT_MS) as failed:
        w.composer.attach_paths([bomb])
    assert failed.args[0].startswith("report.docx needs more than 400.0 MB of memory to read"), failed.args[0]


def test_an_html_section_python_asserts_on_is_attached(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    page = tmp_path / "section.html"
    page.write_bytes(unknown_section_html())
    w.composer.attach_paths([page])
    bar = w.composer.attachments
    qtbot.waitUntil(lambda: bool(bar.items) and not bar.busy, timeout=WAIT_MS)
    (item,) = bar.items
    assert item.extracted is not None and item.extracted.text == "Before the section.\n\nAfter the section."
    assert not w.banner.isVisible()


def test_slow_files_leave_the_window_s_runner_free_and_their_x_kills_their_readers(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    bar = w.composer.attachments
    w.composer.attach_paths([slow_file(tmp_path, "one.html"), slow_file(tmp_path, "two.html")])
    qtbot.waitUntil(lambda: all(i.reader is not None and i.reader.pid for i in bar.items), timeout=WAIT_MS)
    pids = [i.reader.pid for i in bar.items if i.reader is not None and i.reader.pid is not None]
    assert len(pids) == 2
    # the window's own runner still runs what backups, the Trash and caches give it
    done: list[str] = []
    w.tasks.run(lambda: "ran", done.append)
    qtbot.waitUntil(lambda: done == ["ran"], timeout=10_000)
    # ✕ on each chip: its reader is killed, and nothing is said (the user took it away)
    for item in list(bar.items):
        qtbot.mouseClick(item.chip.close_button, Qt.MouseButton.LeftButton)
    assert bar.items == []
    qtbot.waitUntil(lambda: all(gone(pid) for pid in pids), timeout=10_000)
    assert not w.banner.isVisible()


class LongestPause:
    """The longest time the GUI thread's event loop did not run, measured by a 10 ms timer."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._last = time.monotonic()
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._beat)
        self.timer.start()

    def _beat(self) -> None:
        now = time.monotonic()
        self.longest = max(self.longest, now - self._last)
        self._last = now


def test_turning_the_api_server_off_while_it_reads_a_file_does_not_freeze_the_window(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    url = start_api_in_window(qtbot, w)
    errors: list[BaseException] = []
    encoded = base64.b64encode(quadratic_html(SLOW_HTML)).decode("ascii")
    part = {"type": "file", "file": {"filename": "page.html", "file_data": encoded}}
    messages: Any = [{"role": "user", "content": [{"type": "text", "text": "Read it"}, part]}]

    def ask() -> None:
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120) as client:
            try:
                client.chat.completions.create(model="tiny", messages=messages, max_tokens=2)
            except openai.APIError as exc:
                errors.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    try:
        qtbot.waitUntil(lambda: bool(reading_processes()), timeout=30_000)  # the server is reading it
        pause = LongestPause()
        dialog = w.api.open_dialog()
        dialog.enabled.setChecked(False)
        with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS) as applied:
            dialog.apply()
        pause.timer.stop()
        assert applied.args == [True] and not w.api.running
        assert pause.longest < 2.0, f"the window froze for {pause.longest:.1f} s"
        qtbot.waitUntil(lambda: not reading_processes(), timeout=10_000)  # the reader went with the connection
        thread.join(30)
        assert [type(e) for e in errors] == [openai.APIConnectionError]
    finally:
        thread.join(60)


def test_api_requests_with_slow_files_leave_a_reader_for_the_window(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    """A client on loopback keeps as many requests going as there are readers, a slow file each: the
    API reads at most all but one of them at once, the rest wait in line, and a file attached in the
    window is read meanwhile (it stayed at 0% until one of theirs reached the time limit)."""
    w = make_window()
    url = start_api_in_window(qtbot, w)
    errors: list[BaseException] = []
    encoded = base64.b64encode(quadratic_html(SLOW_HTML)).decode("ascii")

    def ask(n: int) -> None:
        part = {"type": "file", "file": {"filename": f"slow-{n}.html", "file_data": encoded}}
        messages: Any = [{"role": "user", "content": [{"type": "text", "text": "Read it"}, part]}]
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120) as client:
            try:
                client.chat.completions.create(model="tiny", messages=messages, max_tokens=2)
            except openai.APIError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(MAX_READERS)]
    for t in threads:
        t.start()
    try:

        def api() -> tuple[int, int]:
            return reader_turns.turns.count(Requester.API)  # (reading, waiting)

        # every request is in: its file read, or waiting for its turn
        qtbot.waitUntil(lambda: sum(api()) == MAX_READERS and len(reading_processes()) == api()[0], timeout=30_000)
        notes = tmp_path / "notes.txt"
        notes.write_text("The window's own notes.")
        w.composer.attach_paths([notes])
        bar = w.composer.attachments
        qtbot.waitUntil(lambda: bool(bar.items) and bar.items[0].extracted is not None, timeout=15_000)
        assert bar.items[0].extracted is not None and bar.items[0].extracted.text == "The window's own notes."
        assert api() == (MAX_READERS - 1, 1) and not w.banner.isVisible()
        dialog = w.api.open_dialog()  # the server off: its connections and their readers end
        dialog.enabled.setChecked(False)
        with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS):
            dialog.apply()
    finally:
        for t in threads:
            t.join(60)
    assert [type(e) for e in errors] == [openai.APIConnectionError] * MAX_READERS


def test_a_pdf_that_makes_pypdf_warn_on_every_page_is_logged_once(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """pypdf's warnings (1,412 lines of "fontTools is required…" for a real PDF) went to the terminal,
    one per page: now each distinct one is a line of Ember's log, with its count."""
    caplog.set_level(logging.INFO)
    w = make_window()
    noisy = tmp_path / "noisy.pdf"
    noisy.write_bytes(pdf_that_warns_on_every_page(30))
    w.composer.attach_paths([noisy])
    bar = w.composer.attachments
    qtbot.waitUntil(lambda: bool(bar.items) and not bar.busy, timeout=WAIT_MS)
    assert bar.items[0].extracted is not None and "Page 30 of the noisy report." in bar.items[0].extracted.text
    assert [r for r in caplog.records if r.name.startswith("pypdf")] == []
    (logged,) = [r.getMessage() for r in caplog.records if "noisy.pdf" in r.getMessage()]
    assert logged == "noisy.pdf: Font encoding differences are not an array: 5 (30 times)"
