"""Which hosts only this computer can reach: one answer for the API server's bind check (no key needed
there), a connection's plain-http warning and the check that `serve --remote` does not lead back to
itself."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for a name or address that never leaves this computer: 127.0.0.0/8, ::1 and IPv4-mapped
    ::ffff:127.x (a dual-stack socket's loopback), and the names RFC 6761 reserves for it ("localhost"
    and every name under it). Written as a URL or a user types it: case, surrounding spaces, [brackets]
    around an IPv6 address and a name's final dot ("localhost.") do not matter. Any other name is not
    (it may resolve anywhere: "localhost.localdomain" is only a hosts-file custom), nor is 0.0.0.0 or
    "::" (every interface)."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        name = name.removesuffix(".")
        return name == "localhost" or name.endswith(".localhost")
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback  # (Python before 3.13 says False)
    return address.is_loopback
