"""The engine queue behind Ember's API server, with a slow fake engine: a client that disconnects
cancels its generation, concurrent clients queue, a full queue answers 429, and the window's chat
takes its turn among API requests."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

import httpx2
import openai
import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.inference.service.engine import GenerationRequest, QueueState
from tests.helpers.api_support import MESSAGES, WAIT_S, FakeSetup, assert_api_error, fake_text
from tests.helpers.fake_backend import WORDS
from tests.helpers.sinks import RecordingSink

# ----- the engine queue behind the server (slow FakeBackend)


def test_closing_the_stream_cancels_the_generation(fake: Callable[..., FakeSetup]) -> None:
    setup = fake(n_tokens=100_000, delay_s=0.01)
    with setup.client() as client:
        stream = client.chat.completions.create(model="fake", messages=MESSAGES, stream=True)
        with stream:
            chunks = [next(stream) for _ in range(4)]
            assert chunks[0].choices[0].delta.role == "assistant"
            assert "".join(c.choices[0].delta.content or "" for c in chunks[1:]).startswith(WORDS[0].strip())
            t0 = time.perf_counter()
        setup.watcher.wait_for(lambda: bool(setup.watcher.done), "the cancelled request", timeout=2.0)
        elapsed = time.perf_counter() - t0
    (record,) = setup.watcher.done
    assert record.reason == "cancelled"
    assert record.client == "api"
    assert elapsed < 2.0
    assert record.metrics is not None and record.metrics.output_tokens < 1000
    assert setup.service.queue_state() == QueueState(None, ())


def test_disconnecting_a_non_streaming_request_cancels_it(fake: Callable[..., FakeSetup]) -> None:
    setup = fake(n_tokens=100_000, delay_s=0.01, gated=True)
    body = json.dumps({"model": "fake", "messages": MESSAGES}).encode()
    with socket.create_connection(("127.0.0.1", setup.server.port), timeout=WAIT_S) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        running = setup.watcher.wait_counts("api", 1, 0)
    assert running.running is not None
    t0 = time.perf_counter()
    setup.gate.set()
    record = setup.watcher.wait_done(running.running.id)  # tokens flow again: it must notice anyway
    assert record.reason == "cancelled"
    assert time.perf_counter() - t0 < 2.0
    assert record.metrics is not None and record.metrics.output_tokens < 50


def test_concurrent_clients_are_queued(fake: Callable[..., FakeSetup]) -> None:
    setup = fake(n_tokens=5, delay_s=0.001, gated=True)
    tasks = [setup.spawn(setup.stream_chat)]
    setup.watcher.wait_counts("api", 1, 0)
    tasks += [setup.spawn(setup.stream_chat) for _ in range(2)]
    state = setup.watcher.wait_counts("api", 1, 2)  # one runs (paused), the others wait
    assert state.running is not None and state.running.state == "running"
    assert all(r.state == "queued" and r.client == "api" for r in state.queued)
    assert setup.service.queue_state().count("api") == (1, 2)  # stable: the running one is paused
    with httpx2.Client(timeout=WAIT_S) as http:
        assert http.get(f"http://127.0.0.1:{setup.server.port}/health").json()["queued"] == 2
    setup.gate.set()
    for task in tasks:
        assert task.value() == (fake_text(5), "length")
    assert [r.reason for r in setup.watcher.done] == ["length"] * 3
    assert setup.service.queue_state() == QueueState(None, ())


def test_full_queue_is_429(fake: Callable[..., FakeSetup]) -> None:
    setup = fake(n_tokens=3, queue_limit=1, gated=True)
    first = setup.spawn(setup.stream_chat)
    setup.watcher.wait_counts("api", 1, 0)
    second = setup.spawn(setup.stream_chat)
    setup.watcher.wait_counts("api", 1, 1)
    with setup.client() as client, pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="fake", messages=MESSAGES, stream=True)
    assert_api_error(info.value, 429)
    assert info.value.code == "queue_full"
    setup.gate.set()
    assert first.value() == (fake_text(3), "length")
    assert second.value() == (fake_text(3), "length")
    assert len(setup.watcher.done) == 2  # the refused request never reached the queue


def test_window_request_is_not_starved_by_api_requests(fake: Callable[..., FakeSetup]) -> None:
    setup = fake(n_tokens=3, gated=True)
    tasks = [setup.spawn(setup.stream_chat)]
    setup.watcher.wait_counts("api", 1, 0)
    tasks += [setup.spawn(setup.stream_chat) for _ in range(3)]
    setup.watcher.wait_counts("api", 1, 3)

    sink = RecordingSink()
    window_id = setup.service.submit(
        GenerationRequest(
            params=SamplingParams(max_tokens=3),
            sink=sink,
            messages=[ChatMessage("user", "hi")],
            client="window",
        )
    )
    setup.gate.set()
    for task in tasks:
        assert task.value() == (fake_text(3), "length")
    assert sink.done.wait(WAIT_S) and sink.reason == "length"
    setup.watcher.wait_done(window_id)
    order = [r.client for r in setup.watcher.done]
    assert sorted(order) == ["api"] * 4 + ["window"]
    # the API request that was running, then at most one more API request, then the window's
    assert order.index("window") <= 2, order


def test_client_that_leaves_while_queued_is_dropped(fake: Callable[..., FakeSetup]) -> None:
    setup = fake(n_tokens=3, gated=True)
    first = setup.spawn(setup.stream_chat)
    setup.watcher.wait_counts("api", 1, 0)

    body = json.dumps({"model": "fake", "messages": MESSAGES, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", setup.server.port), timeout=WAIT_S) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        state = setup.watcher.wait_counts("api", 1, 1)
    (queued,) = state.queued
    record = setup.watcher.wait_done(queued.id)  # gone while the first request is still paused
    assert record.reason == "cancelled"
    assert record.metrics is None
    assert not setup.watcher.ran(queued.id)
    assert setup.service.queue_state().count("api") == (1, 0)

    setup.gate.set()
    assert first.value() == (fake_text(3), "length")
    assert [r.reason for r in setup.watcher.done] == ["cancelled", "length"]
