"""OpenAI's Responses API on Ember's server: POST /v1/responses (a turn: its body read as the chat route's
request, openai/responses_input.py; answered as a Response, openai/responses_output.py, streamed as typed
events), GET and DELETE /v1/responses/{id} (a stored one). `"ember": {"project": NAME}` answers in a project as
the chat route does (each turn of a chain names it: the project's instructions, like a Response's own, are not
kept in the stored conversation, nor the passages given).

The store is in memory, the server's own (`ResponseStore`): the newest MAX_KEPT responses within
MAX_BYTES, the oldest dropped first. A stored response keeps its Response and its conversation as chat
messages (the earlier turns', its input's, its answer), which a later `previous_response_id` continues.
Not SQLite: a response is a program's working state between two of its requests, not a chat of the
user's, and the window's stores hold the user's chats; a restarted server forgetting it is what
`store` promises no less than OpenAI's own expiry does."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.openai.responses_input import CHAT_TO_RESPONSES, ResponsesBody, read_body
from ember_chat.engine.openai.responses_output import ResponsesBuilder
from ember_chat.engine.serve.api_request import ApiRequest, parse_request
from ember_chat.engine.serve.event_stream import BodyWriter, NamedEventStream, SendHead
from ember_chat.engine.serve.file_reading import Reading
from ember_chat.engine.storage.presets import Preset

MAX_KEPT = 1000  # stored responses
MAX_BYTES = 64 << 20  # their JSON, all together (a conversation may carry images and files)
PREFIX = "/v1/responses/"


@dataclass(frozen=True)
class Stored:
    response: dict[str, Any]
    conversation: tuple[dict[str, Any], ...]  # chat messages: the earlier turns', its input's, its answer
    size: int


class ResponseStore:
    """The responses kept for GET, DELETE and previous_response_id (thread-safe: each connection has
    its thread)."""

    def __init__(self, max_kept: int = MAX_KEPT, max_bytes: int = MAX_BYTES) -> None:
        self._max_kept, self._max_bytes = max_kept, max_bytes
        self._items: OrderedDict[str, Stored] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    def put(self, response: dict[str, Any], conversation: list[dict[str, Any]]) -> None:
        """Keep it, dropping the oldest beyond the bounds; one larger than the whole store is not kept
        (read_turn refuses to continue a conversation that outgrew it)."""
        size = len(json.dumps(response)) + len(json.dumps(conversation))
        if size > self._max_bytes:
            return
        with self._lock:
            self._items[response["id"]] = Stored(response, tuple(conversation), size)
            self._bytes += size
            while len(self._items) > self._max_kept or (self._bytes > self._max_bytes and len(self._items) > 1):
                _, dropped = self._items.popitem(last=False)
                self._bytes -= dropped.size

    def get(self, response_id: str, param: str | None = None) -> Stored:
        with self._lock:
            stored = self._items.get(response_id)
        if stored is None:
            raise ApiError(404, f"No response with id {response_id!r} is stored on this server (store: false, "
                           "deleted, or dropped as the oldest).", param=param, code="not_found")  # fmt: skip
        return stored

    def delete(self, response_id: str) -> None:
        self.get(response_id)
        with self._lock:
            dropped = self._items.pop(response_id, None)
            self._bytes -= dropped.size if dropped is not None else 0


@dataclass(frozen=True)
class Turn:
    """One POST /v1/responses: the request for the engine, and what its Response needs."""

    request: ApiRequest
    body: ResponsesBody
    conversation: list[dict[str, Any]]  # the earlier turns' messages and this input's (no instructions)
    store: ResponseStore

    def builder(self, model: str) -> ResponsesBuilder:
        keep = None
        if self.body.store:

            def keep(response: dict[str, Any], answer: dict[str, Any]) -> None:
                self.store.put(response, [*self.conversation, answer])

        return ResponsesBuilder(model, self.body.echo, keep)


def read_turn(
    body: Any,
    store: ResponseStore,
    allow_unknown: bool = False,
    preset: Preset | None = None,
    reading: Reading | None = None,
    advice: str = CLI_UNKNOWN_FIELDS_ADVICE,
    *,
    speculative: str = "auto",
) -> Turn:
    """The turn a body asks for: the earlier conversation (previous_response_id, 404 when not stored),
    the instructions as the system message (a previous response's are not carried over, as OpenAI's),
    the input; read and checked as the chat route reads its messages and fields (`speculative`: the
    server's, parse_request's)."""
    read = read_body(body, allow_unknown, advice)
    earlier = list(store.get(read.previous_response_id, "previous_response_id").conversation) if (
        read.previous_response_id) else []  # fmt: skip
    conversation = earlier + read.messages
    if read.store and earlier and len(json.dumps(conversation)) > store.max_bytes:
        # each turn stores the whole conversation: one grown past the store would be kept by nobody
        raise ApiError(400, f"The conversation through previous_response_id has grown past the {store.max_bytes:,} "
                       "bytes this server keeps for stored responses; start a new one (or send store: false).",
                       param="previous_response_id")  # fmt: skip
    system = [{"role": "system", "content": read.instructions}] if read.instructions else []
    try:
        request = parse_request("chat", {**read.chat, "messages": system + conversation}, False, preset, reading,
                                advice, speculative=speculative)  # fmt: skip
    except ApiError as exc:
        param = CHAT_TO_RESPONSES.get(exc.param or "", exc.param)
        message = exc.message
        if param == "max_output_tokens":  # (SamplingParams names it as people read it: "max tokens")
            message = message.replace("max_tokens", param).replace("max tokens", param)
        if exc.param == "messages":
            message = "input (with the earlier turns, as chat messages): " + message
        raise ApiError(exc.status, message, exc.type, param=param, code=exc.code, headers=exc.headers) from None
    return Turn(replace(request, include_usage=False), read, conversation, store)


class ResponsesStream(NamedEventStream):
    """A Response's event stream: each event with its sequence_number; an error is an `error` event."""

    def __init__(self, send_head: SendHead, body: BodyWriter, out: ResponsesBuilder) -> None:
        super().__init__(send_head, body, out)
        self._sequence = 0

    def error_events(self, error: ApiError) -> list[dict[str, Any]]:
        body = error.body()  # its `error` too: the openai client raises on an event that has one
        return [{"type": "error", "code": error.code, "message": error.message, "param": error.param, **body}]

    def frame(self, event: dict[str, Any]) -> dict[str, Any]:
        self._sequence += 1
        return {**event, "sequence_number": self._sequence - 1}


SendJson = Callable[[int, dict[str, Any]], None]


def stored_route(method: str, path: str, store: ResponseStore, send_json: SendJson) -> Callable[[], None]:
    """GET or DELETE /v1/responses/{id}."""
    response_id = path.removeprefix(PREFIX)
    if not response_id or "/" in response_id:
        raise ApiError(404, f"Unknown endpoint {path}.", code="not_found")
    if method == "GET":
        return lambda: send_json(200, store.get(response_id).response)
    if method == "DELETE":

        def delete() -> None:
            store.delete(response_id)
            send_json(200, {"id": response_id, "object": "response", "deleted": True})

        return delete
    raise ApiError(405, f"{method} is not allowed on {path}.")
