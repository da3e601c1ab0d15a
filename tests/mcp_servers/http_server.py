"""A streamable-HTTP MCP server on 127.0.0.1 for the tests: every request must carry the header
X-Api-Key with the key given on the command line (else 401). Prints its port, then serves until
its stdin closes or it is terminated."""

from __future__ import annotations

import json
import socket
import sys
import threading

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("http", log_level="WARNING")


@server.tool(description="Say who answered.")
def whoami(greeting: str) -> str:
    return f"{greeting} from the HTTP server"


@server.tool(description="Answer in an hour.")
async def slow() -> str:
    await anyio.sleep(3600)
    return "late"


def main() -> None:
    key = sys.argv[1]
    app = server.streamable_http_app()

    async def checked(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"x-api-key") != key.encode():
                body = json.dumps({"error": "missing or wrong X-Api-Key"}).encode()
                start = {"type": "http.response.start", "status": 401}
                await send({**start, "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections wait in the backlog until uvicorn serves them
    config = uvicorn.Config(checked, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    def stop_when_stdin_closes() -> None:
        sys.stdin.read()
        userver.should_exit = True

    threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    print(sock.getsockname()[1], flush=True)
    userver.run(sockets=[sock])


if __name__ == "__main__":
    main()
