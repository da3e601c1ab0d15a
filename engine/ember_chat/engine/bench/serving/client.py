"""One request of the serving lab: a streamed chat completion, timed as it arrives.

TTFT is from the moment the request is sent to its first content chunk; ITL the gaps between content
chunks (a chunk may hold several tokens: vLLM's benchmark counts it the same way); TPOT the decode time
over the tokens after the first; E2E latency to the end of the stream. The output tokens are the
server's usage figure (`stream_options.include_usage`) when it gives one, else the content chunks.
What the server says of its own timing (llama.cpp's `timings`, Ember's `ember` metrics) is kept beside.

Every failure is a result with its reason, never an exception: the server down or refusing, a status
other than 200, a body that is not the stream it should be, a stream that stalls (no byte for the read
timeout) or ends without its end."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from ember_chat.engine.bench.serving.workload import RequestSpec, ToolCall, TurnEnd


@dataclass
class RequestResult:
    index: int
    scheduled_s: float  # when it was due, from the run's start (closed loop: when it was sent)
    sent_s: float = 0.0
    ok: bool = False
    error: str | None = None
    ttft_s: float | None = None
    e2el_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    itl_s: list[float] = field(default_factory=list)
    answer: str = ""  # the content streamed (a multi-turn workload sends it back as the assistant's turn)
    server: dict[str, Any] | None = None  # the server's own timings, as it gave them
    tool_calls: tuple[ToolCall, ...] = ()  # the calls it answered with (a tool workload sends their results back)
    turn: TurnEnd | None = None  # the user's turn this request's answer ended (the tools workload)

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.e2el_s is None or self.output_tokens < 2:
            return None
        return (self.e2el_s - self.ttft_s) / (self.output_tokens - 1)


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text[:160] + ("…" if len(text) > 160 else "")


# Bounds on what a server may send: a line of the stream (an event), an error's body, and a request's
# whole time (a server that trickles a byte now and then never trips the read timeout).
MAX_LINE_BYTES = 1 << 20
MAX_ERROR_BYTES = 64 << 10
DEADLINE_S = 900.0


class _Refused(Exception):
    """The stream broke a bound or was cancelled: the request fails with this reason."""


def sse_lines(chunks: Iterator[bytes], cancel: threading.Event | None = None) -> Iterator[str]:
    """The lines of a server-sent-event stream: ended by LF or CRLF only (JSON may hold U+2028, U+2029
    and U+0085 unescaped, which str.splitlines would split at), each at most MAX_LINE_BYTES."""
    pending = b""
    for chunk in chunks:
        if cancel is not None and cancel.is_set():
            raise _Refused("cancelled")
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r").decode("utf-8", "replace")
        if len(pending) > MAX_LINE_BYTES:
            raise _Refused(f"the server sent a line of more than {MAX_LINE_BYTES:,} bytes")
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8", "replace")


def _error_body(response: httpx2.Response) -> str:
    body = b""
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) >= MAX_ERROR_BYTES:
            break
    return body[:MAX_ERROR_BYTES].decode("utf-8", "replace")


def stream_chat(
    client: httpx2.Client,
    base_url: str,
    model: str,
    spec: RequestSpec,
    result: RequestResult,
    start: float,
    api_key: str | None = None,
    cancel: threading.Event | None = None,
    deadline_s: float = DEADLINE_S,
) -> RequestResult:
    """Send `spec` to base_url's /chat/completions and fill `result` (times from `start`, a
    time.perf_counter() reading). Never raises for what the server does: every failure is the result's
    error. A cancel ends the stream at its next bytes."""
    try:
        return _stream(client, base_url, model, spec, result, start, api_key, cancel, deadline_s)
    except _Refused as exc:
        result.error = str(exc)
    except Exception as exc:  # (a server's event of an unexpected shape: the request fails, the run goes on)
        result.error = f"the server's answer could not be read: {exc.__class__.__name__}: {_snippet(str(exc))}"
    result.ok = False
    return result


def _stream(
    client: httpx2.Client,
    base_url: str,
    model: str,
    spec: RequestSpec,
    result: RequestResult,
    start: float,
    api_key: str | None,
    cancel: threading.Event | None,
    deadline_s: float,
) -> RequestResult:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    chunks = 0
    last: float | None = None
    sent = time.perf_counter()
    result.sent_s = sent - start
    finished = False
    parts: list[str] = []
    calls: dict[int, list[str]] = {}  # (a call's index: [id, name, arguments so far])
    try:
        with client.stream(
            "POST", f"{base_url.rstrip('/')}/chat/completions", json=spec.body(model), headers=headers
        ) as response:
            if response.status_code != 200:
                result.error = f"HTTP {response.status_code}: {_snippet(_error_body(response))}"
                return result
            for line in sse_lines(response.iter_bytes(), cancel):
                if time.perf_counter() - sent > deadline_s:
                    raise _Refused(f"the answer took more than {deadline_s:g} s")
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    finished = True
                    break
                try:
                    event = json.loads(data)
                except json.JSONDecodeError:
                    result.error = f"the stream is not JSON events: {_snippet(data)}"
                    return result
                if not isinstance(event, dict):
                    result.error = f"the stream is not JSON objects: {_snippet(data)}"
                    return result
                if "error" in event:
                    result.error = f"the server said: {_snippet(json.dumps(event['error']))}"
                    return result
                now = time.perf_counter()
                if _has_content(event, parts, calls):
                    chunks += 1
                    if last is None:
                        result.ttft_s = now - sent
                    else:
                        result.itl_s.append(now - last)
                    last = now
                _read_usage(event, result)
    except httpx2.TimeoutException:
        result.error = "the server stalled: nothing came within the read timeout"
        return result
    except httpx2.HTTPError as exc:
        result.error = f"the request failed: {exc.__class__.__name__}: {_snippet(str(exc)) or 'no reason given'}"
        return result
    if not finished:
        result.error = "the stream ended without [DONE]"
        return result
    if result.ttft_s is None:
        result.error = "the answer had no content"
        return result
    result.e2el_s = time.perf_counter() - sent
    result.answer = "".join(parts)
    result.tool_calls = tuple(ToolCall(i or f"call_{n}", name, args) for n, (i, name, args) in sorted(calls.items()))
    result.output_tokens = result.output_tokens or chunks
    result.ok = True
    return result


def _has_content(event: dict[str, Any], parts: list[str], calls: dict[int, list[str]]) -> bool:
    """Whether the event carries text or a tool call (reasoning counts: it is generated tokens); its
    answer text is added to `parts`, its tool calls' pieces to `calls` (by their index)."""
    found = False
    for choice in event.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        # (vLLM, Ollama and OpenRouter stream thinking as `reasoning`, llama.cpp's server as `reasoning_content`)
        if isinstance(delta, dict) and (
            delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
        ):
            found = True
            if isinstance(delta.get("content"), str):
                parts.append(delta["content"])
        for call in (delta.get("tool_calls") or ()) if isinstance(delta, dict) else ():
            if not isinstance(call, dict):
                continue
            found = True
            index = call.get("index") if isinstance(call.get("index"), int) else len(calls)
            entry = calls.setdefault(index, ["", "", ""])
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            for slot, piece in enumerate((call.get("id"), function.get("name"), function.get("arguments"))):
                if isinstance(piece, str):
                    entry[slot] = entry[slot] + piece if slot == 2 else entry[slot] or piece
    return found


def _read_usage(event: dict[str, Any], result: RequestResult) -> None:
    usage = event.get("usage")
    if isinstance(usage, dict):
        if isinstance(usage.get("completion_tokens"), int):
            result.output_tokens = usage["completion_tokens"]
        if isinstance(usage.get("prompt_tokens"), int):
            result.prompt_tokens = usage["prompt_tokens"]
    for key in ("timings", "ember"):  # llama.cpp's server, Ember's
        if isinstance(event.get(key), dict):
            result.server = {"source": key, **event[key]}
