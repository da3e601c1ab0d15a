"""What a backend loads: a local model file with its load settings (`LoadConfig`, from the parameter
table) or a model on a remote OpenAI-compatible server (`RemoteModelRef`, through an `Endpoint`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ember_chat.engine.core.loopback import is_loopback
from ember_chat.engine.core.params import LoadConfig


@dataclass(frozen=True)
class Endpoint:
    """How to reach an OpenAI-compatible server. The API key lives only in memory here; it is
    read from the OS keychain when the connection is used and never written anywhere."""

    name: str
    base_url: str  # e.g. http://127.0.0.1:8000/v1
    api_key: str | None = field(default=None, repr=False)
    verify_tls: bool = True
    read_timeout_s: float = 60.0
    connect_timeout_s: float = 10.0


def crosses_network_in_clear(base_url: str) -> bool:
    """True for a plain http:// address on another machine: an API key and every chat sent there can
    be read by anyone on the network path. Loopback addresses never leave this computer."""
    parts = urlsplit(base_url.strip())
    if parts.scheme.lower() != "http" or not parts.hostname:
        return False
    return not is_loopback(parts.hostname)  # (any other name may resolve anywhere)


@dataclass(frozen=True)
class RemoteModelRef:
    """A model served by a remote OpenAI-compatible server (the remote kind of model reference)."""

    endpoint: Endpoint
    model_id: str


ModelRef = LoadConfig | RemoteModelRef
