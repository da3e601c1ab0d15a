"""Text from the Hub, a download or a file name is shown literally in the Model Manager: markup in
an error is never rendered as rich text (no bold, no <img> loading a resource)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as QtGui_Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from ember_chat.app.models.manager.dialog import ModelManager
from ember_chat.engine.errors import DownloadError, HubError
from ember_chat.engine.models.download_queue import FAILED, DownloadQueue
from ember_chat.engine.models.downloader import DownloadSpec
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.storage.secrets import TokenStore

EVIL = "<b>x</b><img src=nowhere.png> & more"
TIMEOUT = 30_000


def displayed(text: str, fmt: Qt.TextFormat = Qt.TextFormat.AutoText) -> str:
    """What Qt renders for `text` in a label or tooltip of this format, as plain text."""
    rich = fmt == Qt.TextFormat.RichText or (fmt == Qt.TextFormat.AutoText and QtGui_Qt.mightBeRichText(text))
    if not rich:
        return text
    doc = QTextDocument()
    doc.setHtml(text)
    return doc.toPlainText()


def shown(label: QLabel) -> str:
    return displayed(label.text(), label.textFormat())


class FailingHub:
    def search(self, query: str) -> list:
        raise HubError(f"Searching the Hub for '{query}': {EVIL}")

    def files(self, repo: str) -> object:
        raise HubError(f"Listing the files of {repo}: {EVIL}")

    def with_header(self, files: object) -> object:
        return files


class FailingDownloader:
    def fetch(self, *args: object, **kwargs: object) -> Path:
        raise DownloadError(f"the server said {EVIL}")


@pytest.fixture
def manager(qtbot: QtBot, tmp_path: Path) -> Iterator[ModelManager]:
    queue = DownloadQueue(FailingDownloader, tmp_path / "models")  # type: ignore[arg-type]
    mm = ModelManager(ModelLibrary(tmp_path / "models"), queue, FailingHub, TokenStore(), lambda: 4096)  # type: ignore[arg-type]
    qtbot.addWidget(mm)
    yield mm
    mm.shutdown()
    queue.close()


def test_hub_error_is_shown_literally(qtbot: QtBot, manager: ModelManager) -> None:
    manager.search_box.setText("<i>q</i>")
    with qtbot.waitSignal(manager.search_done, timeout=TIMEOUT):
        manager.search()
    assert shown(manager.discover_status) == f"Searching the Hub for '<i>q</i>': {EVIL}"
    with qtbot.waitSignal(manager.files_shown, timeout=TIMEOUT):
        manager.discover_tab.open_repo("acme/tiny-GGUF")
    assert shown(manager.discover_status) == f"Listing the files of acme/tiny-GGUF: {EVIL}"


def test_search_status_shows_the_query_literally(qtbot: QtBot, manager: ModelManager) -> None:
    manager.search_box.setText("<b>big</b>")
    with qtbot.waitSignal(manager.search_done, timeout=TIMEOUT):
        manager.search()
        assert "“<b>big</b>”" in shown(manager.discover_status)  # while the search runs


def test_download_error_tooltip_is_shown_literally(qtbot: QtBot, manager: ModelManager) -> None:
    manager.queue.add(DownloadSpec("acme/tiny-GGUF", "tiny-Q4_K_M.gguf", size=4))
    assert manager.queue.wait_idle(30)
    assert manager.queue.snapshot()[0].state == FAILED
    manager.refresh_downloads()
    item = manager.downloads.item(0, 5)
    assert EVIL in item.text()  # table cells are always plain text
    assert displayed(item.toolTip()) == f"the server said {EVIL}"


def test_import_error_is_shown_literally(qtbot: QtBot, manager: ModelManager, tmp_path: Path) -> None:
    bad = tmp_path / "<b>x<img src=nowhere.png>.gguf"  # no "/" in a file name
    bad.write_bytes(b"\0" * 100)
    with qtbot.waitSignal(manager.tasks.settled, timeout=TIMEOUT):
        manager.import_file(bad)
    assert bad.name in shown(manager.banner.label)
