"""How Ember recognises a connection to its own API server: the server sends its engine's id (a
random `new_server_id()` per engine service) in a response header on every answer, so a connection
that leads back to the same engine is recognised whatever address it uses; and the address check
for `ember-chat serve --remote`, before anything listens."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from ember_chat.engine.core.loopback import is_loopback

SERVER_ID_HEADER = "X-Ember-Server"
_ANY = ("0.0.0.0", "::", "")


def new_server_id() -> str:
    return secrets.token_hex(8)


def same_listener(url: str, host: str, port: int) -> bool:
    """Whether `url` leads to a server listening on host:port of this machine (a loopback address
    reaches a server bound to loopback or to every interface)."""
    try:
        u = urlsplit(url)
        url_port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return False
    url_host = (u.hostname or "").lower()
    if url_port != port:
        return False
    if url_host == host.lower():
        return True
    return is_loopback(url_host) and (host in _ANY or is_loopback(host))
