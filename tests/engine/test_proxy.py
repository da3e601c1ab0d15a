"""Proxies from the environment: the Hub (search, metadata, the online check, downloads) goes through
HTTP_PROXY/HTTPS_PROXY and honours NO_PROXY; remote chat connections never use them.

The proxy is a real forward proxy on 127.0.0.1 written here (absolute-URI GET/HEAD for http://
targets). The local Hub and its CDN are named `hub.test` and `cdn.test`: names only the proxy knows
(it connects to 127.0.0.1), and that this process cannot resolve — a request that bypasses the proxy
fails, as it does behind a firewall that only lets the proxy out."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from ember_chat.engine.core.refs import Endpoint
from ember_chat.engine.errors import HubOffline
from ember_chat.engine.inference.remote.wire import check_connection, make_client
from ember_chat.engine.models.download_paths import part_paths, safe_target
from ember_chat.engine.models.downloader import Downloader, DownloadSpec
from ember_chat.engine.models.hub import HubClient
from tests.helpers.hub_server import FakeHub
from tests.helpers.sse_server import FakeOpenAI

pytestmark = pytest.mark.usefixtures("no_thread_left")

PAYLOAD = bytes(range(256)) * 8192 + b"tail"  # ~2 MB "model"
SPEC = DownloadSpec("acme/tiny-GGUF", "tiny-Q4_K_M.gguf")
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "transfer-encoding",
    "upgrade",
}


@dataclass(frozen=True)
class Seen:
    method: str
    url: str  # the absolute URI the client asked the proxy for
    headers: dict[str, str]


class ForwardProxy:
    """An HTTP/1.1 forward proxy on 127.0.0.1 that logs every request. It knows the hosts in `names`
    (and 127.0.0.1) and connects to them on 127.0.0.1; anything else is a 502."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = False  # server_close() joins the handler threads
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def hosts(self) -> list[str]:
        with self._lock:
            return [urlsplit(s.url).hostname or "" for s in self.seen]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 5  # an idle keep-alive connection ends, so no handler thread lingers

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self._forward()

            def do_HEAD(self) -> None:
                self._forward()

            def _forward(self) -> None:
                with proxy._lock:
                    proxy.seen.append(Seen(self.command, self.path, dict(self.headers.items())))
                u = urlsplit(self.path)
                if u.scheme != "http" or not u.hostname or u.port is None:
                    return self._refuse(400, b"absolute http:// URI with a port expected")
                if u.hostname not in proxy.names | {"127.0.0.1"}:
                    return self._refuse(502, b"unknown host")
                upstream = http.client.HTTPConnection("127.0.0.1", u.port, timeout=5)
                try:
                    upstream.putrequest(self.command, (u.path or "/") + (f"?{u.query}" if u.query else ""), True, True)
                    for k, v in self.headers.items():
                        if k.lower() not in HOP_BY_HOP:
                            upstream.putheader(k, v)
                    upstream.putheader("Connection", "close")
                    upstream.endheaders()
                    resp = upstream.getresponse()
                    self.send_response_only(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in HOP_BY_HOP:
                            self.send_header(k, v)
                    self.end_headers()
                    if self.command != "HEAD":
                        while block := resp.read(64 * 1024):
                            self.wfile.write(block)
                except OSError:
                    self.close_connection = True
                finally:
                    upstream.close()

            def _refuse(self, status: int, body: bytes) -> None:
                self.send_response_only(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def use_proxy(monkeypatch: pytest.MonkeyPatch, proxy_url: str, no_proxy: str = "") -> None:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    monkeypatch.delenv("REQUEST_METHOD", raising=False)  # urllib ignores HTTP_PROXY in a CGI
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    monkeypatch.setenv("HTTPS_PROXY", proxy_url)
    monkeypatch.setenv("NO_PROXY", no_proxy)  # explicit: nothing bypasses the proxy, not even 127.0.0.1


def only_the_proxy_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    """`*.test` names do not resolve here (as public names do not behind a closed firewall)."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.endswith(".test"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def close_hub_session() -> None:
    from huggingface_hub.utils import close_session

    close_session()  # the library's pooled client reads the proxy settings when it is made


@dataclass
class ProxiedHub:
    hub: FakeHub
    proxy: ForwardProxy
    url: str  # the Hub's address as the app sees it: http://hub.test:PORT


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProxiedHub]:
    hub = FakeHub().start()
    hub.add_repo("acme/tiny-GGUF", {SPEC.filename: PAYLOAD, "README.md": b"# tiny"}, downloads=5)
    hub.add_repo("acme/gated-GGUF", {"g-Q4_0.gguf": b"secret" * 100}, gated=True)
    proxy = ForwardProxy({"hub.test", "cdn.test"})
    hub_port, cdn_port = urlsplit(hub.hub_url).port, urlsplit(hub.cdn_url).port
    hub.cdn_url = f"http://cdn.test:{cdn_port}"  # the Hub's redirects name the CDN by its name too
    close_hub_session()
    use_proxy(monkeypatch, proxy.url)
    only_the_proxy_resolves(monkeypatch)
    try:
        yield ProxiedHub(hub, proxy, f"http://hub.test:{hub_port}")
    finally:
        close_hub_session()  # its keep-alive connections would hold proxy handler threads
        proxy.stop()
        hub.stop()


def test_download_goes_through_the_environment_proxy(proxied: ProxiedHub, tmp_path: Path) -> None:
    seen = []
    path = Downloader(proxied.url, backoff_s=0.01).fetch(SPEC, tmp_path, on_progress=seen.append)
    assert path.read_bytes() == PAYLOAD
    assert seen and seen[-1].done == len(PAYLOAD)
    assert not part_paths(path)[0].exists()
    hosts = proxied.proxy.hosts()
    assert "hub.test" in hosts and "cdn.test" in hosts  # the resolve HEAD and the CDN GET
    assert proxied.hub.logged("hub") and proxied.hub.logged("cdn")


def test_token_through_the_proxy_goes_to_the_hub_only(proxied: ProxiedHub, tmp_path: Path) -> None:
    spec = DownloadSpec("acme/gated-GGUF", "g-Q4_0.gguf")
    token = proxied.hub.token
    assert Downloader(proxied.url, token, backoff_s=0.01).fetch(spec, tmp_path).read_bytes() == b"secret" * 100
    with proxied.proxy._lock:
        seen = list(proxied.proxy.seen)
    to_hub = [s for s in seen if urlsplit(s.url).hostname == "hub.test"]
    to_cdn = [s for s in seen if urlsplit(s.url).hostname == "cdn.test"]
    assert to_hub and all(s.headers.get("Authorization") == f"Bearer {token}" for s in to_hub)
    assert to_cdn and all("Authorization" not in s.headers for s in to_cdn)


def test_resume_through_the_proxy(proxied: ProxiedHub, tmp_path: Path) -> None:
    from ember_chat.engine.errors import DownloadStopped
    from ember_chat.engine.models.downloader import DownloadControl

    control = DownloadControl()
    with pytest.raises(DownloadStopped):
        Downloader(proxied.url, chunk=64 * 1024).fetch(
            SPEC, tmp_path, on_progress=lambda p: control.pause.set(), control=control
        )
    part = part_paths(safe_target(tmp_path, SPEC.repo_id, SPEC.filename))[0]
    have = part.stat().st_size
    assert 0 < have < len(PAYLOAD)
    assert Downloader(proxied.url).fetch(SPEC, tmp_path).read_bytes() == PAYLOAD
    ranges = [r.headers.get("Range") for r in proxied.hub.logged("cdn")]
    assert ranges[-1] == f"bytes={have}-"


def test_hub_is_online_and_searchable_behind_the_proxy(proxied: ProxiedHub) -> None:
    client = HubClient(proxied.url)
    found = client.search("tiny")  # the online check, then the library's own request: both proxied
    assert [r.id for r in found] == ["acme/tiny-GGUF"]
    files = client.with_header(client.files("acme/tiny-GGUF"))
    assert [v.name for v in files.variants] == [SPEC.filename]
    assert proxied.proxy.hosts().count("hub.test") >= 3


def test_no_proxy_hosts_are_reached_directly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hub = FakeHub().start()
    hub.add_repo("acme/tiny-GGUF", {SPEC.filename: PAYLOAD})
    proxy = ForwardProxy(set())
    close_hub_session()
    use_proxy(monkeypatch, proxy.url, no_proxy="localhost,127.0.0.1")
    try:
        assert HubClient(hub.hub_url).search("tiny")
        assert Downloader(hub.hub_url).fetch(SPEC, tmp_path).read_bytes() == PAYLOAD
        assert proxy.seen == []
    finally:
        close_hub_session()
        proxy.stop()
        hub.stop()


def test_an_unreachable_proxy_reads_as_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hub = FakeHub().start()
    hub.add_repo("acme/tiny-GGUF", {SPEC.filename: PAYLOAD})
    closed = socket.socket()  # bound, never listening: connecting to it is refused
    closed.bind(("127.0.0.1", 0))
    close_hub_session()
    use_proxy(monkeypatch, f"http://127.0.0.1:{closed.getsockname()[1]}")
    try:
        with pytest.raises(HubOffline, match=r"through the proxy 127\.0\.0\.1:\d+\. You seem to be offline"):
            HubClient(hub.hub_url).search("tiny")
        with pytest.raises(HubOffline):
            Downloader(hub.hub_url, backoff_s=0.01).fetch(SPEC, tmp_path)
        assert hub.requests == []  # nothing went around the proxy
    finally:
        closed.close()
        close_hub_session()
        hub.stop()


def test_hub_client_honours_the_environment() -> None:
    from ember_chat.engine.models.hub_http import hub_http_client

    with hub_http_client(5.0) as client:
        assert client.trust_env


# ----- remote chat connections never use a proxy from the environment
def test_remote_connections_ignore_environment_proxies(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = ForwardProxy(set())
    use_proxy(monkeypatch, proxy.url)
    try:
        # the setting is real: a client that trusts the environment goes through the proxy
        with httpx2.Client(trust_env=True) as trusting:
            assert trusting.get(f"{server.base_url}/models").status_code == 200
        assert len(proxy.seen) == 1
        client, _ = make_client(Endpoint("lab", server.base_url, api_key="sk-secret"))
        with client:
            assert not client.trust_env
            assert client.get("models").status_code == 200
        assert check_connection(Endpoint("lab", server.base_url, api_key="sk-secret")).models
        assert len(proxy.seen) == 1  # neither the key nor the chats went to the proxy
    finally:
        proxy.stop()
