"""A local server that speaks the Hugging Face Hub protocol the real `huggingface_hub` client and
Ember's downloader use, with a second "CDN" origin for LFS files and fault injection.

Two HTTP/1.1 servers on 127.0.0.1 (port 0): the Hub (API, resolve with 302 to the CDN) and the CDN
(Range/206). Every request is logged with its headers so tests can check where the token went.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

# files stored in Git LFS (sha256 in the metadata, bytes from the CDN), as the Hub's default .gitattributes
LFS_SUFFIXES = (".gguf", ".bin")


@dataclass
class Repo:
    files: dict[str, bytes]
    gated: bool = False
    private: bool = False
    downloads: int = 0
    likes: int = 0
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    gguf: dict = field(default_factory=dict)


@dataclass
class Faults:
    drop_after: int | None = None  # close the connection after this many body bytes (once per count)
    drop_count: int = 0
    reset_after: int | None = None  # TCP reset after this many body bytes
    reset_count: int = 0
    status_500: int = 0  # answer this many CDN requests with 500 first
    stall_s: float = 0.0  # pause mid-body this long (once), longer than the client's timeout
    stall_after: int = 0
    corrupt: bool = False  # send wrong bytes (sha256 mismatch)
    ignore_range: bool = False
    rate_bps: float = 0.0  # pace the body like a link of this speed (0: as fast as loopback goes)


@dataclass
class LoggedRequest:
    origin: str  # "hub" or "cdn"
    method: str
    path: str
    headers: dict[str, str]


class FakeHub:
    def __init__(self, token: str = "hf_good_token") -> None:
        self.repos: dict[str, Repo] = {}
        self._blobs: dict[str, bytes] = {}
        self.token = token
        self.faults = Faults()
        self.requests: list[LoggedRequest] = []
        self.bytes_sent = 0
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []
        self.hub_url = ""
        self.cdn_url = ""

    # ----- lifecycle
    def start(self) -> FakeHub:
        hub = self._serve(self._handler("hub"))
        cdn = self._serve(self._handler("cdn"))
        self.hub_url = f"http://127.0.0.1:{hub.server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{cdn.server_address[1]}"
        return self

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = False  # server_close() joins the handler threads
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        self._servers.append(server)
        self._threads.append(thread)
        return server

    def stop(self) -> None:
        from huggingface_hub.utils import close_session

        close_session()  # first: pooled keep-alive connections would hold handler threads open
        for server in self._servers:
            server.shutdown()
            server.server_close()  # joins the handler threads
        for thread in self._threads:
            thread.join(timeout=10)

    # ----- content
    def add_repo(self, repo_id: str, files: dict[str, bytes], **kwargs: object) -> Repo:
        repo = Repo(files=files, **kwargs)  # type: ignore[arg-type]
        self.repos[repo_id] = repo
        for data in files.values():
            self._blobs[hashlib.sha256(data).hexdigest()] = data
        return repo

    def blob(self, sha: str) -> bytes | None:
        return self._blobs.get(sha)

    def sha_of(self, data: bytes) -> str:
        for sha, blob in self._blobs.items():
            if blob is data:
                return sha
        return hashlib.sha256(data).hexdigest()

    def logged(self, origin: str) -> list[LoggedRequest]:
        with self._lock:
            return [r for r in self.requests if r.origin == origin]

    # ----- HTTP
    def _handler(self, origin: str) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 5  # an idle keep-alive connection ends, so no handler thread lingers

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _log(self) -> None:
                with hub._lock:
                    hub.requests.append(LoggedRequest(origin, self.command, self.path, dict(self.headers.items())))

            def do_HEAD(self) -> None:
                self._log()
                self._route(head=True)

            def do_GET(self) -> None:
                self._log()
                self._route(head=False)

            def _send(
                self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, head: bool = False
            ) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head and body:
                    self.wfile.write(body)

            def _json(self, data: object, head: bool = False) -> None:
                self._send(200, json.dumps(data).encode(), {"Content-Type": "application/json"}, head)

            def _error(self, status: int, code: str, head: bool = False) -> None:
                body = json.dumps({"error": code}).encode()
                self._send(status, body, {"X-Error-Code": code, "Content-Type": "application/json"}, head)

            def _authorized(self, repo: Repo) -> bool:
                if not (repo.gated or repo.private):
                    return True
                return self.headers.get("Authorization") == f"Bearer {hub.token}"

            def _route(self, head: bool) -> None:
                url = urlsplit(self.path)
                path = unquote(url.path)
                if origin == "cdn":
                    return self._cdn(path, head)
                if path == "/api/models":
                    return self._list(parse_qs(url.query), head)
                if path.startswith("/api/models/"):
                    return self._info(path.removeprefix("/api/models/"), head)
                parts = path.lstrip("/").split("/", 4)
                if len(parts) == 5 and parts[2] == "resolve":
                    return self._resolve(f"{parts[0]}/{parts[1]}", parts[3], parts[4], head)
                self._error(404, "EntryNotFound", head)

            def _list(self, query: dict[str, list[str]], head: bool) -> None:
                term = (query.get("search") or [""])[0].lower()
                limit = int((query.get("limit") or ["50"])[0])
                found = [
                    {
                        "id": rid,
                        "modelId": rid,
                        "downloads": r.downloads,
                        "likes": r.likes,
                        "tags": ["gguf"],
                        "lastModified": "2026-11-01T12:00:00.000Z",
                        "private": r.private,
                    }
                    for rid, r in hub.repos.items()
                    if term in rid.lower() and not r.private
                ]
                found.sort(key=lambda d: -d["downloads"])
                self._json(found[:limit], head)

            def _info(self, rest: str, head: bool) -> None:
                if "/revision/" in rest:
                    rest = rest.split("/revision/")[0]
                rid = "/".join(rest.split("/")[:2])
                repo = hub.repos.get(rid)
                if repo is None or (repo.private and not self._authorized(repo)):
                    return self._error(401 if repo is None else 404, "RepoNotFound", head)
                if repo.gated and not self._authorized(repo):
                    return self._error(401, "GatedRepo", head)
                siblings = []
                for name, data in repo.files.items():
                    sib = {"rfilename": name, "size": len(data), "blobId": hashlib.sha1(data).hexdigest()}
                    if name.endswith(LFS_SUFFIXES):
                        sha = hub.sha_of(data)
                        sib["lfs"] = {"sha256": sha, "size": len(data), "pointerSize": 134}
                    siblings.append(sib)
                self._json(
                    {
                        "id": rid,
                        "modelId": rid,
                        "sha": repo.commit,
                        "siblings": siblings,
                        "gated": "auto" if repo.gated else False,
                        "private": repo.private,
                        "downloads": repo.downloads,
                        "likes": repo.likes,
                        "tags": ["gguf"],
                        "gguf": repo.gguf,
                        "lastModified": "2026-11-01T12:00:00.000Z",
                    },
                    head,
                )

            def _resolve(self, rid: str, rev: str, name: str, head: bool) -> None:
                repo = hub.repos.get(rid)
                if repo is None:
                    return self._error(404, "RepoNotFound", head)
                if not self._authorized(repo):
                    return self._error(401 if repo.gated else 404, "GatedRepo" if repo.gated else "RepoNotFound", head)
                if rev not in ("main", repo.commit):
                    return self._error(404, "RevisionNotFound", head)
                data = repo.files.get(name)
                if data is None:
                    return self._error(404, "EntryNotFound", head)
                sha = hub.sha_of(data)
                common = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
                if name.endswith(LFS_SUFFIXES):  # LFS: redirect to the CDN origin
                    headers = {
                        **common,
                        "X-Linked-Etag": f'"{sha}"',
                        "X-Linked-Size": str(len(data)),
                        "ETag": f'"{sha}"',
                        "Location": f"{hub.cdn_url}/blobs/{sha}?name={name}",
                    }
                    return self._send(302, b"", headers, head)
                self._send(200, data, {**common, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'}, head)

            def _cdn(self, path: str, head: bool) -> None:
                if not path.startswith("/blobs/"):
                    return self._error(404, "EntryNotFound", head)
                data = hub.blob(path.removeprefix("/blobs/"))
                if data is None:
                    return self._error(404, "EntryNotFound", head)
                f = hub.faults
                with hub._lock:
                    if f.status_500 > 0:
                        f.status_500 -= 1
                        fail = True
                    else:
                        fail = False
                if fail:
                    return self._send(500, b"internal error", {}, head)
                if f.corrupt:
                    data = bytes([data[0] ^ 0xFF]) + data[1:]
                total = len(data)
                start, end = 0, total  # end is exclusive
                rng = self.headers.get("Range")
                if rng and not f.ignore_range:
                    first, _, last = rng.removeprefix("bytes=").partition("-")
                    start = int(first)
                    end = min(int(last) + 1, total) if last else total
                    if start >= total:
                        return self._send(416, b"", {"Content-Range": f"bytes */{total}"}, head)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{total}")
                else:
                    self.send_response(200)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(end - start))
                self.end_headers()
                if head:
                    return
                self._body(data if end == total else data[:end], start)

            def _body(self, data: bytes, start: int) -> None:
                f = hub.faults
                pos = start
                sent_here = 0
                step = 256 * 1024
                t0 = time.perf_counter()
                while pos < len(data):
                    limit = len(data)
                    with hub._lock:
                        if f.drop_count > 0 and f.drop_after is not None and pos < f.drop_after:
                            limit = f.drop_after
                        if f.reset_count > 0 and f.reset_after is not None and pos < f.reset_after:
                            limit = min(limit, f.reset_after)
                        stall = f.stall_s if f.stall_s and pos >= f.stall_after else 0.0
                        if stall:
                            f.stall_s = 0.0
                    if stall:
                        time.sleep(stall)  # the simulated network stall (server side)
                    end = min(pos + step, limit)
                    try:
                        self.wfile.write(data[pos:end])
                    except (BrokenPipeError, ConnectionResetError):
                        return
                    with hub._lock:
                        hub.bytes_sent += end - pos
                    sent_here += end - pos
                    pos = end
                    if f.rate_bps:  # the simulated link speed (server side)
                        ahead = t0 + sent_here / f.rate_bps - time.perf_counter()
                        if ahead > 0:
                            time.sleep(ahead)
                    if pos == limit and limit < len(data):
                        with hub._lock:
                            if f.reset_count > 0 and f.reset_after == limit:
                                f.reset_count -= 1
                                self._reset()
                                return
                            f.drop_count -= 1
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return

            def _reset(self) -> None:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()

        return Handler
