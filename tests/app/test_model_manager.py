"""Models ▸ Model Manager… driven through its real window against the local Hub server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.main import build_window
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.models.download_queue import CANCELLED, DONE, PAUSED
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.secrets import TokenStore
from tests.helpers.hub_server import FakeHub
from tests.helpers.models_window import TIMEOUT, open_files, select_quant


@pytest.fixture
def hub(tiny_model: Path) -> Iterator[FakeHub]:
    h = FakeHub().start()
    h.add_repo(
        "acme/tiny-GGUF",
        {"tiny-F32.gguf": tiny_model.read_bytes(), "tiny-Q4_K_M.gguf": tiny_model.read_bytes()[:-7] + b"x" * 7},
        downloads=42,
        likes=3,
    )
    h.add_repo("acme/big-GGUF", {"big-Q8_0.gguf": os.urandom(3_000_000)}, downloads=5)
    yield h
    h.stop()


@pytest.fixture
def window(qtbot: QtBot, tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> Iterator[MainWindow]:
    monkeypatch.setenv("EMBER_HF_ENDPOINT", hub.hub_url)
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    w = build_window(paths)
    qtbot.addWidget(w)
    w.show()
    yield w
    w.close()
    assert not w.bridge.service.running
    assert w.join_background(30)  # the window's close waited for no thread; here they have all ended
    w.store.close()


def wait_job(qtbot: QtBot, w: MainWindow, state: str) -> None:
    qtbot.waitUntil(lambda: any(j.state == state for j in w.downloads.snapshot()), timeout=TIMEOUT)


def test_search_choose_download_and_chat(qtbot: QtBot, window: MainWindow) -> None:
    w = window
    mm = w.models.model_manager()
    mm.show()
    assert mm.repos.rowCount() >= 10  # the curated catalog first
    mm.search_box.setText("tiny")
    with qtbot.waitSignal(mm.search_done, timeout=TIMEOUT):
        qtbot.keyClick(mm.search_box, Qt.Key.Key_Return)
    assert mm.repos.rowCount() == 1 and mm.repos.item(0, 0).text() == "acme/tiny-GGUF"
    assert mm.repos.item(0, 1).text() == "42"
    with qtbot.waitSignal(mm.files_shown, timeout=TIMEOUT):
        mm.repos.selectRow(0)
    texts = [mm.files.item(r, 0).text() for r in range(mm.files.rowCount())]
    assert any("recommended" in t for t in texts) and {t.split()[0] for t in texts} == {"F32", "Q4_K_M"}
    assert all("fits" in mm.files.item(r, 2).text() for r in range(mm.files.rowCount()))
    select_quant(mm, "F32")
    with qtbot.waitSignal(mm.library_changed, timeout=TIMEOUT):
        qtbot.mouseClick(mm.download_btn, Qt.MouseButton.LeftButton)
    assert mm.tabs.currentIndex() == 2
    assert "done" in mm.downloads.item(0, 5).text()
    # the new model is in the chat window's picker and in the Installed tab (both listed off the GUI
    # thread, the header read after the row is shown)
    name = "acme/tiny-GGUF/tiny-F32.gguf"
    qtbot.waitUntil(lambda: w.model_picker.findData(name) >= 0, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: mm.select_installed(name), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: mm.installed.item(mm.installed.currentRow(), 1).text() == "llama", timeout=TIMEOUT)
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=TIMEOUT):
        mm.installed_tab.load_selected()
    w.side.params.max_tokens.setValue(4)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=TIMEOUT):
        w.controller.send("hello")
    assert w.store.thread(w.controller.conversation_id)[-1].role == "assistant"


def test_mismatched_download_is_rejected_in_the_window(qtbot: QtBot, window: MainWindow, hub: FakeHub) -> None:
    mm = window.models.model_manager()
    open_files(qtbot, mm, "acme/tiny-GGUF")
    hub.faults.corrupt = True
    select_quant(mm, "Q4_K_M")
    mm.download_selected()
    wait_job(qtbot, window, "failed")
    mm.refresh_downloads()
    assert "failed verification" in mm.downloads.item(0, 5).text()
    assert window.model_picker.findData("acme/tiny-GGUF/tiny-Q4_K_M.gguf") < 0


@pytest.mark.slow
def test_pause_resume_cancel(qtbot: QtBot, window: MainWindow, hub: FakeHub) -> None:
    mm = window.models.model_manager()
    open_files(qtbot, mm, "acme/big-GGUF")
    hub.faults.stall_s, hub.faults.stall_after = 1.0, 1_000_000
    select_quant(mm, "Q8_0")
    mm.download_selected()
    qtbot.waitUntil(lambda: any(j.done > 0 for j in window.downloads.snapshot()), timeout=TIMEOUT)
    mm.downloads.selectRow(0)
    mm._act(window.downloads.pause)
    wait_job(qtbot, window, PAUSED)
    assert window.downloads.wait_idle(30)
    mm.refresh_downloads()
    assert "paused" in mm.downloads.item(0, 5).text()
    mm.downloads.selectRow(0)
    with qtbot.waitSignal(mm.library_changed, timeout=TIMEOUT):
        mm._act(window.downloads.resume)
    assert window.downloads.snapshot()[0].state == DONE
    # cancel: a fresh download of the same file after deleting it
    qtbot.waitUntil(lambda: mm.select_installed("acme/big-GGUF/big-Q8_0.gguf"), timeout=TIMEOUT)
    with qtbot.waitSignal(mm.library_changed, timeout=TIMEOUT):  # deleted off the GUI thread
        mm.installed_tab.delete_selected(confirmed=True)
    assert not (window.library.models_dir / "acme/big-GGUF/big-Q8_0.gguf").exists()
    mm.queue.clear_finished()
    hub.faults.stall_s, hub.faults.stall_after = 1.0, 1_000_000
    mm.download_selected()
    qtbot.waitUntil(lambda: any(j.state == "downloading" for j in window.downloads.snapshot()), timeout=TIMEOUT)
    mm.refresh_downloads()
    mm.downloads.selectRow(0)
    mm._act(window.downloads.cancel)
    assert window.downloads.wait_idle(30)
    assert window.downloads.snapshot()[0].state == CANCELLED
    assert not list(window.library.models_dir.rglob("big-Q8_0.gguf*"))


def test_import_token_and_offline(
    qtbot: QtBot, window: MainWindow, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = window.models.model_manager()
    with qtbot.waitSignal(mm.library_changed, timeout=TIMEOUT):
        mm.import_file(tiny_model)
    qtbot.waitUntil(lambda: mm.select_installed("imported/Tiny-Test-F32.gguf"), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: window.model_picker.findData("imported/Tiny-Test-F32.gguf") >= 0, timeout=TIMEOUT)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"\0" * 100)
    with qtbot.waitSignal(mm.tasks.settled, timeout=TIMEOUT):
        mm.import_file(bad)
    assert "not a GGUF" in mm.banner.text() and mm.banner.kind() == "error"
    with qtbot.waitSignal(mm.token_saved, timeout=TIMEOUT):  # the keychain: off the GUI thread
        mm.set_token("hf_secret")
    assert TokenStore().get() == "hf_secret"
    with qtbot.waitSignal(mm.token_saved, timeout=TIMEOUT):
        mm.set_token("")
    assert TokenStore().get() is None
    monkeypatch.setattr(
        mm,
        "hub_factory",
        lambda: __import__("ember_chat.engine.models.hub", fromlist=["HubClient"]).HubClient("http://127.0.0.1:9"),
    )
    mm.search_box.setText("anything")
    with qtbot.waitSignal(mm.search_done, timeout=TIMEOUT):
        mm.search()
    assert "offline" in mm.banner.text()
    with qtbot.waitSignal(mm.installed_listed, timeout=TIMEOUT):
        mm.refresh_installed()  # the Installed tab keeps working offline
    assert mm.installed.rowCount() >= 2


@pytest.mark.slow
def test_unfinished_download_comes_back_after_restart(
    qtbot: QtBot, tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_HF_ENDPOINT", hub.hub_url)
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    w = build_window(paths)
    qtbot.addWidget(w)
    mm = w.models.model_manager()
    open_files(qtbot, mm, "acme/big-GGUF")
    hub.faults.stall_s, hub.faults.stall_after = 1.0, 1_000_000
    select_quant(mm, "Q8_0")
    mm.download_selected()
    qtbot.waitUntil(lambda: any(j.done > 0 for j in w.downloads.snapshot()), timeout=TIMEOUT)
    w.close()  # quitting pauses the download and keeps the partial file
    assert w.join_background(30)  # (the window did not wait for the download thread to see the pause)
    w.store.close()
    sent = hub.bytes_sent
    w2 = build_window(paths)
    qtbot.addWidget(w2)
    (job,) = w2.downloads.snapshot()
    assert job.state == PAUSED and job.done > 0
    w2.downloads.resume(job.id)
    assert w2.downloads.wait_idle(60)
    assert w2.downloads.snapshot()[0].state == DONE
    assert hub.bytes_sent - sent == 3_000_000 - job.done  # only the missing bytes
    w2.close()
    w2.store.close()
