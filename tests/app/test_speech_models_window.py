"""Models ▸ Model Manager ▸ Speech in the real window against the local Hub server (the shipped
tiny.en's files served as Systran/faster-whisper-base.en): the shipped model installed, the Hub ones
with size and languages; Download (with a dropped connection resumed by the downloader), Cancel
mid-way (nothing left), wrong bytes refused (the row says so, the model not offered), the speed
measured by the model's first use, Delete."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.models.manager.speech import NAME, SIZE, SPEED, STATE, SpeechTab
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.speech import Transcriber, downloads
from ember_chat.engine.speech.models import KNOWN_MODELS, known, model_folder
from tests.helpers.hub_server import FakeHub
from tests.helpers.models_window import TIMEOUT
from tests.helpers.speech import SENTENCES, speak
from tests.helpers.speech_hub import add_whisper_repo

pytestmark = pytest.mark.slow


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    h = FakeHub().start()
    add_whisper_repo(h)
    yield h
    h.stop()


# (the window: conftest's, a new user's with this module's `hub` as its Hub)


def row(tab: SpeechTab, name: str) -> int:
    return next(r for r, m in enumerate(KNOWN_MODELS) if m.name == name)


def state(tab: SpeechTab, name: str) -> str:
    item = tab.table.item(row(tab, name), STATE)
    return item.toolTip() or item.text() if item is not None else ""


def click(qtbot: QtBot, button: object) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_download_cancel_refuse_measure_and_delete(qtbot: QtBot, window: MainWindow, hub: FakeHub) -> None:
    mm = window.models.model_manager()
    mm.show()
    tab = mm.speech_tab
    mm.tabs.setCurrentWidget(tab)
    qtbot.waitUntil(lambda: state(tab, "tiny.en") == "Installed (starter set)", timeout=TIMEOUT)
    assert state(tab, "base.en") == "Not downloaded" and state(tab, "large-v3-turbo") == "Not downloaded"
    texts = {tab.table.item(r, NAME).text(): tab.table.item(r, SIZE).text() for r in range(tab.table.rowCount())}
    assert texts["small"] == "484 MB" and texts["large-v3-turbo"] == "1,620 MB"
    assert tab.table.item(row(tab, "base"), 2).text() == "99 languages"
    assert tab.table.item(row(tab, "base.en"), 2).text() == "English"
    assert tab.table.item(row(tab, "tiny.en"), SPEED).text() == "not measured yet"
    tab.select("tiny.en")
    assert not tab.download_btn.isEnabled() and not tab.delete_btn.isEnabled()  # (shipped: nothing to do)
    folder = model_folder(window.ctx.library.models_dir, known("base.en"))  # type: ignore[arg-type]

    # Cancel mid-way: the row's bar goes, nothing is left on disk
    hub.faults.rate_bps = 20_000_000
    tab.select("base.en")
    click(qtbot, tab.download_btn)
    qtbot.waitUntil(lambda: tab.table.cellWidget(row(tab, "base.en"), STATE) is not None, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: tab.jobs.snapshot()["base.en"].done > 3_000_000, timeout=TIMEOUT)
    assert tab.cancel_btn.isEnabled() and not tab.download_btn.isEnabled()
    click(qtbot, tab.cancel_btn)
    qtbot.waitUntil(lambda: "cancelled" in tab.status.text(), timeout=TIMEOUT)
    assert state(tab, "base.en") == "Not downloaded" and not folder.exists()

    # wrong bytes: refused, said in the row, never offered
    hub.faults.rate_bps, hub.faults.corrupt = 0, True
    click(qtbot, tab.download_btn)
    qtbot.waitUntil(lambda: state(tab, "base.en").startswith("Failed: model.bin failed verification"), timeout=TIMEOUT)
    assert "could not be downloaded" in tab.status.text() and tab.download_btn.isEnabled()

    # a connection dropped 20 MB in: the downloader resumes it (a Range request), the model arrives
    hub.faults.corrupt = False
    hub.faults.drop_after, hub.faults.drop_count = 20_000_000, 1
    click(qtbot, tab.download_btn)
    qtbot.waitUntil(lambda: "is downloaded" in tab.status.text(), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: state(tab, "base.en") == "Downloaded", timeout=TIMEOUT)  # (the disk read again)
    assert "bytes=20000000-" in [r.headers.get("Range") for r in hub.logged("cdn")]
    assert state(tab, "base.en") == "Downloaded" and tab.delete_btn.isEnabled() and not tab.download_btn.isEnabled()
    assert tab.table.item(row(tab, "base.en"), SPEED).text() == "not measured yet"

    # its first use measures its speed on this machine
    wav = speak(" ".join(SENTENCES[:3]), window.ctx.library.models_dir.parent / "speech.wav")
    transcript = Transcriber("base.en", models_dir=window.ctx.library.models_dir).transcribe(wav)
    with qtbot.waitSignal(tab.disk_read, timeout=TIMEOUT):
        tab.refresh()
    speed = tab.table.item(row(tab, "base.en"), SPEED).text()
    assert speed.startswith(f"RTF {transcript.real_time_factor:.2f} measured 20"), speed

    with qtbot.waitSignal(tab.disk_read, timeout=TIMEOUT):
        tab.delete_selected(confirmed=True)
    assert state(tab, "base.en") == "Not downloaded" and not folder.exists()
    assert "base.en" not in downloads.read_speeds(window.ctx.library.models_dir)
