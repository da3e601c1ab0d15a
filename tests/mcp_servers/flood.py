"""A stdio MCP server that floods: at start, 2 MB on stderr and lines that are not MCP messages on
stdout (before the SDK's server takes stdout over and diverts anything else written to it to stderr);
`flood` writes megabytes more on both, then answers."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("flood")
LINE = b"x" * 1023 + b"\n"


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@server.tool(description="Flood stderr and stdout, then answer.")
def flood(megabytes: int) -> str:
    _write(2, LINE * (1024 * megabytes))
    _write(1, LINE * (1024 * megabytes))  # the SDK diverts this to stderr
    _write(2, b"flood server: the end of the flood\n")
    return "flooded"


if __name__ == "__main__":
    _write(2, LINE * 2048)
    _write(1, b"this is not an MCP message\n" * 20000)
    server.run()
