"""Streamable HTTP to an MCP server through the official SDK's `streamable_http_client`, with the
server's headers (plain ones from the settings, secret ones from the keychain) and a record of what
the HTTP layer saw (status, connection failure), because the SDK reports a refused request only as
"Server returned an error response" and Ember must say why in words."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio.abc
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT

CONNECT_TIMEOUT_S = 10.0


@dataclass
class HttpTrace:
    """The last HTTP status the server answered, and the last failure to reach it."""

    status: int | None = None
    failure: str | None = None


class _TracingTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, trace: HttpTrace) -> None:
        self._inner = inner
        self._trace = trace

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TimeoutException:
            self._trace.failure = "it did not answer in time"
            raise
        except httpx2.TransportError as exc:
            self._trace.failure = f"it could not be reached ({exc or type(exc).__name__})"
            raise
        if request.method == "POST" or response.status_code >= 400:
            self._trace.status = response.status_code
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def http_transport(
    url: str, headers: dict[str, str], trace: HttpTrace
) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream, anyio.abc.ObjectSendStream]]:
    client = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(CONNECT_TIMEOUT_S, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=_TracingTransport(httpx2.AsyncHTTPTransport(), trace),
    )
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


def http_refusal(server: str, trace: HttpTrace) -> str | None:
    """What the HTTP layer says went wrong, as a sentence; None when it saw nothing wrong."""
    status = trace.status
    if status in (401, 403):
        return (
            f"The MCP server {server!r} refused Ember (HTTP {status}): its token or headers are missing or wrong. "
            "Check the headers in Settings ▸ Tools."
        )
    if status == 404:
        return f"The MCP server {server!r} has no MCP endpoint at that address (HTTP 404); check its URL."
    if status is not None and status >= 400:
        return f"The MCP server {server!r} answered with HTTP error {status}."
    if trace.failure:
        return f"The MCP server {server!r} could not be used: {trace.failure}. Check its URL and that it is running."
    return None
