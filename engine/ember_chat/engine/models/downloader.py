"""The byte transfer of model files: resumable, verified, cancellable, and careful with the token.

- HTTP Range into `<file>.part`, with a sidecar `<file>.part.json` recording repo, revision, commit,
  expected size and sha256, so a download resumes across dropped connections and app restarts and
  transfers only the missing bytes.
- Free disk space is checked first; a full disk mid-way keeps the partial file for later.
- Transient faults (connection reset, timeout, 5xx, 429) retry with backoff and resume; permanent ones
  (401/403, 404) stop with a clear message.
- On completion the sha256 is verified against the Hub's LFS metadata, then the file is moved into
  place atomically. A mismatch discards it and says so. A `.part` file is never a model.
- The token goes only to the Hub's own origin, never to a redirect target (the CDN), and proxies from
  the environment are honoured: `hub_http` holds the HTTP conversation and its errors.
- File names from the Hub cannot escape the models folder (`download_paths`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote, urljoin, urlsplit

from ember_chat.engine.core.network_words import network_failure
from ember_chat.engine.errors import DiskFullError, DownloadError, DownloadStopped, HubOffline, IntegrityError
from ember_chat.engine.models.download_paths import part_paths, safe_target
from ember_chat.engine.models.hub_http import (
    REDIRECTS,
    Transient,
    hub_http_client,
    raise_for_status,
    send_following_redirects,
)

if TYPE_CHECKING:  # the HTTP stack is imported by the first transfer, not when the window starts
    import httpx2

CHUNK = 1 << 20
DISK_MARGIN = 64 << 20
T = TypeVar("T")


@dataclass(frozen=True)
class DownloadSpec:
    repo_id: str
    filename: str  # path inside the repo
    revision: str = "main"
    size: int | None = None
    sha256: str | None = None
    save_as: str | None = None  # where it goes in the repo's folder, if not at `filename` (a projector
    # saved beside its model when the repository keeps it in another folder)

    @property
    def local_name(self) -> str:
        """The file's path under the models folder's owner/name/ folder."""
        return self.save_as or self.filename


@dataclass
class DownloadControl:
    pause: threading.Event = field(default_factory=threading.Event)
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    speed_bps: float
    eta_s: float | None
    resumed_from: int = 0


@dataclass(frozen=True)
class Resolved:
    url: str  # where the bytes are (the CDN for LFS files)
    commit: str
    size: int
    sha256: str | None


class Downloader:
    def __init__(
        self,
        endpoint: str,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 8,
        backoff_s: float = 1.0,
        chunk: int = CHUNK,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.token = token or None
        self.timeout = timeout
        self.retries = retries
        self.backoff_s = backoff_s
        self.chunk = chunk
        origin = urlsplit(self.endpoint)
        self._hub_origin = (origin.scheme, origin.hostname, origin.port)

    # ----- HTTP
    def _headers(self, url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        u = urlsplit(url)
        if self.token and (u.scheme, u.hostname, u.port) == self._hub_origin:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _request(
        self, client: httpx2.Client, method: str, url: str, extra: dict[str, str] | None = None
    ) -> httpx2.Response:
        """A streamed response, the token decided again for each origin. The caller closes it."""
        return send_following_redirects(client, method, url, lambda u: self._headers(u, extra))

    def resolve_url(self, spec: DownloadSpec) -> str:
        return f"{self.endpoint}/{spec.repo_id}/resolve/{quote(spec.revision, safe='')}/{quote(spec.filename)}"

    def resolve(self, spec: DownloadSpec) -> Resolved:
        """HEAD on the resolve URL: commit, size and sha256 from the Hub, and where the bytes are."""
        with hub_http_client(self.timeout) as client:
            return self._resolve(client, spec)

    def _resolve(self, client: httpx2.Client, spec: DownloadSpec) -> Resolved:
        url = self.resolve_url(spec)
        resp = client.head(url, headers=self._headers(url))  # not followed: the Location is the answer
        raise_for_status(resp, spec.repo_id, spec.filename)
        h = resp.headers
        commit = h.get("X-Repo-Commit") or ""
        etag = (h.get("X-Linked-Etag") or h.get("ETag") or "").strip('"').removeprefix("W/").strip('"')
        size = int(h.get("X-Linked-Size") or h.get("Content-Length") or spec.size or 0)
        location = h.get("Location") if resp.status_code in REDIRECTS else None
        sha = spec.sha256 or (etag if re.fullmatch(r"[0-9a-f]{64}", etag or "") else None)
        return Resolved(url=urljoin(url, location) if location else url, commit=commit, size=size, sha256=sha)

    def read_prefix(self, spec: DownloadSpec, n_bytes: int = 2 << 20) -> bytes:
        """The first bytes of a file (a GGUF header for a fit estimate), with one Range request."""
        with hub_http_client(self.timeout) as client:
            resolved = self._resolve(client, spec)
            with closing(self._request(client, "GET", resolved.url, {"Range": f"bytes=0-{n_bytes - 1}"})) as resp:
                raise_for_status(resp, spec.repo_id, spec.filename)
                if resp.status_code >= 400:
                    return b""
                prefix = bytearray()
                for piece in resp.iter_raw():  # a server that ignores the Range is not read to the end
                    prefix += piece
                    if len(prefix) >= n_bytes:
                        break
                return bytes(prefix[:n_bytes])

    # ----- transfer
    def fetch(
        self,
        spec: DownloadSpec,
        models_dir: Path,
        on_progress: Callable[[Progress], None] | None = None,
        control: DownloadControl | None = None,
    ) -> Path:
        control = control or DownloadControl()
        target = safe_target(models_dir, spec.repo_id, spec.local_name)
        with hub_http_client(self.timeout) as client:
            return self._fetch(client, spec, target, on_progress, control)

    def _fetch(
        self,
        client: httpx2.Client,
        spec: DownloadSpec,
        target: Path,
        on_progress: Callable[[Progress], None] | None,
        control: DownloadControl,
    ) -> Path:
        # Few retries here: offline should be said quickly, not after minutes of backoff.
        resolved = self._with_retries(lambda: self._resolve(client, spec), control, retries=2)
        if target.exists() and target.stat().st_size == resolved.size:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        part, sidecar = part_paths(target)
        record = {
            "repo_id": spec.repo_id,
            "filename": spec.filename,
            "revision": spec.revision,
            "commit": resolved.commit,
            "size": resolved.size,
            "sha256": resolved.sha256,
        }
        if spec.save_as:
            record["save_as"] = spec.save_as
        have = 0
        if part.exists() and sidecar.exists():
            try:
                old = json.loads(sidecar.read_text())
            except (OSError, ValueError):
                old = {}
            if old.get("sha256") == record["sha256"] and old.get("size") == record["size"]:
                have = min(part.stat().st_size, resolved.size)
        if have == 0:
            part.unlink(missing_ok=True)
        sidecar.write_text(json.dumps(record))
        self._check_space(part.parent, resolved.size - have)

        hasher = hashlib.sha256()
        if have:
            with part.open("rb") as fh:  # the hash covers the bytes already on disk
                while block := fh.read(8 << 20):
                    hasher.update(block)
        state = {"have": have, "hasher": hasher}
        started = time.monotonic()
        resumed_from = have

        def attempt() -> None:
            self._transfer(client, spec, resolved, part, state, control, on_progress, started, resumed_from)

        self._with_retries(attempt, control, state)
        if state["have"] != resolved.size:
            raise DownloadError(f"{spec.filename}: the server sent {state['have']:,} of {resolved.size:,} bytes.")
        digest = state["hasher"].hexdigest()
        if resolved.sha256 and digest != resolved.sha256:
            part.unlink(missing_ok=True)
            sidecar.unlink(missing_ok=True)
            raise IntegrityError(
                f"{spec.filename} failed verification: its sha256 is {digest[:12]}…, the Hub says "
                f"{resolved.sha256[:12]}…. The damaged file was deleted; download it again."
            )
        os.replace(part, target)
        sidecar.unlink(missing_ok=True)
        return target

    def _check_space(self, folder: Path, need: int) -> None:
        free = shutil.disk_usage(folder).free
        if free < need + DISK_MARGIN:
            raise DiskFullError(
                f"Not enough disk space in {folder}: the download needs {need / 1e9:.2f} GB more, "
                f"{free / 1e9:.2f} GB are free. Free some space or choose another models folder."
            )

    def _with_retries(
        self, fn: Callable[[], T], control: DownloadControl, state: dict | None = None, retries: int | None = None
    ) -> T:
        import httpx2

        retries = self.retries if retries is None else retries
        attempt = 0
        last_have = state["have"] if state else 0
        while True:
            self._check_control(control)
            try:
                return fn()
            except (Transient, OSError, httpx2.TransportError) as exc:
                # TransportError: refused, DNS, proxy, TLS, timeouts, a connection dropped or reset mid-body
                if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                    raise DiskFullError(
                        "The disk filled up during the download. The partial file is kept: free some space and resume."
                    ) from exc
                if isinstance(exc, DownloadError):
                    raise
                if state and state["have"] > last_have:
                    attempt = 0  # progress was made: this is a fresh fault, not a repeated one
                    last_have = state["have"]
                attempt += 1
                if attempt > retries:
                    raise HubOffline(
                        f"The download keeps failing: {network_failure(exc)}. The partial file is "
                        "kept; resume when the connection is back."
                    ) from exc
                delay = min(self.backoff_s * 2 ** (attempt - 1), 30.0)
                if control.cancel.wait(delay) or control.pause.is_set():
                    self._check_control(control)

    @staticmethod
    def _check_control(control: DownloadControl) -> None:
        if control.cancel.is_set():
            raise DownloadStopped("Download cancelled.", cancelled=True)
        if control.pause.is_set():
            raise DownloadStopped("Download paused.", cancelled=False)

    def _transfer(
        self,
        client: httpx2.Client,
        spec: DownloadSpec,
        resolved: Resolved,
        part: Path,
        state: dict,
        control: DownloadControl,
        on_progress: Callable[[Progress], None] | None,
        started: float,
        resumed_from: int,
    ) -> None:
        have = state["have"]
        if have >= resolved.size:
            return
        with closing(self._request(client, "GET", resolved.url, {"Range": f"bytes={have}-"})) as resp:
            raise_for_status(resp, spec.repo_id, spec.filename)
            if resp.status_code == 200 and have:
                # The server ignored the range: start over rather than append the wrong bytes.
                have = 0
                state["have"] = 0
                state["hasher"] = hashlib.sha256()
                part.unlink(missing_ok=True)
            elif resp.status_code == 206:
                start = int(re.match(r"bytes (\d+)-", resp.headers.get("Content-Range") or "bytes 0-").group(1))  # type: ignore[union-attr]
                if start != have:
                    raise Transient(f"server resumed at {start}, expected {have}")
            elif resp.status_code == 416:
                raise Transient("range not satisfiable")
            last_report = 0.0
            pieces: list[bytes] = []  # what the network gave since the last write, written in `chunk`s
            pending = 0
            hashing = _HashPipe(state["hasher"])
            with hashing, part.open("ab" if have else "wb") as out:

                def write_pending() -> None:
                    nonlocal have, pending
                    if pieces:
                        data = b"".join(pieces)
                        pieces.clear()
                        pending = 0
                        out.write(data)
                        hashing.feed(data)
                        have += len(data)
                        state["have"] = have

                try:
                    for piece in resp.iter_raw():
                        pieces.append(piece)
                        pending += len(piece)
                        if pending >= self.chunk or have + pending >= resolved.size:
                            write_pending()
                            now = time.monotonic()
                            if on_progress and (now - last_report >= 0.2 or have >= resolved.size):
                                out.flush()  # (the bytes a report counts are the OS's: a killed Ember keeps them)
                                last_report = now
                                elapsed = max(now - started, 1e-6)
                                speed = (have - resumed_from) / elapsed
                                eta = (resolved.size - have) / speed if speed > 0 else None
                                on_progress(Progress(min(have, resolved.size), resolved.size, speed, eta, resumed_from))
                        if control.cancel.is_set() or control.pause.is_set():
                            write_pending()
                            out.flush()
                            self._check_control(control)
                finally:
                    write_pending()  # bytes that arrived before a fault are kept: the resume skips them
                if have < resolved.size:
                    raise Transient("connection closed mid-body")
                out.flush()
                os.fsync(out.fileno())


class _HashPipe:
    """sha256 on its own thread (hashlib releases the GIL), overlapping the next network read: the
    digest costs the transfer nothing. Order is kept: one chunk in flight at a time."""

    def __init__(self, hasher: object) -> None:
        self._hasher = hasher
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-sha256")
        self._pending: Future[None] | None = None

    def feed(self, data: bytes) -> None:
        if self._pending is not None:
            self._pending.result()
        self._pending = self._pool.submit(self._hasher.update, data)  # type: ignore[attr-defined]

    def __enter__(self) -> _HashPipe:
        return self

    def __exit__(self, *_: object) -> None:
        try:
            if self._pending is not None:
                self._pending.result()
        finally:
            self._pool.shutdown(wait=True)


def spec_from_record(record: dict) -> DownloadSpec:
    return DownloadSpec(
        repo_id=record["repo_id"],
        filename=record["filename"],
        revision=record.get("commit") or record.get("revision") or "main",
        size=record.get("size"),
        sha256=record.get("sha256"),
        save_as=record.get("save_as") if isinstance(record.get("save_as"), str) else None,
    )
