"""The images an import brings are read as attached files are (in a child process, with the limits of
settings.json), and that reading never holds up the window:

- File ▸ Import of a ChatGPT export while every reader is busy with slow files of the user's: the import
  waits for its turn without holding the chat store's lock (the window's thread asks the store all the
  while and is answered at once), and its Cancel stops that wait (it waited for the slow files before).
- The user's memory limit (attachment_read_memory_mb) reaches an imported image, in the window and in
  `ember-chat chats import` (both used the default 2 GB: tests/hostile/inflating_image.py came in).
- A folder of the export swapped for a link out of it between the check and the open (the race an
  attacker with a process beside the import would run) is not followed: the path is walked one folder
  at a time from the export's folder, never through a link."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments import AttachmentStore, Limits
from ember_chat.engine.attachments.imported import AttachmentImporter
from ember_chat.engine.attachments.isolated import read_attachment_isolated
from ember_chat.engine.attachments.reader_turns import MAX_READERS
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.importing import import_chats
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import Settings, SettingsFile
from tests.helpers.attachment_files import image_bytes, reading_processes
from tests.helpers.chatgpt_export import rows
from tests.helpers.chats_cli import cli
from tests.helpers.import_fixtures import DALLE_ASSET, dalle, photosynthesis
from tests.helpers.import_window import choose
from tests.hostile.inflating_image import png_that_inflates
from tests.hostile.slow_or_inflating_files import quadratic_html

SLOW_HTML = 400_000  # repeats of `a </x `: minutes for Python's parser
SLOW_S = 25  # the slow files' own time limit: what an import waited for before
WAIT_MS = 60_000
TOO_BIG = "needs more than 256.0 MB of memory to read"


def chatgpt_export(folder: Path, leaf: bytes) -> Path:
    """An unzipped ChatGPT export: the photosynthesis chat, whose question shows `leaf`."""
    folder.mkdir(parents=True)
    (folder / "file-Abc123-leaf.png").write_bytes(leaf)
    conversation, _ = photosynthesis()
    source = folder / "conversations.json"
    source.write_text(json.dumps([conversation]), encoding="utf-8")
    return source


class BusyReaders:
    """Every reader Ember runs at once (MAX_READERS) reading a slow file of the user's own (as files
    attached in the window are), until `stop()` or their time limit."""

    def __init__(self, folder: Path) -> None:
        self._stop = threading.Event()
        self.ended: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(folder / f"slow {i}.html",), daemon=True)
            for i in range(MAX_READERS)
        ]

    def _read(self, path: Path) -> None:
        path.write_bytes(quadratic_html(SLOW_HTML))
        try:
            read_attachment_isolated(path, Limits(max_seconds=SLOW_S), cancelled=self._stop.is_set)
        except AttachmentError as exc:
            if not self._stop.is_set():
                self.ended.append(str(exc))

    def start(self, qtbot: QtBot) -> None:
        for t in self._threads:
            t.start()
        qtbot.waitUntil(lambda: len(reading_processes()) == MAX_READERS, timeout=WAIT_MS)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)


@pytest.fixture
def busy(qtbot: QtBot, tmp_path: Path) -> Iterator[BusyReaders]:
    readers = BusyReaders(tmp_path)
    readers.start(qtbot)
    try:
        yield readers
    finally:
        readers.stop()
        qtbot.waitUntil(lambda: not reading_processes(), timeout=10_000)


class StoreCalls:
    """The window's thread asks the store for a chat every 20 ms (as opening it, drawing the list and
    saving a draft do): how many times, and the longest it waited for an answer."""

    def __init__(self, w: MainWindow, cid: int) -> None:
        self.count = 0
        self.longest = 0.0
        self._ask = lambda: w.store.conversation(cid)
        self.timer = QTimer()
        self.timer.setInterval(20)
        self.timer.timeout.connect(self._call)
        self.timer.start()

    def _call(self) -> None:
        started = time.monotonic()
        self._ask()
        self.longest = max(self.longest, time.monotonic() - started)
        self.count += 1


def file_read(qtbot: QtBot, importer: Any) -> None:
    """Until the import has read its file and counted its chats (then it reads the chats' images)."""
    seen: list[tuple[int, int]] = []
    importer.progressed.connect(lambda done, total: seen.append((done, total)))
    qtbot.waitUntil(lambda: (0, 1) in seen, timeout=WAIT_MS)


def test_an_import_waiting_for_a_reader_never_holds_the_window_on_the_store(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, busy: BusyReaders
) -> None:
    w = make_window()
    mine = w.store.create_conversation("Mine")
    w.store.add_message(mine.id, "user", "my own question")
    importer = choose(qtbot, w, chatgpt_export(tmp_path / "export", image_bytes("PNG")))
    file_read(qtbot, importer)
    calls = StoreCalls(w, mine.id)
    # a hundred asks, two seconds and more: the import waits for a reader all that time (it reaches
    # its image's read in milliseconds once the file is read); it held the store's lock meanwhile
    qtbot.waitUntil(lambda: calls.count >= 100, timeout=WAIT_MS)
    calls.timer.stop()
    assert calls.longest < 1.0, f"the window waited {calls.longest:.1f} s for the chat store"
    assert importer.running and busy.ended == []  # (all that time the import waited, the slow files were read)
    busy.stop()  # a reader is free: the import reads its image and writes the chat
    with qtbot.waitSignal(importer.finished, timeout=WAIT_MS) as done:
        pass
    assert done.args[0].chats == 1 and done.args[0].skipped == ()
    assert rows(w.store.path)["attachments"] == 1


def test_cancel_stops_an_import_waiting_for_a_reader(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, busy: BusyReaders
) -> None:
    w = make_window()
    importer = choose(qtbot, w, chatgpt_export(tmp_path / "export", image_bytes("PNG")))
    file_read(qtbot, importer)
    ended: list[object] = []
    importer.failed.connect(ended.append)
    importer.finished.connect(ended.append)
    qtbot.wait(1000)  # (no event says the import waits for its turn: it does within milliseconds)
    assert importer.progress is not None
    importer.progress.findChild(QPushButton).click()  # the progress dialog's Cancel
    qtbot.waitUntil(lambda: bool(ended), timeout=WAIT_MS)
    # it ended while every reader was still busy with the slow files: the cancel reached its wait
    assert busy.ended == [] and len(reading_processes()) == MAX_READERS
    assert ended == ["The import was cancelled; nothing was imported."]
    assert rows(w.store.path)["conversations"] == 0 and rows(w.store.path)["attachments"] == 0


def test_the_window_imports_images_with_the_memory_limit_of_settings(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    SettingsFile(paths.settings_file).save(Settings().with_changes(attachment_read_memory_mb=256))
    w = make_window()
    importer = choose(qtbot, w, chatgpt_export(tmp_path / "export", png_that_inflates()))
    ended: list[object] = []
    importer.failed.connect(ended.append)
    importer.finished.connect(ended.append)
    qtbot.waitUntil(lambda: bool(ended), timeout=WAIT_MS)
    said = ended[0]
    assert isinstance(said, str) and TOO_BIG in said and "attachment_read_memory_mb" in said, said
    assert said in w.banner.text() and rows(w.store.path)["conversations"] == 0


def test_chats_import_reads_images_with_the_memory_limit_of_settings(tmp_path: Path) -> None:
    data = tmp_path / "data"
    place = AppPaths(data, data / "config")  # (where tests.helpers.chats_cli.cli keeps settings.json)
    SettingsFile(place.settings_file).save(Settings().with_changes(attachment_read_memory_mb=256))
    done = cli(data, "import", str(chatgpt_export(tmp_path / "export", png_that_inflates())))
    assert done.returncode == 2 and TOO_BIG in done.stderr, done.stdout + done.stderr
    assert rows(place.database)["conversations"] == 0


def test_a_folder_swapped_for_a_link_while_its_image_is_opened_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dalle-generations/` is a real folder when the export is read and its image checked; the
    attacker's process makes it a link to a folder outside at the moment the image is opened (a
    wrapper of os.open stands in for winning that race). The image is left out, never read."""
    export = (tmp_path / "export").resolve()
    (export / "dalle-generations").mkdir(parents=True)
    (export / "dalle-generations" / f"{DALLE_ASSET}-0f1e2d3c.png").write_bytes(image_bytes("PNG", (3, 3)))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{DALLE_ASSET}-0f1e2d3c.png").write_bytes(image_bytes("PNG", (11, 11)))
    source = export / "conversations.json"
    source.write_text(json.dumps([dalle()]), encoding="utf-8")
    real_open = os.open
    swapped: list[str] = []

    def open_after_the_swap(path: Any, *args: Any, **kwargs: Any) -> int:
        if not swapped and str(export) in os.fsdecode(path):  # the first open inside the export
            (export / "dalle-generations").rename(export / "was dalle-generations")
            (export / "dalle-generations").symlink_to(outside, target_is_directory=True)
            swapped.append(os.fsdecode(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_after_the_swap)
    data = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(data.database)
    try:
        report = import_chats(store, source, attachments=AttachmentImporter(AttachmentStore(data, store)))
        assert swapped  # (the race was run)
        assert report.chats == 1 and report.skipped == ("1 image of the export that could not be read from its folder",)
        assert rows(store.path)["attachments"] == 0
    finally:
        store.close()
