"""A streamed answer on the wire: one `200 text/event-stream` response in chunked transfer encoding,
`data: {json}` events, and `data: [DONE]` (after an error event, when it failed) to end it. An
error that comes before it is opened is a response of its own, with its own status."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import BufferedIOBase
from typing import Any

from ember_chat.engine.openai.api_error import ApiError

# in this order on the wire (the handler adds its CORS headers and its id after them)
HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",  # a proxy in front must not hold tokens back
    "Transfer-Encoding": "chunked",
}

SendHead = Callable[[int, dict[str, str]], None]  # sends a status line and these headers, then ends the headers


class EventStream:
    """One response's event stream. `send_head`: the connection's status line and headers (its
    handler's, which add what every response carries); `wfile`: where the body goes. `done`: it ends
    with `data: [DONE]` (OpenAI's streams; llama-server's own, /infill's, end with their last event)."""

    def __init__(self, send_head: SendHead, wfile: BufferedIOBase, done: bool = True) -> None:
        self._send_head = send_head
        self._wfile = wfile
        self._done = done
        self.opened = False  # its 200 has been sent: an error now can only be an event

    def open(self) -> None:
        self.opened = True
        self._send_head(200, HEADERS)

    def event(self, obj: dict[str, Any] | None) -> None:
        if obj is not None:
            self._chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

    def end(self, error: ApiError | None) -> None:
        if error is not None:  # the openai client raises on it
            self.event(error.body())
        if self._done:
            self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")  # the chunked encoding's last chunk

    def _chunk(self, data: bytes) -> None:
        self._wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self._wfile.flush()
