"""A stdio MCP server that hangs: `hang` starts a helper process in the server's own process group
(its pid written to stderr), then blocks the server's event loop for an hour. With --at-start it
hangs before it reads anything."""

from __future__ import annotations

import subprocess
import sys
import time

if "--at-start" in sys.argv:  # before the SDK's imports: said at once
    print("hang server: hanging before it starts", file=sys.stderr, flush=True)
    time.sleep(3600)

from mcp.server.mcpserver import MCPServer

server = MCPServer("hang")


@server.tool(description="Answer at once.")
def quick() -> str:
    return "quick answer"


@server.tool(description="Never answer.")
def hang() -> str:
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    print(f"helper pid {helper.pid}", file=sys.stderr, flush=True)
    time.sleep(3600)  # blocks the event loop: not even a cancellation gets through
    return "never"


if __name__ == "__main__":
    server.run()
