"""The Model Manager's Discover and Installed tabs are widgets of their own, each with its own state:
either works alone, with only what the dialog hands it (a task runner, a banner, the stores), and
tells the dialog through its signals what the dialog does about it (show the Downloads tab, or
itself)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.models.manager.discover import DiscoverTab
from ember_chat.app.models.manager.installed import InstalledTab
from ember_chat.app.models.manager.tables import StatusBanner
from ember_chat.engine.errors import HubOffline
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.resources import catalog

TIMEOUT = 30_000


class OfflineHub:
    def search(self, query: str) -> list:
        raise HubOffline("no route to the Hub")


class MemoryTokens:
    def __init__(self) -> None:
        self.token = ""

    def set(self, token: str) -> None:
        self.token = token


@pytest.fixture
def tasks() -> Iterator[TaskRunner]:
    runner = TaskRunner()
    yield runner
    runner.shutdown()
    assert runner.join(10)


def test_discover_alone_filters_the_catalog_and_says_offline(qtbot: QtBot, tasks: TaskRunner) -> None:
    banner = StatusBanner()
    tokens = MemoryTokens()
    tab = DiscoverTab(None, OfflineHub, tokens, tasks, banner, lambda: 4096, lambda: (0, "f16"))  # type: ignore[arg-type]
    qtbot.addWidget(tab)
    qtbot.addWidget(banner)
    tab.show_catalog()
    assert tab.showing_catalog and len(tab.catalog_shown()) == len(catalog())
    tab.search_box.setText("coder")
    assert tab.catalog_shown() == [e.repo for e in catalog() if "coder" in f"{e.name} {e.repo}".lower()]
    # what the local API's /v1/embeddings and /v1/rerank are for is offered too (issue 30)
    tab.search_box.setText("embed")
    assert tab.catalog_shown() == ["nomic-ai/nomic-embed-text-v1.5-GGUF"]
    tab.search_box.setText("rerank")
    assert tab.catalog_shown() == ["gpustack/bge-reranker-v2-m3-GGUF"]
    tab.search_box.setText("coder")
    with qtbot.waitSignal(tab.search_done, timeout=TIMEOUT):
        tab.search()
    assert banner.kind() == "error" and banner.text().startswith("You are offline")
    assert banner.label.toolTip() == "no route to the Hub"
    assert tab.discover_status.text().startswith("Offline.")
    with qtbot.waitSignal(tab.token_saved, timeout=TIMEOUT):
        tab.set_token("hf_secret")
    assert tokens.token == "hf_secret" and tab.discover_status.text() == "Token saved in the keychain."


def test_installed_alone_lists_marks_and_reads_headers_on_its_own_runner(
    qtbot: QtBot, tasks: TaskRunner, tiny_model: Path, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(tiny_model, models / tiny_model.name)
    banner = StatusBanner()
    library = ModelLibrary(models)
    name = next(e.name for e in library.entries() if e.path is not None and e.path.parent == models)
    tab = InstalledTab(library, tasks, banner, lambda: name)
    qtbot.addWidget(tab)
    qtbot.addWidget(banner)
    with qtbot.waitSignal(tab.headers_read, timeout=TIMEOUT):
        tab.refresh_installed()
    assert tab.select_installed(name)
    row = tab.installed.selectedItems()[0].row()
    assert tab.installed.item(row, 0).text() == f"● {name} — loaded"
    assert tab.installed.item(row, 0).font().bold()
    assert tab.installed.item(row, 1).text() not in ("reading…", "")  # its header was read
    requested: list[str] = []
    tab.load_requested.connect(requested.append)
    tab.load_selected()
    assert requested == [name]
    tab.shutdown()
    assert tab.join(10)  # the header reads ran on the tab's own runner


def test_installed_alone_asks_to_be_shown_when_an_import_starts(
    qtbot: QtBot, tasks: TaskRunner, tmp_path: Path
) -> None:
    banner = StatusBanner()
    tab = InstalledTab(ModelLibrary(tmp_path / "models"), tasks, banner, lambda: None)
    qtbot.addWidget(tab)
    qtbot.addWidget(banner)
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    order: list[str] = []
    tab.import_started.connect(lambda: order.append("started"))
    tab.import_checked.connect(lambda: order.append("checked"))
    with qtbot.waitSignal(tab.import_checked, timeout=TIMEOUT):
        tab.start_import(notes)
    assert order == ["started", "checked"]
    assert banner.kind() == "error" and "notes.gguf is not a GGUF model file" in banner.text()
    assert tab.import_question is None
    tab.shutdown()


def test_the_dialog_shows_the_tab_its_tabs_ask_for(qtbot: QtBot, tmp_path: Path) -> None:
    from ember_chat.app.models.manager.dialog import ModelManager
    from ember_chat.engine.models.download_queue import DownloadQueue
    from ember_chat.engine.storage.secrets import TokenStore

    queue = DownloadQueue(object, tmp_path / "models")  # type: ignore[arg-type]
    mm = ModelManager(ModelLibrary(tmp_path / "models"), queue, OfflineHub, TokenStore(), lambda: 4096)  # type: ignore[arg-type]
    qtbot.addWidget(mm)
    try:
        assert mm.tabs.widget(0) is mm.discover_tab and mm.tabs.widget(1) is mm.installed_tab
        assert mm.repos is mm.discover_tab.repos and mm.installed is mm.installed_tab.installed
        mm.discover_tab.downloads_added.emit()
        assert mm.tabs.currentIndex() == 2
        mm.installed_tab.import_started.emit()
        assert mm.tabs.currentIndex() == 1
        mm.hub_factory = OfflineHub  # (the Discover tab's, through the dialog)
        assert mm.discover_tab.hub_factory is OfflineHub
        with qtbot.waitSignal(mm.search_done, timeout=TIMEOUT):  # the tab's signals reach the dialog's
            mm.search()
    finally:
        mm.shutdown()
        assert mm.join(10)
        queue.close()
