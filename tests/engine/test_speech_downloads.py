"""Downloading a Whisper model from the Hub through the Model Manager's downloader, offline: the local
Hub server serves the shipped tiny.en's files as Systran/faster-whisper-base.en. The files land in a
folder of their own with their sha256 checked; an interrupted download resumes with a Range request
and is never offered meanwhile; wrong bytes are refused; a full disk is said before a byte moves; then
`ember-chat transcribe --model base.en` and the API's model field transcribe espeak-ng speech with it;
delete removes the folder. The speed on this machine is stored by the first long enough use."""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from ember_chat.engine.errors import DiskFullError, HubOffline, IntegrityError
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.models.downloader import Downloader
from ember_chat.engine.models.hub import HubClient
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.speech import downloads, models
from ember_chat.engine.speech.downloads import DONE, SpeechDownloads, hub_model
from ember_chat.engine.speech.models import MANIFEST, SpeechModelError, locate
from ember_chat.engine.speech.wer import word_error_rate
from tests.helpers.cli import cli
from tests.helpers.hub_server import FakeHub
from tests.helpers.speech import SENTENCES, speak
from tests.helpers.speech_hub import BASE_EN_REPO, whisper_files

pytestmark = pytest.mark.slow

TEXT = " ".join(SENTENCES[:3])
WER_BOUND = 0.15  # the shipped model's bound (tests/engine/test_speech.py): these are its bytes
BASE_EN = hub_model("base.en")


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    return whisper_files()


@pytest.fixture
def hub(files: dict[str, bytes]) -> Iterator[FakeHub]:
    h = FakeHub().start()
    h.add_repo(BASE_EN_REPO, files, downloads=1000)
    h.add_repo("Systran/faster-whisper-small", {"README.md": b"# no model here"})
    yield h
    h.stop()


def downloader(hub: FakeHub, **kw: float) -> Downloader:
    return Downloader(hub.hub_url, backoff_s=0.01, **kw)  # type: ignore[arg-type]


def test_download_resume_verify_use_and_delete(
    hub: FakeHub, files: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models_dir = tmp_path / "data" / "models"
    folder = models.model_folder(models_dir, BASE_EN)
    size = len(files["model.bin"])
    # interrupted: the connection drops 30 MB into model.bin and this downloader does not retry
    hub.faults.drop_after, hub.faults.drop_count = 30_000_000, 1
    with pytest.raises(HubOffline, match="partial file is kept"):
        downloads.download(BASE_EN, models_dir, HubClient(hub.hub_url), downloader(hub, retries=0))
    assert (folder / "model.bin.part").stat().st_size == 30_000_000 and not (folder / MANIFEST).exists()
    with pytest.raises(SpeechModelError, match=r"base\.en .* is not downloaded\. Download it in Models"):
        locate("base.en", models_dir)  # (a model cut short is never offered)
    sent_before = hub.bytes_sent
    seen: list[tuple[int, int]] = []
    path = downloads.download(BASE_EN, models_dir, HubClient(hub.hub_url), downloader(hub),
                              lambda done, total: seen.append((done, total)))  # fmt: skip
    assert path == folder and locate("base.en", models_dir) == folder
    ranges = [r.headers.get("Range") for r in hub.logged("cdn")]
    assert ranges[-1] == "bytes=30000000-"  # resumed, not started over
    assert hub.bytes_sent - sent_before == size - 30_000_000
    wanted = {"config.json", "model.bin", "tokenizer.json", "vocabulary.txt", "preprocessor_config.json"}
    assert {p.name for p in folder.iterdir()} == wanted | {MANIFEST}  # (README.md not fetched)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["files"]["model.bin"]["sha256"] == hub.sha_of(files["model.bin"])
    assert (folder / "model.bin").read_bytes() == files["model.bin"]
    total = sum(len(files[n]) for n in wanted)
    assert seen[-1] == (total, total) and all(a <= b for (a, _), (b, _) in itertools.pairwise(seen))

    # the transcribe command and the API's model field find it in the settings' models folder
    wav = speak(TEXT, tmp_path / "speech.wav")
    done = cli("transcribe", str(wav), "--model", "base.en", "--json", data_dir=tmp_path / "data")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["model"] == "base.en" and word_error_rate(TEXT, body["text"]) <= WER_BOUND, body
    speed = downloads.read_speeds(models_dir)["base.en"]  # (the first use of over 5 s measured it)
    assert speed.real_time_factor == pytest.approx(body["real_time_factor"], abs=1e-3) and speed.audio_s > 5
    monkeypatch.setenv("EMBER_DATA_DIR", str(tmp_path / "data"))
    service = EngineService()
    server = ApiServer(service, ServerConfig(port=0))
    server.start()
    try:
        url = server.url.removesuffix("/v1") + "/v1/audio/transcriptions"
        answer = httpx2.post(url, files={"file": ("s.wav", wav.read_bytes())}, data={"model": "base.en"}, timeout=120)
    finally:
        server.stop()
        service.close()
    assert answer.status_code == 200, answer.text
    assert word_error_rate(TEXT, answer.json()["text"]) <= WER_BOUND

    downloads.delete(models_dir, BASE_EN)
    assert not folder.exists() and "base.en" not in downloads.read_speeds(models_dir)
    with pytest.raises(SpeechModelError, match="is not downloaded"):
        locate("base.en", models_dir)


def test_wrong_bytes_a_full_disk_and_a_repo_without_a_model(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models_dir = tmp_path / "models"
    folder = models.model_folder(models_dir, BASE_EN)
    hub.faults.corrupt = True
    with pytest.raises(IntegrityError, match=r"model\.bin failed verification: its sha256 is"):
        downloads.download(BASE_EN, models_dir, HubClient(hub.hub_url), downloader(hub))
    assert not (folder / "model.bin").exists() and not (folder / "model.bin.part").exists()
    assert not (folder / MANIFEST).exists()
    with pytest.raises(SpeechModelError, match="is not downloaded"):
        locate("base.en", models_dir)
    hub.faults.corrupt = False

    real = shutil.disk_usage
    monkeypatch.setattr(downloads.shutil, "disk_usage", lambda p: real(p)._replace(free=10_000_000))
    requests = len(hub.logged("cdn"))
    with pytest.raises(DiskFullError, match=r"for base\.en: it needs 0\.08 GB more, 0\.01 GB are free"):
        downloads.download(BASE_EN, models_dir, HubClient(hub.hub_url), downloader(hub))
    assert len(hub.logged("cdn")) == requests  # said before a byte moved
    monkeypatch.undo()

    with pytest.raises(SpeechModelError, match=r"faster-whisper-small is not a CTranslate2 Whisper model: it has no "
                                               r"model\.bin, config\.json"):  # fmt: skip
        downloads.download(hub_model("small"), models_dir, HubClient(hub.hub_url), downloader(hub))
    with pytest.raises(SpeechModelError, match=r"'tiny\.en' is not a speech model Ember downloads"):
        hub_model("tiny.en")


def test_downloads_on_threads_cancel_and_finish(hub: FakeHub, tmp_path: Path) -> None:
    models_dir = tmp_path / "models"
    folder = models.model_folder(models_dir, BASE_EN)
    jobs = SpeechDownloads(models_dir, lambda: HubClient(hub.hub_url), lambda: downloader(hub))
    hub.faults.rate_bps = 20_000_000  # (slow enough to cancel mid-way)
    jobs.start("base.en")
    deadline = time.monotonic() + 30
    while jobs.snapshot()["base.en"].done < 5_000_000:
        assert time.monotonic() < deadline, jobs.snapshot()
        time.sleep(0.02)
    jobs.cancel("base.en")
    assert jobs.wait_idle(30)
    assert jobs.snapshot()["base.en"].state == "cancelled" and not folder.exists()
    hub.faults.rate_bps = 0
    jobs.start("base.en")
    assert jobs.wait_idle(60)
    job = jobs.snapshot()["base.en"]
    assert job.state == DONE and job.fraction == 1.0, job
    assert models.downloaded_folder(BASE_EN, models_dir) == folder


def test_speeds_are_stored_once_and_bad_entries_skipped(tmp_path: Path) -> None:
    assert not downloads.record_speed(tmp_path, "base.en", 0.05, 3.0, 2)  # too short to say
    assert downloads.record_speed(tmp_path, "base.en", 0.05, 10.0, 2)
    assert not downloads.record_speed(tmp_path, "base.en", 0.5, 10.0, 2)  # (the first measurement stays)
    speeds_file = tmp_path / "speech" / downloads.SPEEDS_FILE
    data = json.loads(speeds_file.read_text())
    data["small"] = {"rtf": "fast"}
    speeds_file.write_text(json.dumps(data))
    speeds = downloads.read_speeds(tmp_path)
    assert list(speeds) == ["base.en"] and speeds["base.en"].real_time_factor == 0.05
    speeds_file.write_text("{" * 100)
    assert downloads.read_speeds(tmp_path) == {}
