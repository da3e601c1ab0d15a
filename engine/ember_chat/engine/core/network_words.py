"""What went wrong with a network connection, in words a user reads ("the host name could not be
found"), never an exception class name such as "gaierror" or "RemoteProtocolError"."""

from __future__ import annotations

import socket
import ssl

DNS_HINTS = ("name or service not known", "nodename nor servname", "getaddrinfo", "no address", "name resolution")


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what caused it (httpx wraps the socket error it got), each once."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__, *(a for a in e.args if isinstance(a, BaseException))]
    return seen


def network_failure(exc: BaseException) -> str:
    """A short phrase, lower case, no full stop: what happened to the connection."""
    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain).lower()
    if any(isinstance(e, socket.gaierror) for e in chain) or any(h in text for h in DNS_HINTS):
        return "the host name could not be found (DNS)"
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain) or "certificate" in text:
        return "the server's TLS certificate could not be verified"
    if any(isinstance(e, ssl.SSLError) for e in chain) or "ssl" in text:
        return "the secure (TLS) connection failed"
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text:
        return "the connection was refused"
    if any(isinstance(e, ConnectionResetError | BrokenPipeError) for e in chain) or "reset by peer" in text:
        return "the connection was reset"
    if any(isinstance(e, TimeoutError | socket.timeout) for e in chain) or any("Timeout" in n for n in names):
        return "the server did not answer in time"
    if "RemoteProtocolError" in names or "incomplete" in text or "closed" in text:
        return "the server closed the connection"
    if "unreachable" in text:
        return "the network is unreachable"
    if any("Proxy" in n for n in names) or "proxy" in text:
        return "the proxy refused the connection"
    return "the connection failed"
