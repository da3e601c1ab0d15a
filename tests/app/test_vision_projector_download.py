"""Issue 17: a vision model installed without its projector ("vision needs the projector file") gets
it from the Model Manager's Installed tab: "Download projector" lists the model's repository on the
Hub (off the GUI thread), picks the mmproj that pairs with the model (the Hub pairing of
`engine.models.hub`) and queues it so that it lands beside the model file; the library then lists the
model as vision, without a restart. A model whose repository is unknown (an imported file), a
repository without a projector and an offline Hub are each said in plain words, nothing changed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.models.manager.dialog import ModelManager
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.models.download_queue import DONE, DownloadQueue
from ember_chat.engine.models.downloader import Downloader
from ember_chat.engine.models.hub import HubClient
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.models.projector_download import ProjectorUnavailable, projector_download
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.hub_server import FakeHub
from tests.helpers.vision_factory import write_tiny_vision_model

TIMEOUT = 60_000
VISION_COLUMN = 9
SEEING = "acme/Tiny-Vision-GGUF/tiny-vision-Q8_0.gguf"  # its repository has its projector
LONELY = "acme/Lonely-Vision-GGUF/lonely-vision-Q8_0.gguf"  # its repository has none
IMPORTED = "imported/Other-Vision-F32.gguf"  # a file the user imported: no repository known


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    """The Hub with the two repositories, and the user's models folder with the three models installed
    without any projector (the window fixture builds the window on this folder)."""
    model, mmproj = write_tiny_vision_model(tmp_path / "src")
    lonely = write_tiny_model(tmp_path / "src" / "lonely.gguf", TinySpec(name="Lonely Vision Test", seed=3))
    models = tmp_path / "data" / "models"
    for name, source in ((SEEING, model), (LONELY, lonely), (IMPORTED, lonely)):
        (models / name).parent.mkdir(parents=True, exist_ok=True)
        (models / name).write_bytes(source.read_bytes())
    h = FakeHub().start()
    h.add_repo(
        "acme/Tiny-Vision-GGUF",
        {"tiny-vision-Q8_0.gguf": model.read_bytes(), "mmproj-tiny-vision-f16.gguf": mmproj.read_bytes()},
    )
    h.add_repo("acme/Lonely-Vision-GGUF", {"lonely-vision-Q8_0.gguf": lonely.read_bytes()})
    yield h
    h.stop()


def installed_tab_on(qtbot: QtBot, window: MainWindow, name: str) -> ModelManager:
    """The Model Manager on its Installed tab, every header read, the model `name` selected."""
    mm = window.models.model_manager()
    mm.show()
    mm.tabs.setCurrentIndex(1)
    with qtbot.waitSignal(mm.headers_read, timeout=TIMEOUT):
        mm.refresh_installed()
    assert mm.select_installed(name)
    return mm


def vision_cell(mm: ModelManager, name: str) -> str:
    table = mm.installed
    row = next(r for r in range(table.rowCount()) if table.item(r, 0).data(Qt.ItemDataRole.UserRole).name == name)
    return table.item(row, VISION_COLUMN).text()


def test_download_projector_puts_it_beside_the_model_and_the_model_sees_images(
    qtbot: QtBot, window: MainWindow, hub: FakeHub, tmp_path: Path
) -> None:
    mm = installed_tab_on(qtbot, window, SEEING)
    button = mm.installed_tab.projector_btn
    assert vision_cell(mm, SEEING) == "vision needs the projector file"
    assert button.isVisible() and button.isEnabled() and button.text() == "Download projector"
    with qtbot.waitSignal(mm.installed_tab.projector_queued, timeout=TIMEOUT):
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert window.downloads.wait_idle(30)
    [job] = window.downloads.snapshot()
    assert job.state == DONE and job.spec.filename == "mmproj-tiny-vision-f16.gguf"
    beside = tmp_path / "data" / "models" / "acme" / "Tiny-Vision-GGUF" / "mmproj-tiny-vision-f16.gguf"
    assert job.path == beside
    assert hashlib.sha256(beside.read_bytes()).hexdigest() == hub.sha_of(beside.read_bytes())
    # no restart: the Installed tab and the window's model picker say it sees images now
    qtbot.waitUntil(lambda: vision_cell(mm, SEEING) == "vision (mmproj-tiny-vision-f16.gguf)", timeout=TIMEOUT)
    assert mm.banner.text() == f"{SEEING} sees images now: its projector mmproj-tiny-vision-f16.gguf is beside it."
    qtbot.waitUntil(
        lambda: dict((n, label) for label, n in window.model_bar.choices()).get(SEEING, "").endswith(" · vision"),
        timeout=TIMEOUT,
    )
    assert mm.select_installed(SEEING) and not mm.installed_tab.projector_btn.isVisible()


def test_a_model_without_a_known_repository_is_told_to_put_a_projector_beside_it(
    qtbot: QtBot, window: MainWindow, hub: FakeHub, tmp_path: Path
) -> None:
    mm = installed_tab_on(qtbot, window, IMPORTED)
    assert mm.installed_tab.projector_btn.isVisible()
    qtbot.mouseClick(mm.installed_tab.projector_btn, Qt.MouseButton.LeftButton)
    folder = tmp_path / "data" / "models" / "imported"
    assert mm.banner.isVisible() and mm.banner.text() == (
        f"Ember does not know which Hub repository {IMPORTED} came from, so it cannot download its projector. "
        f"Put the model's projector file (an mmproj-*.gguf from the same repository) in {folder}, beside "
        "the model file, and it sees images."
    )
    assert hub.logged("hub") == [] and window.downloads.snapshot() == []


def test_a_repository_without_a_projector_says_so(qtbot: QtBot, window: MainWindow, hub: FakeHub) -> None:
    mm = installed_tab_on(qtbot, window, LONELY)
    with qtbot.waitSignal(mm.installed_tab.projector_checked, timeout=TIMEOUT):
        qtbot.mouseClick(mm.installed_tab.projector_btn, Qt.MouseButton.LeftButton)
    assert mm.banner.isVisible() and mm.banner.kind() == "error"
    assert mm.banner.text() == (
        "acme/Lonely-Vision-GGUF has no projector file (mmproj) for lonely-vision-Q8_0.gguf, so this copy "
        "cannot see images. Look for the model's mmproj-*.gguf in another repository and put it beside the "
        "model file."
    )
    assert window.downloads.snapshot() == [] and vision_cell(mm, LONELY) == "vision needs the projector file"


def test_offline_the_hub_error_is_said_and_nothing_changes(
    qtbot: QtBot, window: MainWindow, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = installed_tab_on(qtbot, window, SEEING)
    monkeypatch.setattr(mm, "hub_factory", lambda: HubClient("http://127.0.0.1:9"))
    before = sorted(p.name for p in (tmp_path / "data" / "models").rglob("*"))
    with qtbot.waitSignal(mm.installed_tab.projector_checked, timeout=TIMEOUT):
        qtbot.mouseClick(mm.installed_tab.projector_btn, Qt.MouseButton.LeftButton)
    assert mm.banner.isVisible() and mm.banner.kind() == "error"
    text = mm.banner.text()
    assert text.startswith("Listing the files of acme/Tiny-Vision-GGUF: cannot reach http://127.0.0.1:9")
    assert "You seem to be offline; installed models keep working." in text
    assert window.downloads.snapshot() == [] and vision_cell(mm, SEEING) == "vision needs the projector file"
    assert sorted(p.name for p in (tmp_path / "data" / "models").rglob("*")) == before


def test_a_projector_in_another_folder_of_the_repository_still_lands_beside_the_model(tmp_path: Path) -> None:
    """A repository with its quantizations in folders and one projector at its root: the projector is
    saved in the model's folder, where the library looks for it."""
    model, mmproj = write_tiny_vision_model(tmp_path / "src")
    h = FakeHub().start()
    try:
        h.add_repo(
            "acme/Big-Vision-GGUF",
            {"Q8_0/big-vision-Q8_0.gguf": model.read_bytes(), "mmproj-F16.gguf": mmproj.read_bytes()},
        )
        lib = ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "no-hf-cache")
        installed = lib.models_dir / "acme" / "Big-Vision-GGUF" / "Q8_0" / "big-vision-Q8_0.gguf"
        installed.parent.mkdir(parents=True)
        installed.write_bytes(model.read_bytes())
        [entry] = [e for e in lib.entries() if not e.is_starter]
        assert entry.vision_needs_projector and entry.source_repo == "acme/Big-Vision-GGUF"
        spec = projector_download(entry, lib.models_dir, HubClient(h.hub_url))
        assert spec.filename == "mmproj-F16.gguf" and spec.save_as == "Q8_0/mmproj-F16.gguf"
        queue = DownloadQueue(lambda: Downloader(h.hub_url), lib.models_dir)
        queue.add(spec)
        assert queue.wait_idle(30)
        [job] = queue.snapshot()
        assert job.state == DONE and job.path == installed.parent / "mmproj-F16.gguf"
        [entry] = [e for e in lib.entries() if not e.is_starter]
        assert entry.vision and entry.mmproj == installed.parent / "mmproj-F16.gguf"
    finally:
        h.stop()


def test_downloading_from_discover_puts_the_projector_beside_a_model_kept_in_a_folder(
    qtbot: QtBot, window: MainWindow, hub: FakeHub, tmp_path: Path
) -> None:
    """Discover downloads a model with its projector: the projector at the repository's root goes into
    the model's folder, so the downloaded model sees images."""
    model, mmproj = write_tiny_vision_model(tmp_path / "src2", stem="big-vision")
    hub.add_repo(
        "acme/Big-Vision-GGUF",
        {"Q8_0/big-vision-Q8_0.gguf": model.read_bytes(), "mmproj-F16.gguf": mmproj.read_bytes()},
    )
    mm = window.models.model_manager()
    mm.show()
    with qtbot.waitSignal(mm.files_shown, timeout=TIMEOUT):
        mm.discover_tab.open_repo("acme/Big-Vision-GGUF")
    mm.files.selectRow(0)
    mm.download_selected()
    assert window.downloads.wait_idle(30)
    assert all(j.state == DONE for j in window.downloads.snapshot())
    folder = tmp_path / "data" / "models" / "acme" / "Big-Vision-GGUF" / "Q8_0"
    assert sorted(p.name for p in folder.iterdir()) == ["big-vision-Q8_0.gguf", "mmproj-F16.gguf"]
    entry = window.library.find("acme/Big-Vision-GGUF/Q8_0/big-vision-Q8_0.gguf")
    assert entry.vision and entry.mmproj == folder / "mmproj-F16.gguf"


def test_a_model_in_the_hugging_face_cache_is_told_how_to_get_its_projector(tmp_path: Path) -> None:
    model, _ = write_tiny_vision_model(tmp_path / "src")
    snapshot = tmp_path / "hf" / "models--acme--Tiny-Vision-GGUF" / "snapshots" / "0123"
    snapshot.mkdir(parents=True)
    (snapshot / "tiny-vision.gguf").write_bytes(model.read_bytes())
    lib = ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "hf")
    [entry] = [e for e in lib.entries() if not e.is_starter]
    assert entry.location == "Hugging Face cache" and entry.vision_needs_projector
    with pytest.raises(ProjectorUnavailable) as told:
        projector_download(entry, lib.models_dir, HubClient("http://127.0.0.1:9"))
    assert str(told.value) == (
        f"{entry.name} lives in the Hugging Face cache, which Ember does not change. Download its projector "
        f"(an mmproj-*.gguf file of acme/Tiny-Vision-GGUF) with `hf download`, or put one in {snapshot}, beside "
        "the model file."
    )


def test_a_projector_download_resumed_after_a_restart_still_lands_beside_the_model(tmp_path: Path) -> None:
    """The place beside the model is kept in the partial download's sidecar: a paused projector download
    found on disk at the next start resumes into the model's folder."""
    model, mmproj = write_tiny_vision_model(tmp_path / "src")
    data = mmproj.read_bytes()
    h = FakeHub().start()
    try:
        h.add_repo("acme/Big-Vision-GGUF", {"Q8_0/big-vision-Q8_0.gguf": model.read_bytes(), "mmproj-F16.gguf": data})
        lib = ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "no-hf-cache")
        installed = lib.models_dir / "acme" / "Big-Vision-GGUF" / "Q8_0" / "big-vision-Q8_0.gguf"
        installed.parent.mkdir(parents=True)
        installed.write_bytes(model.read_bytes())
        [entry] = [e for e in lib.entries() if not e.is_starter]
        spec = projector_download(entry, lib.models_dir, HubClient(h.hub_url))
        h.faults.drop_after, h.faults.drop_count = len(data) // 2, 1  # the first session ends half-way
        first = DownloadQueue(lambda: Downloader(h.hub_url, retries=0), lib.models_dir)
        first.add(spec)
        assert first.wait_idle(30)
        assert first.snapshot()[0].state != DONE and not (installed.parent / "mmproj-F16.gguf").exists()
        [sidecar] = lib.partial_downloads()
        assert sidecar.parent == installed.parent
        second = DownloadQueue(lambda: Downloader(h.hub_url), lib.models_dir)
        second.restore_partials(lib.partial_downloads())
        [job] = second.snapshot()
        assert job.spec.save_as == "Q8_0/mmproj-F16.gguf" and 0 < job.done < len(data)
        second.resume(job.id)
        assert second.wait_idle(30)
        assert second.snapshot()[0].state == DONE
        assert (installed.parent / "mmproj-F16.gguf").read_bytes() == data
        assert [e.mmproj for e in lib.entries() if not e.is_starter] == [installed.parent / "mmproj-F16.gguf"]
    finally:
        h.stop()
