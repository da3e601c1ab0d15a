"""A streamed answer on the wire: one `200 text/event-stream` response (chunked by the HTTP server),
`data: {json}` events, and `data: [DONE]` (after an error event, when it failed) to end it. An
error that comes before it is opened is a response of its own, with its own status."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from ember_chat.engine.openai.api_error import ApiError

# in this order on the wire (the handler adds its CORS headers and its id after them)
HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",  # a proxy in front must not hold tokens back
}

SendHead = Callable[[int, dict[str, str]], None]  # sends a status line and these headers, then ends the headers


class BodyWriter(Protocol):
    """Where a response's body goes as it comes: each write sent at once, `end` its last."""

    def write(self, data: bytes) -> None: ...

    def end(self) -> None: ...


class EventStream:
    """One response's event stream. `send_head`: the connection's status line and headers (its
    handler's, which add what every response carries); `body`: where the body goes. `done`: it ends
    with `data: [DONE]` (OpenAI's streams; llama-server's own, /infill's, end with their last event)."""

    def __init__(self, send_head: SendHead, body: BodyWriter, done: bool = True) -> None:
        self._send_head = send_head
        self._body = body
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
        self._body.end()

    def _chunk(self, data: bytes) -> None:
        self._body.write(data)


def named_event(event: dict[str, Any]) -> bytes:
    """One named event on the wire: its `event:` line (its type) and its JSON."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


class EventsBuilder(Protocol):
    def opening(self) -> list[dict[str, Any]]: ...


class NamedEventStream(EventStream):
    """A stream of named events and no [DONE] (the Responses and Messages APIs'): `out` gives the events
    that open the answer, each chunk is `{"events": [...]}`, and an error is the events `error_events`
    says (each API's shape: its client raises on them)."""

    def __init__(self, send_head: SendHead, body: BodyWriter, out: EventsBuilder) -> None:
        super().__init__(send_head, body, done=False)
        self._out = out

    def open(self) -> None:
        super().open()
        self._write(self._out.opening())

    def event(self, obj: dict[str, Any] | None) -> None:
        if obj is not None:
            self._write(obj["events"])

    def end(self, error: ApiError | None) -> None:
        if error is not None:
            self._write(self.error_events(error))
        super().end(None)

    def error_events(self, error: ApiError) -> list[dict[str, Any]]:
        raise NotImplementedError

    def frame(self, event: dict[str, Any]) -> dict[str, Any]:
        """The event as it goes on the wire (a stream may number them)."""
        return event

    def _write(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self._chunk(named_event(self.frame(event)))
