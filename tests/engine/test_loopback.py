"""Which hosts only this computer can reach: one answer (core/loopback.py) for the API server's bind
check (no key needed), a connection's plain-http warning and `serve --remote`'s check that it does not
lead back to itself. Before, each had its own test and they disagreed (see the cases' notes)."""

from __future__ import annotations

import socket

import pytest

from ember_chat.engine.core.instance import same_listener
from ember_chat.engine.core.loopback import is_loopback
from ember_chat.engine.core.refs import crosses_network_in_clear
from ember_chat.engine.errors import ServeError
from ember_chat.engine.serve.config import ServerConfig

PORT = 8642

CASES = [
    ("localhost", True),
    ("LOCALHOST", True),
    (" localhost ", True),
    ("localhost.", True),  # the fully qualified name: all three said no
    ("foo.localhost", True),  # RFC 6761: the server's bind check and same_listener said no
    ("127.0.0.1", True),
    ("127.0.0.2", True),
    ("127.255.255.254", True),
    ("::1", True),
    ("[::1]", True),  # as a URL writes it: same_listener said no
    ("0:0:0:0:0:0:0:1", True),
    ("::ffff:127.0.0.1", True),  # IPv4-mapped (a dual-stack socket's loopback): all three said no
    ("::ffff:7f00:2", True),
    ("localhost.localdomain", False),  # a hosts-file custom, not reserved: same_listener alone said yes
    ("localhost.example.com", False),
    ("mylocalhost", False),
    ("127.0.0.1.", False),
    ("0.0.0.0", False),  # every interface
    ("::", False),
    ("", False),
    ("10.0.0.1", False),
    ("::ffff:10.0.0.1", False),
    ("192.168.1.20", False),
    ("gpu-box.lan", False),
]


def test_a_loopback_name_the_resolver_sends_elsewhere_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: the bind check judged a name by its spelling, but the socket binds what the resolver
    answers: a hosts-file line "192.168.1.5 dev.localhost" put the server on the LAN with no key."""
    answers = {
        "dev.localhost": ["192.168.1.5"],
        "localhost.": ["127.0.0.1", "::1"],
        "both.localhost": ["127.0.0.1", "10.0.0.7"],
    }

    def resolve(name: str, *_args: object, **_kwargs: object) -> list[tuple[object, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0)) for address in answers[name]]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    for host in ("dev.localhost", "both.localhost"):
        with pytest.raises(ServeError, match="set an API key"):
            ServerConfig(host=host).check()
        ServerConfig(host=host, api_key="k" * 32).check()
    ServerConfig(host="localhost.").check()


def as_url(host: str) -> str:
    name = host.strip()
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    return f"http://{name}:{PORT}/v1"


@pytest.mark.parametrize(("host", "loopback"), CASES)
def test_one_answer_for_each_host(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(("host", "loopback"), CASES)
def test_the_server_needs_a_key_exactly_where_the_host_is_not_loopback(host: str, loopback: bool) -> None:
    config = ServerConfig(host=host)
    if loopback:
        config.check()
    else:
        with pytest.raises(ServeError, match="set an API key"):
            config.check()


@pytest.mark.parametrize(("host", "loopback"), [case for case in CASES if case[0].strip()])
def test_plain_http_is_warned_about_exactly_where_the_host_is_not_loopback(host: str, loopback: bool) -> None:
    assert crosses_network_in_clear(as_url(host)) is not loopback


# (a URL that names the listener's own address, 0.0.0.0 here, leads to it whatever that is)
@pytest.mark.parametrize(("host", "loopback"), [case for case in CASES if case[0].strip() not in ("", "0.0.0.0")])
def test_a_loopback_address_leads_back_to_a_server_on_every_interface(host: str, loopback: bool) -> None:
    assert same_listener(as_url(host), "0.0.0.0", PORT) is loopback


@pytest.mark.parametrize("host", [host for host, loopback in CASES if loopback])
def test_a_server_bound_to_any_loopback_address_is_reached_through_127_0_0_1(host: str) -> None:
    assert same_listener(f"http://127.0.0.1:{PORT}/v1", host, PORT)
    assert not same_listener(f"http://127.0.0.1:{PORT + 1}/v1", host, PORT)
