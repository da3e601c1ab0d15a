"""The Model Manager as a new user meets it (issue 16, items 14 and 16): import asks in words and
names the model by its GGUF, notices a file already installed and refuses a non-GGUF file before
asking; Discover offline says so with Retry and the catalog still filters; the buttons are enabled
only where they act; empty Downloads say so; counts read right; the loaded model is marked."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFontMetrics
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.models.download_queue import DONE
from ember_chat.engine.models.hub import HubClient
from ember_chat.engine.resources import catalog
from tests.helpers.hub_server import FakeHub

TIMEOUT = 60_000


@pytest.fixture
def hub(tiny_model: Path) -> Iterator[FakeHub]:
    h = FakeHub().start()
    h.add_repo("acme/tiny-GGUF", {"tiny-F32.gguf": tiny_model.read_bytes()}, downloads=42)
    yield h
    h.stop()


def listed(qtbot: QtBot, mm: object) -> None:
    with qtbot.waitSignal(mm.installed_listed, timeout=TIMEOUT):
        mm.refresh_installed()


def test_import_asks_in_words_names_the_model_and_notices_duplicates(
    qtbot: QtBot, window: MainWindow, tiny_model: Path, tmp_path: Path
) -> None:
    mm = window.models.model_manager()
    mm.show()
    # not a GGUF file: said in the banner, in words, and no question is asked
    notes = tmp_path / "notes.gguf"
    notes.write_text("my shopping list\n" * 20)
    with qtbot.waitSignal(mm.import_checked, timeout=TIMEOUT):
        mm.start_import(notes)
    assert mm.installed_tab.import_question is None
    assert mm.banner.isVisible() and mm.banner.kind() == "error"
    assert "notes.gguf is not a GGUF model file" in mm.banner.text() and "magic" not in mm.banner.text()
    # a model: the question names the model and its buttons say what they do
    with qtbot.waitSignal(mm.import_checked, timeout=TIMEOUT):
        mm.start_import(tiny_model)
    box = mm.installed_tab.import_question
    assert box is not None and box.isVisible() and not mm.banner.isVisible()
    assert "Tiny Test" in box.text()
    texts = {b.text().replace("&", "") for b in box.buttons()}
    assert {"Copy into Ember", "Use where it is", "Cancel"} == texts
    with qtbot.waitSignal(mm.library_changed, timeout=TIMEOUT):
        qtbot.mouseClick(mm.installed_tab.import_copy, Qt.MouseButton.LeftButton)
    name = "imported/Tiny-Test-F32.gguf"  # the GGUF's own name and quantization, not "tiny-chatml"
    assert not box.isVisible() and mm.banner.text() == f"Added {name} to your models." and mm.banner.kind() == "notice"
    qtbot.waitUntil(lambda: mm.select_installed(name), timeout=TIMEOUT)
    # the same file under another name is noticed before any question, and its row is selected
    twin = tmp_path / "download (1).gguf"
    shutil.copy(tiny_model, twin)
    mm.installed.clearSelection()
    with qtbot.waitSignal(mm.import_checked, timeout=TIMEOUT):
        mm.start_import(twin)
    assert mm.installed_tab.import_question is None
    assert mm.banner.kind() == "notice" and f"already installed as {name}" in mm.banner.text()
    assert mm.installed_tab.selected_entry() is not None and mm.installed_tab.selected_entry().name == name
    # "Use where it is" keeps the file where it is
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_model.read_bytes()[:-7] + b"x" * 7)
    with qtbot.waitSignal(mm.import_checked, timeout=TIMEOUT):
        mm.start_import(other)
    with qtbot.waitSignal(mm.library_changed, timeout=TIMEOUT):
        qtbot.mouseClick(mm.installed_tab.import_in_place, Qt.MouseButton.LeftButton)
    assert any(e.name == str(other) and e.location == "in place" for e in window.library.entries())


def test_discover_offline_says_so_with_retry_and_filters_the_catalog(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = window.models.model_manager()
    mm.show()
    everything = mm.catalog_shown()
    qwen = [e.repo for e in catalog() if "qwen" in f"{e.name} {e.repo}".lower()]
    assert len(everything) == len(catalog()) and 0 < len(qwen) < len(everything)
    mm.search_box.setText("Qwen")  # typing filters the catalog at once, with or without the Hub
    assert mm.catalog_shown() == qwen
    mm.search_box.setText("")
    assert mm.catalog_shown() == everything
    online = mm.hub_factory
    monkeypatch.setattr(mm, "hub_factory", lambda: HubClient("http://127.0.0.1:9"))
    mm.search_box.setText("qwen coder")
    with qtbot.waitSignal(mm.search_done, timeout=TIMEOUT):
        mm.search()
    assert mm.banner.isVisible() and mm.banner.kind() == "error"
    assert mm.banner.text().startswith("You are offline: Ember cannot reach the Hugging Face Hub.")
    assert "(" not in mm.banner.text() and "Error" not in mm.banner.text()  # words, no exception names
    assert mm.banner.action.isVisible() and mm.banner.action.text() == "Retry"
    assert mm.catalog_shown() == [e.repo for e in catalog() if "Coder" in e.name]
    assert "1 catalog model matches" in mm.discover_status.text()
    # back online: Retry repeats the search
    monkeypatch.setattr(mm, "hub_factory", online)
    mm.search_box.setText("tiny")
    with qtbot.waitSignal(mm.search_done, timeout=TIMEOUT):
        qtbot.mouseClick(mm.banner.action, Qt.MouseButton.LeftButton)
    assert not mm.banner.isVisible()
    assert [mm.repos.item(r, 0).text() for r in range(mm.repos.rowCount())] == ["acme/tiny-GGUF"]


def test_download_button_waits_for_a_file_and_downloads_start_empty(qtbot: QtBot, window: MainWindow) -> None:
    mm = window.models.model_manager()
    mm.show()
    mm.tabs.setCurrentIndex(2)
    assert mm.no_downloads.isVisible() and "No downloads yet" in mm.no_downloads.text()
    assert not mm.downloads.isVisible()
    assert not any(b.isEnabled() for b in (mm.pause_btn, mm.resume_btn, mm.cancel_btn, mm.clear_btn))
    mm.tabs.setCurrentIndex(0)
    assert not mm.download_btn.isEnabled()
    with qtbot.waitSignal(mm.files_shown, timeout=TIMEOUT):
        mm.discover_tab.open_repo("acme/tiny-GGUF")
    assert mm.files.rowCount() == 1 and not mm.download_btn.isEnabled()
    mm.files.selectRow(0)
    assert mm.download_btn.isEnabled()
    (jid,) = mm.discover_tab.download(mm.discover_tab.repo_files, mm.discover_tab.selected_variant())
    assert window.downloads.wait_idle(30)
    mm.refresh_downloads()
    assert mm.downloads.isVisible() and not mm.no_downloads.isVisible()
    assert mm.clear_btn.isEnabled()  # a finished download can be cleared
    assert not any(b.isEnabled() for b in (mm.pause_btn, mm.resume_btn, mm.cancel_btn))  # none selected
    mm.downloads.selectRow(0)
    assert window.downloads.snapshot()[0].id == jid and window.downloads.snapshot()[0].state == DONE
    assert not any(b.isEnabled() for b in (mm.pause_btn, mm.resume_btn, mm.cancel_btn))  # done: nothing to do
    qtbot.mouseClick(mm.clear_btn, Qt.MouseButton.LeftButton)
    assert mm.no_downloads.isVisible() and not mm.clear_btn.isEnabled()


def test_installed_counts_right_and_marks_the_loaded_model(qtbot: QtBot, window: MainWindow, tiny_model: Path) -> None:
    mm = window.models.model_manager()
    mm.show()
    listed(qtbot, mm)
    n = mm.installed.rowCount()
    folder = window.library.models_dir
    assert mm.installed_tab.installed_status.text() == (f"1 model in {folder}" if n == 1 else f"{n} models in {folder}")
    with qtbot.waitSignal(mm.library_changed, timeout=TIMEOUT):
        mm.import_file(tiny_model)
    listed(qtbot, mm)
    assert mm.installed_tab.installed_status.text() == f"{n + 1} models in {folder}"
    name = "imported/Tiny-Test-F32.gguf"
    assert mm.select_installed(name)
    row = mm.installed.currentRow()
    assert mm.installed.item(row, 0).text() == name and not mm.installed.item(row, 0).font().bold()
    with qtbot.waitSignal(window.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=TIMEOUT):
        mm.installed_tab.load_selected()
    item = mm.installed.item(row, 0)
    assert item.text() == f"● {name} — loaded" and item.font().bold()
    assert [mm.installed.item(r, 0).font().bold() for r in range(mm.installed.rowCount())].count(True) == 1
    listed(qtbot, mm)  # listed again: still marked
    assert mm.select_installed(name) and mm.installed.item(mm.installed.currentRow(), 0).font().bold()


def test_catalog_about_text_is_not_cut_and_size_columns_say_what_they_measure(qtbot: QtBot, window: MainWindow) -> None:
    mm = window.models.model_manager()
    mm.resize(980, 620)
    mm.show()
    qtbot.waitExposed(mm)
    header = [mm.repos.horizontalHeaderItem(c).text() for c in range(mm.repos.columnCount())]
    assert header == ["Model", "Parameters", "Licence", "About"]
    assert [mm.files.horizontalHeaderItem(c).text() for c in range(4)][1] == "Download size"
    metrics = QFontMetrics(mm.repos.font())

    def cut() -> list[str]:
        """About texts whose wrapped lines need more height than their row has."""
        out = []
        for r in range(mm.repos.rowCount()):
            item = mm.repos.item(r, 3)
            cell = mm.repos.visualItemRect(item)
            wrapped = metrics.boundingRect(QRect(0, 0, cell.width() - 8, 10_000), Qt.TextFlag.TextWordWrap, item.text())
            if wrapped.height() > cell.height() or item.toolTip() != item.text():
                out.append(item.text())
        return out

    qtbot.waitUntil(lambda: cut() == [], timeout=5_000)  # once the table is laid out at this width
    mm.resize(700, 620)  # narrower: the rows grow
    qtbot.waitUntil(lambda: cut() == [], timeout=5_000)
