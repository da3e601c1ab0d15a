"""How an API server is set up (ServerConfig: where it listens, who may call it, its limits) and the
names a loopback listener's Host header may give. The server (server.py) and its guards (guards.py)
read it."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field

from ember_chat.engine.attachments import DEFAULT_LIMITS, Limits
from ember_chat.engine.core.loopback import is_loopback
from ember_chat.engine.errors import ServeError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.serve.file_reading import TURN_WAIT_S

LOOPBACK = ("127.0.0.1", "localhost", "::1")  # (a Host header's names: exact, unlike core.loopback's test)

DEFAULT_PORT = 8642
MAX_BODY_BYTES = 72 * 1024 * 1024  # a 50 MB attachment (the default limit) in base64, and the messages
CLIENT_TIMEOUT_S = 30.0  # a client silent this long while we read its request is dropped
MAX_CONNECTIONS = 64  # open connections (each holds a thread); more get a quick 503


def listens_only_locally(host: str) -> bool:
    """Whether a server bound to `host` can be reached from this computer only, so it needs no key. A
    loopback address is; a loopback *name* ("localhost", "dev.localhost", "localhost.") only if every
    address it resolves to is: the socket binds what the resolver answers, and a hosts-file line or a
    DNS answer may send such a name to a LAN address. A name that does not resolve cannot be bound."""
    if not is_loopback(host):
        return False
    name = host.strip().strip("[]")
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        answers = socket.getaddrinfo(name, None)
    except OSError:
        return True  # (the bind fails the same way: nothing listens anywhere)
    return all(is_loopback(str(answer[4][0]).split("%")[0]) for answer in answers)


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    api_key: str | None = field(default=None, repr=False)
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    timeout_s: float = CLIENT_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    allow_unknown_fields: bool = False  # ignore request fields Ember does not know, instead of a 400
    # how the user of this server turns allow_unknown_fields on, named in that 400: the CLI's flag by
    # default, the setting's place for the window's server (app/server/api_control.py)
    unknown_fields_advice: str = CLI_UNKNOWN_FIELDS_ADVICE
    alias: str | None = None  # the model's name on this server (for clients that hard-code one)
    attachment_limits: Limits = DEFAULT_LIMITS  # a request's files: size, and the reader's time and memory
    file_turn_wait_s: float = TURN_WAIT_S  # how long a request's file waits for a free reader before a 503
    # speculative decoding (core.params.SPECULATIVE_MODES) for a request whose `ember` does not name one
    speculative: str = "auto"

    def check(self) -> None:
        if not listens_only_locally(self.host) and not self.api_key:
            raise ServeError(
                f"Serving on {self.host} makes the model reachable from other machines: set an API key first "
                "(or keep the server on 127.0.0.1)."
            )
        if self.timeout_s <= 0 or self.max_connections < 1:
            raise ServeError("The API server needs a positive client timeout and at least one connection.")
