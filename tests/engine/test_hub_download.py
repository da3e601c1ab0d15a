"""The Hub client and the downloader against a local server that speaks the Hub protocol, with
fault injection: drops, resets, stalls, 500s, 404s, gated repos, wrong bytes, a full disk."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.errors import DiskFullError, DownloadStopped, IntegrityError, UnsafeFilename
from ember_chat.engine.models.download_paths import part_paths, safe_target
from ember_chat.engine.models.downloader import DownloadControl, Downloader, DownloadSpec
from ember_chat.engine.models.hub import (
    HubAuthError,
    HubClient,
    HubFile,
    HubNotFound,
    HubOffline,
    group_variants,
    quantization_of,
)
from tests.helpers.hub_server import FakeHub
from tests.helpers.paths import REPO

ROOT = REPO
PAYLOAD = os.urandom(3 * 1024 * 1024 + 12345)  # ~3 MB "model"


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    h = FakeHub().start()
    h.add_repo(
        "acme/tiny-GGUF",
        {
            "tiny-Q4_K_M.gguf": PAYLOAD,
            "tiny-Q8_0.gguf": PAYLOAD[:100_000],
            "big-Q2_K-00001-of-00002.gguf": b"a" * 1000,
            "big-Q2_K-00002-of-00002.gguf": b"b" * 1000,
            "README.md": b"# tiny",
        },
        downloads=500,
        likes=7,
    )
    h.add_repo("acme/other-GGUF", {"other-F16.gguf": b"x" * 10}, downloads=10)
    h.add_repo("acme/gated-GGUF", {"g-Q4_0.gguf": b"secret" * 100}, gated=True)
    yield h
    h.stop()


def downloader(hub: FakeHub, **kw: object) -> Downloader:
    kw.setdefault("backoff_s", 0.01)
    return Downloader(hub.hub_url, **kw)  # type: ignore[arg-type]


SPEC = DownloadSpec("acme/tiny-GGUF", "tiny-Q4_K_M.gguf")


# ----- names


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("llama-3.2-1b-instruct-q8_0.gguf", "Q8_0"),
        ("model.IQ2_XS.gguf", "IQ2_XS"),
        ("gemma-3-270m-it-F16.gguf", "F16"),
        ("sub/dir/x-BF16-00001-of-00003.gguf", "BF16"),
        ("mystery.gguf", "unknown"),
    ],
)
def test_quantization_from_file_name(name: str, quant: str) -> None:
    assert quantization_of(name) == quant


def test_split_sets_count_as_one_model() -> None:
    files = [
        HubFile("m-Q4_K_M-00001-of-00002.gguf", 10, None),
        HubFile("m-Q4_K_M-00002-of-00002.gguf", 5, None),
        HubFile("m-Q8_0-00001-of-00002.gguf", 10, None),  # incomplete set: dropped
        HubFile("single-Q6_K.gguf", 7, None),
        HubFile("notes.txt", 1, None),
    ]
    variants = group_variants(files)
    assert [(v.name, v.quantization, v.size, len(v.files)) for v in variants] == [
        ("single-Q6_K.gguf", "Q6_K", 7, 1),
        ("m-Q4_K_M.gguf", "Q4_K_M", 15, 2),
    ]


@pytest.mark.parametrize(
    "bad",
    ["../evil.gguf", "a/../../evil.gguf", "/etc/passwd", "..", "a\\..\\b.gguf", "C:evil.gguf", "", "a//b.gguf"],
)
def test_path_traversal_names_are_rejected(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UnsafeFilename):
        safe_target(tmp_path, "acme/repo", bad)


def test_bad_repo_ids_are_rejected(tmp_path: Path) -> None:
    for repo in ("../x", "acme", "acme/../x", "a/b/c"):
        with pytest.raises(UnsafeFilename):
            safe_target(tmp_path, repo, "m.gguf")
    assert safe_target(tmp_path, "acme/repo", "sub/m.gguf") == (tmp_path / "acme/repo/sub/m.gguf").resolve()


# ----- the real huggingface_hub client against the local Hub


def test_search_sorted_by_downloads(hub: FakeHub) -> None:
    found = HubClient(hub.hub_url).search("GGUF")
    assert [r.id for r in found][:2] == ["acme/tiny-GGUF", "acme/other-GGUF"]
    assert found[0].downloads == 500 and found[0].likes == 7 and found[0].last_modified is not None


def test_files_grouped_with_sha256(hub: FakeHub) -> None:
    files = HubClient(hub.hub_url).files("acme/tiny-GGUF")
    by_quant = {v.quantization: v for v in files.variants}
    assert set(by_quant) == {"Q4_K_M", "Q8_0", "Q2_K"}
    assert by_quant["Q4_K_M"].files[0].sha256 == hashlib.sha256(PAYLOAD).hexdigest()
    assert len(by_quant["Q2_K"].files) == 2 and by_quant["Q2_K"].size == 2000
    assert files.commit


def test_hub_errors_are_typed(hub: FakeHub) -> None:
    client = HubClient(hub.hub_url)
    with pytest.raises(HubNotFound):
        client.files("acme/nope")
    with pytest.raises(HubAuthError, match="gated"):
        client.files("acme/gated-GGUF")
    assert HubClient(hub.hub_url, token=hub.token).files("acme/gated-GGUF").variants
    with pytest.raises(HubOffline, match="offline"):
        HubClient("http://127.0.0.1:9").search("x")


# ----- downloads


def test_download_verifies_and_installs(hub: FakeHub, tmp_path: Path) -> None:
    seen = []
    path = downloader(hub).fetch(SPEC, tmp_path, on_progress=seen.append)
    assert path == (tmp_path / "acme/tiny-GGUF/tiny-Q4_K_M.gguf").resolve()
    assert path.read_bytes() == PAYLOAD
    assert seen and seen[-1].done == len(PAYLOAD) and seen[-1].total == len(PAYLOAD)
    part, sidecar = part_paths(path)
    assert not part.exists() and not sidecar.exists()


def test_token_goes_to_hub_only_never_to_cdn(hub: FakeHub, tmp_path: Path) -> None:
    spec = DownloadSpec("acme/gated-GGUF", "g-Q4_0.gguf")
    with pytest.raises(HubAuthError):
        downloader(hub).fetch(spec, tmp_path)
    downloader(hub, token=hub.token).fetch(spec, tmp_path)
    hub_reqs = [r for r in hub.logged("hub") if "/resolve/" in r.path]
    cdn_reqs = hub.logged("cdn")
    assert any(r.headers.get("Authorization") == f"Bearer {hub.token}" for r in hub_reqs)
    assert cdn_reqs and all("Authorization" not in r.headers for r in cdn_reqs)


@pytest.mark.parametrize("fault", ["drop", "reset"])
def test_resume_after_connection_fault_transfers_only_missing_bytes(hub: FakeHub, tmp_path: Path, fault: str) -> None:
    half = len(PAYLOAD) // 2
    if fault == "drop":
        hub.faults.drop_after, hub.faults.drop_count = half, 1
    else:
        hub.faults.reset_after, hub.faults.reset_count = half, 1
    path = downloader(hub).fetch(SPEC, tmp_path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(PAYLOAD).hexdigest()
    ranges = [r.headers.get("Range") for r in hub.logged("cdn")]
    assert ranges[0] == "bytes=0-" and len(ranges) == 2
    if fault == "reset":
        return  # a TCP reset discards whatever was still unread in the socket: resume point varies
    resumed_at = int(ranges[1].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= half
    # bytes the server actually pushed: at most one socket buffer more than the file
    assert hub.bytes_sent - len(PAYLOAD) <= half - resumed_at + 256 * 1024


def test_stall_times_out_and_resumes(hub: FakeHub, tmp_path: Path) -> None:
    hub.faults.stall_s, hub.faults.stall_after = 1.0, len(PAYLOAD) // 3
    path = downloader(hub, timeout=0.3).fetch(SPEC, tmp_path)
    assert path.read_bytes() == PAYLOAD
    assert len(hub.logged("cdn")) >= 2


def test_server_errors_are_retried(hub: FakeHub, tmp_path: Path) -> None:
    hub.faults.status_500 = 2
    assert downloader(hub).fetch(SPEC, tmp_path).read_bytes() == PAYLOAD
    assert len(hub.logged("cdn")) == 3


def test_not_found_is_permanent(hub: FakeHub, tmp_path: Path) -> None:
    with pytest.raises(HubNotFound):
        downloader(hub).fetch(DownloadSpec("acme/tiny-GGUF", "missing.gguf"), tmp_path)
    with pytest.raises(HubNotFound):
        downloader(hub).fetch(DownloadSpec("acme/nope", "x.gguf"), tmp_path)
    assert len([r for r in hub.logged("hub") if "missing.gguf" in r.path]) == 1  # not retried


def test_sha256_mismatch_is_rejected_and_discarded(hub: FakeHub, tmp_path: Path) -> None:
    hub.faults.corrupt = True
    with pytest.raises(IntegrityError, match="failed verification"):
        downloader(hub).fetch(SPEC, tmp_path)
    target = safe_target(tmp_path, SPEC.repo_id, SPEC.filename)
    assert not target.exists() and not part_paths(target)[0].exists()


def test_server_ignoring_range_starts_over_cleanly(hub: FakeHub, tmp_path: Path) -> None:
    hub.faults.drop_after, hub.faults.drop_count = len(PAYLOAD) // 2, 1
    hub.faults.ignore_range = True
    assert downloader(hub).fetch(SPEC, tmp_path).read_bytes() == PAYLOAD


def test_cancel_leaves_no_installed_file(hub: FakeHub, tmp_path: Path) -> None:
    control = DownloadControl()

    def on_progress(p: object) -> None:
        control.cancel.set()

    with pytest.raises(DownloadStopped) as info:
        downloader(hub, chunk=64 * 1024).fetch(SPEC, tmp_path, on_progress=on_progress, control=control)
    assert info.value.cancelled
    target = safe_target(tmp_path, SPEC.repo_id, SPEC.filename)
    assert not target.exists()


def test_pause_keeps_partial_then_resume(hub: FakeHub, tmp_path: Path) -> None:
    control = DownloadControl()
    with pytest.raises(DownloadStopped):
        downloader(hub, chunk=64 * 1024).fetch(
            SPEC, tmp_path, on_progress=lambda p: control.pause.set(), control=control
        )
    target = safe_target(tmp_path, SPEC.repo_id, SPEC.filename)
    part, sidecar = part_paths(target)
    assert part.exists() and 0 < part.stat().st_size < len(PAYLOAD) and not target.exists()
    assert json.loads(sidecar.read_text())["sha256"] == hashlib.sha256(PAYLOAD).hexdigest()
    assert downloader(hub).fetch(SPEC, tmp_path).read_bytes() == PAYLOAD


def test_not_enough_disk_space_is_checked_first(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    with pytest.raises(DiskFullError, match="Not enough disk space"):
        downloader(hub).fetch(SPEC, tmp_path)
    assert hub.logged("cdn") == []


def test_disk_full_mid_download_keeps_the_partial(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills up half-way: the partial file stays, and the download resumes later."""
    real_open = Path.open
    budget = {"left": len(PAYLOAD) // 2}

    class FillingFile:
        def __init__(self, fh: object) -> None:
            self._fh = fh

        def write(self, data: bytes) -> int:
            if len(data) > budget["left"]:
                raise OSError(errno.ENOSPC, "No space left on device")
            budget["left"] -= len(data)
            return self._fh.write(data)  # type: ignore[attr-defined]

        def __getattr__(self, name: str) -> object:
            return getattr(self._fh, name)

        def __enter__(self) -> FillingFile:
            return self

        def __exit__(self, *exc: object) -> None:
            self._fh.close()  # type: ignore[attr-defined]

    def open_(self: Path, mode: str = "r", *args: object, **kwargs: object) -> object:
        fh = real_open(self, mode, *args, **kwargs)
        return FillingFile(fh) if self.name.endswith(".part") and mode in ("ab", "wb") else fh

    monkeypatch.setattr(Path, "open", open_)
    with pytest.raises(DiskFullError, match="partial file is kept"):
        downloader(hub).fetch(SPEC, tmp_path)
    monkeypatch.undo()
    part = part_paths(safe_target(tmp_path, SPEC.repo_id, SPEC.filename))[0]
    assert 0 < part.stat().st_size <= len(PAYLOAD) // 2
    assert downloader(hub).fetch(SPEC, tmp_path).read_bytes() == PAYLOAD


KILLED_DOWNLOAD = """
import sys
from pathlib import Path
from ember_chat.engine.models.downloader import Downloader, DownloadSpec
def progress(p):
    if p.done > int(sys.argv[3]):
        print(p.done, flush=True)
        sys.stdin.readline()  # wait to be killed
spec = DownloadSpec("acme/tiny-GGUF", "tiny-Q4_K_M.gguf")
Downloader(sys.argv[1], chunk=64 * 1024).fetch(spec, Path(sys.argv[2]), on_progress=progress)
"""


def test_resume_after_process_restart_transfers_only_missing_bytes(hub: FakeHub, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_DOWNLOAD, hub.hub_url, str(tmp_path), str(len(PAYLOAD) // 2)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        done = int(proc.stdout.readline())
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    part = part_paths(safe_target(tmp_path, SPEC.repo_id, SPEC.filename))[0]
    have = part.stat().st_size
    assert have >= done
    hub.bytes_sent = 0
    assert downloader(hub).fetch(SPEC, tmp_path).read_bytes() == PAYLOAD
    assert hub.bytes_sent == len(PAYLOAD) - have  # exactly the missing bytes
