"""The remote backend's faults, against a server that injects them (tests/helpers/sse_server.py): HTTP errors,
errors after the 200, retries, cuts, stalls, cancellation, unreachable servers, TLS, redirects and
the API key."""

from __future__ import annotations

import json
import threading
import time

import pytest

from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.errors import (
    RemoteAuthError,
    RemoteError,
    RemoteNotFound,
    RemoteServerError,
    RemoteStreamError,
    RemoteUnreachable,
)
from ember_chat.engine.inference.events import Event, Finished, Retrying, Token
from ember_chat.engine.inference.remote.backend import RETRY_DELAYS_S, RemoteBackend, check_connection
from tests.helpers.remote_support import API_KEY, HI, MODEL, PARAMS, Backends, drain, free_port, tokens
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk, sse, usage_chunk

pytestmark = pytest.mark.usefixtures("no_thread_left")


# ----- HTTP errors
@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("where", ["models", "chat"])
def test_auth_errors_mention_the_api_key(server: FakeOpenAI, backends: Backends, status: int, where: str) -> None:
    body = {"error": {"message": "Invalid API key provided", "type": "invalid_request_error", "code": "bad_key"}}
    if where == "models":
        server.fail(status, body, paths=("/v1/models",))
        with pytest.raises(RemoteAuthError) as info:
            check_connection(Endpoint("lab", server.base_url, api_key=API_KEY))
    else:
        backend = backends.make(server, api_key=API_KEY)
        server.fail(status, body)
        with pytest.raises(RemoteAuthError) as info:
            list(backend.chat(HI, PARAMS))
        assert len(server.generate_requests()) == 1  # never retried
    msg = str(info.value)
    assert "API key" in msg
    assert str(status) in msg
    assert "Invalid API key provided" in msg
    assert API_KEY not in msg


def test_404_is_not_found(server: FakeOpenAI, backends: Backends) -> None:
    backend = backends.make(server)
    server.fail(404, {"error": {"message": "The model `test-model` does not exist.", "code": 404}})
    with pytest.raises(RemoteNotFound, match="does not exist"):
        list(backend.chat(HI, PARAMS))
    assert len(server.generate_requests()) == 1


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"error": {"message": "max_tokens is too large: 99999", "type": "BadRequestError"}},
            "max_tokens is too large",
        ),
        ({"error": "context window exceeded"}, "context window exceeded"),  # llama-cpp-python style
        ({"detail": "Model is still loading"}, "Model is still loading"),  # FastAPI
        ({"detail": [{"loc": ["body", "messages"], "msg": "field required", "type": "missing"}]}, "field required"),
        ("upstream connect error or disconnect/reset before headers", "upstream connect error"),  # a proxy
    ],
)
def test_error_bodies_surface_the_servers_words(
    server: FakeOpenAI, backends: Backends, body: object, words: str
) -> None:
    backend = backends.make(server)
    server.fail(400, body)
    with pytest.raises(RemoteServerError) as info:
        list(backend.chat(HI, PARAMS))
    assert words in str(info.value)
    assert "400" in str(info.value)
    assert info.value.status == 400
    assert len(server.generate_requests()) == 1  # a 400 is not retried


def test_429_then_200_retries_once_without_duplicated_text(server: FakeOpenAI, backends: Backends) -> None:
    backend = backends.make(server)
    server.fail(429, {"error": {"message": "Too many requests"}}, headers={"Retry-After": "3"})
    server.stream([chunk("", role="assistant"), chunk("One"), chunk(" answer"), chunk(finish="stop"), DONE])
    events, fin = drain(backend.chat(HI, PARAMS))

    retrying = [e for e in events if isinstance(e, Retrying)]
    assert len(retrying) == 1
    assert retrying[0].attempt == 1
    assert retrying[0].attempts == len(RETRY_DELAYS_S)
    assert retrying[0].delay_s == 3.0  # Retry-After honoured
    assert "429" in retrying[0].reason and "Too many requests" in retrying[0].reason
    assert isinstance(events[0], Retrying)  # before anything else
    assert backends.sleeps == [3.0]
    assert fin.text == "One answer"
    assert fin.reason == "stop"
    assert len(server.generate_requests()) == 2


def test_503_on_every_attempt_gives_up_with_a_server_error(server: FakeOpenAI, backends: Backends) -> None:
    backend = backends.make(server)
    server.fail(503, "Service Unavailable", times=100)
    events: list[Event] = []
    with pytest.raises(RemoteServerError) as info:
        events.extend(backend.chat(HI, PARAMS))
    assert info.value.status == 503
    assert "503" in str(info.value) and "Service Unavailable" in str(info.value)
    assert backends.sleeps == list(RETRY_DELAYS_S)
    assert len(server.generate_requests()) == len(RETRY_DELAYS_S) + 1


def test_retry_waits_end_when_stopped(server: FakeOpenAI) -> None:
    backend = RemoteBackend(sleep=lambda _s: backend.request_stop())  # the user stops during the wait
    try:
        backend.load(RemoteModelRef(Endpoint("lab", server.base_url), MODEL))
        server.fail(503, "busy", times=100)
        events, fin = drain(backend.chat(HI, PARAMS))
        assert isinstance(events[0], Retrying)
        assert fin.reason == "cancelled"
        assert fin.text == ""
        assert len(server.generate_requests()) == 1
    finally:
        backend.close()


# ----- errors and faults after the 200
def test_error_frame_before_content_raises(server: FakeOpenAI, backends: Backends) -> None:
    backend = backends.make(server)
    server.stream(
        [chunk("", role="assistant"), sse({"error": {"message": "prompt is too long (9000 > 8192)", "code": 400}})]
    )
    with pytest.raises(RemoteServerError, match=r"prompt is too long \(9000 > 8192\)") as info:
        list(backend.chat(HI, PARAMS))
    assert info.value.status == 400
    assert len(server.generate_requests()) == 1  # a client error is not retried


def test_error_frame_without_code_before_content_is_retried(server: FakeOpenAI, backends: Backends) -> None:
    backend = backends.make(server)
    server.stream([sse({"error": {"message": "CUDA out of memory"}})])
    with pytest.raises(RemoteServerError, match="CUDA out of memory"):
        list(backend.chat(HI, PARAMS))
    assert len(server.generate_requests()) == len(RETRY_DELAYS_S) + 1


def test_error_frame_after_content_keeps_the_text(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("Partial"), chunk(" answer"), sse({"error": {"message": "engine died", "code": 500}}), DONE])
    backend = backends.make(server)
    _, fin = drain(backend.chat(HI, PARAMS))
    assert fin.reason == "interrupted"
    assert fin.text == "Partial answer"
    assert fin.error is not None and "engine died" in fin.error
    assert fin.metrics.stop_reason == "interrupted"
    assert fin.metrics.output_tokens == 2
    assert len(server.generate_requests()) == 1  # never retried after tokens


def test_stream_cut_mid_answer_keeps_the_text(server: FakeOpenAI, backends: Backends) -> None:
    server.stream(
        [chunk("One"), chunk(" two"), chunk(" three"), chunk(" four"), chunk(finish="stop"), DONE], cut_after=3
    )
    backend = backends.make(server)
    _, fin = drain(backend.chat(HI, PARAMS))
    assert fin.reason == "interrupted"
    assert fin.text == "One two three"
    assert fin.error is not None and "broke mid-answer" in fin.error
    assert len(server.generate_requests()) == 1


def test_clean_end_without_finish_reason_is_interrupted(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("Half"), chunk(" of it")])  # the chunked body ends cleanly, no finish, no [DONE]
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.reason == "interrupted"
    assert fin.text == "Half of it"
    assert fin.error is not None and "ended before the answer was complete" in fin.error


def test_stall_after_tokens_is_interrupted(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("Still"), chunk(" here"), chunk(" never"), DONE], stall_after=2)
    backend = backends.make(server, read_timeout_s=0.5)
    t0 = time.monotonic()
    _, fin = drain(backend.chat(HI, PARAMS))
    assert time.monotonic() - t0 < 5
    assert fin.reason == "interrupted"
    assert fin.text == "Still here"
    assert fin.error is not None and "stalled" in fin.error and "0.5 s" in fin.error


def test_stall_before_any_frame_raises(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("never")], stall_after=0)  # the 200 and headers, then nothing
    backend = backends.make(server, read_timeout_s=0.5)
    with pytest.raises(RemoteStreamError, match="stalled"):
        list(backend.chat(HI, PARAMS))
    assert len(server.generate_requests()) == 1


@pytest.mark.slow
def test_stall_before_the_headers_is_retried_then_fails(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("never")], stall_before_headers=True)
    backend = backends.make(server, read_timeout_s=0.3)
    events: list[Event] = []
    with pytest.raises(RemoteServerError, match=r"sent nothing for 0\.3 s"):
        events.extend(backend.chat(HI, PARAMS))
    assert sum(isinstance(e, Retrying) for e in events) == len(RETRY_DELAYS_S)
    assert len(server.generate_requests()) == len(RETRY_DELAYS_S) + 1


def test_malformed_json_after_content_is_interrupted(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("Good"), "data: {not json at all\n\n", chunk(" never"), DONE])
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.reason == "interrupted"
    assert fin.text == "Good"
    assert fin.error is not None and "malformed event" in fin.error and "not json" in fin.error


def test_malformed_json_before_content_raises(server: FakeOpenAI, backends: Backends) -> None:
    server.stream(["data: <html>502 Bad Gateway</html>\n\n"])
    with pytest.raises(RemoteStreamError, match="malformed event"):
        list(backends.make(server).chat(HI, PARAMS))


# ----- cancellation
def test_request_stop_from_another_thread_closes_the_stream(server: FakeOpenAI, backends: Backends) -> None:
    frames = [chunk(f" w{i}") for i in range(20)] + [chunk(finish="stop"), DONE]
    server.stream(frames, interval_s=2.0, pauses={1: 0.0})  # two frames at once, then one every 2 s
    backend = backends.make(server)
    got_two = threading.Event()
    stopped_at: list[float] = []

    def stopper() -> None:
        if got_two.wait(10):
            stopped_at.append(time.monotonic())
            backend.request_stop()

    thread = threading.Thread(target=stopper)
    thread.start()
    try:
        events: list[Event] = []
        for event in backend.chat(HI, PARAMS):
            events.append(event)
            if len(tokens(events)) == 2:
                got_two.set()
        finished_at = time.monotonic()
    finally:
        got_two.set()
        thread.join()
    fin = events[-1]
    assert isinstance(fin, Finished)
    assert fin.reason == "cancelled"
    assert fin.text == " w0 w1"
    assert fin.error is None
    assert stopped_at and finished_at - stopped_at[0] < 1.0  # at once, not at the next frame (2 s)
    assert server.disconnected.wait(5), "the server never saw the client leave"
    assert len(server.generate_requests()) == 1


def test_request_stop_while_waiting_for_the_headers(server: FakeOpenAI, backends: Backends) -> None:
    # e.g. llama-cpp-python's server queues a second request before it sends any header
    backend = backends.make(server, read_timeout_s=1.0)
    server.stream([chunk("never")], stall_before_headers=True)
    server.request_arrived.clear()
    stopped_at: list[float] = []

    def stopper() -> None:
        if server.request_arrived.wait(10):
            stopped_at.append(time.monotonic())
            backend.request_stop()

    thread = threading.Thread(target=stopper)
    thread.start()
    try:
        events, fin = drain(backend.chat(HI, PARAMS))
        finished_at = time.monotonic()
    finally:
        server.request_arrived.set()
        thread.join()
    assert fin.reason == "cancelled"
    assert not any(isinstance(e, Retrying) for e in events)
    assert stopped_at and finished_at - stopped_at[0] < 0.5


def test_closing_the_generator_disconnects(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk(f" w{i}") for i in range(50)] + [DONE], interval_s=0.05)
    gen = backends.make(server).chat(HI, PARAMS)
    for event in gen:
        if isinstance(event, Token):
            break
    gen.close()  # the consumer went away
    assert server.disconnected.wait(5)


# ----- reaching the server
def test_connection_refused(backends: Backends) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RemoteUnreachable, match="refused"):
        check_connection(Endpoint("lab", url))
    with pytest.raises(RemoteUnreachable, match="refused"):
        backends.make(url)


def test_unknown_host_name(backends: Backends) -> None:
    # `.invalid` never resolves (RFC 6761); it fails at once here, without network access.
    with pytest.raises(RemoteUnreachable) as info:
        check_connection(Endpoint("lab", "http://ember-test.invalid/v1"))
    assert "could not be found (DNS)" in str(info.value)
    assert "ember-test.invalid" in str(info.value)


def test_refused_after_load_is_unreachable(backends: Backends) -> None:
    fake = FakeOpenAI().start()
    try:
        backend = backends.make(fake)
    finally:
        fake.stop()
    with pytest.raises(RemoteUnreachable, match="refused"):
        list(backend.chat(HI, PARAMS))


def test_environment_proxy_is_not_used(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert [m.id for m in check_connection(Endpoint("lab", server.base_url)).models] == [MODEL]


def test_tls_self_signed_certificate_is_refused_when_verifying(tls_server: FakeOpenAI) -> None:
    with pytest.raises(RemoteUnreachable) as info:
        check_connection(Endpoint("lab", tls_server.base_url, verify_tls=True))
    assert "certificate" in str(info.value)
    assert "Connections" in str(info.value)  # says where to turn checks off


def test_tls_without_verification_works(tls_server: FakeOpenAI, backends: Backends) -> None:
    tls_server.stream([chunk("secure"), chunk(" hello"), chunk(finish="stop"), usage_chunk(3, 2), DONE])
    check = check_connection(Endpoint("lab", tls_server.base_url, verify_tls=False))
    assert [m.id for m in check.models] == [MODEL]
    backend = backends.make(tls_server, verify_tls=False)
    _, fin = drain(backend.chat(HI, PARAMS))
    assert (fin.reason, fin.text, fin.metrics.output_tokens) == ("stop", "secure hello", 2)


# ----- the API key
def test_cross_origin_redirect_drops_the_api_key(
    server: FakeOpenAI, other_server: FakeOpenAI, backends: Backends
) -> None:
    server.redirect_to = other_server.origin
    other_server.stream([chunk("from"), chunk(" elsewhere"), chunk(finish="stop"), DONE])
    backend = backends.make(server, api_key=API_KEY)  # GET /v1/models, redirected
    _, fin = drain(backend.chat(HI, PARAMS))  # POST /v1/chat/completions, redirected with its body
    assert fin.text == "from elsewhere"

    first = server.received()  # (after the answer, the backend also looks for the server's tokenizer)
    assert [r.path for r in first if r.path.startswith("/v1/")] == ["/v1/models", "/v1/chat/completions"]
    assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in first)
    second = [r for r in other_server.received() if r.path.startswith("/v1/")]
    assert [r.path for r in second] == ["/v1/models", "/v1/chat/completions"]
    assert second[1].body["model"] == MODEL
    for request in second:
        assert "authorization" not in request.headers
        assert API_KEY not in json.dumps(request.headers)


def test_api_key_is_not_in_reprs(server: FakeOpenAI) -> None:
    endpoint = Endpoint("lab", server.base_url, api_key=API_KEY)
    ref = RemoteModelRef(endpoint, MODEL)
    assert API_KEY not in repr(endpoint)
    assert API_KEY not in str(endpoint)
    assert API_KEY not in repr(ref)
    assert "lab" in repr(endpoint)


def test_no_api_key_sends_no_authorization(server: FakeOpenAI) -> None:
    check_connection(Endpoint("lab", server.base_url))
    [request] = server.received("/v1/models")
    assert "authorization" not in request.headers


def test_errors_are_remote_errors() -> None:
    for cls in (RemoteUnreachable, RemoteAuthError, RemoteNotFound, RemoteServerError, RemoteStreamError):
        assert issubclass(cls, RemoteError)


def test_chat_before_load_raises(server: FakeOpenAI) -> None:
    from ember_chat.engine.errors import NoModelLoaded

    with pytest.raises(NoModelLoaded):
        list(RemoteBackend().chat(HI, PARAMS))


QUIRKY_FIELDS = [
    # usage with figures as strings, a list and null; timings with text; details not a dict
    sse({"choices": [], "usage": {"prompt_tokens": "twelve", "completion_tokens": [3], "total_tokens": None,
                                  "prompt_tokens_details": "none",
                                  "completion_tokens_details": {"reasoning_tokens": "x"}}}),
    sse({"choices": [], "timings": {"prompt_n": "a lot", "cache_n": None, "prompt_ms": "fast", "predicted_n": 2.5,
                                    "predicted_ms": {"ms": 1}}}),
]  # fmt: skip


def test_quirky_field_types_never_turn_a_finished_answer_into_an_error(server: FakeOpenAI, backends: Backends) -> None:
    """A server that sends figures of the wrong type (strings, lists, null) still gives a finished
    answer with its text; the figures it could not read are counted by Ember itself."""
    server.stream([chunk("Fine"), chunk(" answer", finish="stop"), *QUIRKY_FIELDS, DONE])
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.reason == "stop" and fin.error is None
    assert fin.text == "Fine answer"
    assert fin.metrics.output_tokens >= 2


def test_quirky_delta_and_continuous_usage_types_are_ignored(server: FakeOpenAI, backends: Backends) -> None:
    """A delta whose content is not text, and continuous usage with a non-numeric count, are skipped,
    not a crash mid-answer."""
    server.stream([
        chunk("One"),
        sse({"choices": [{"index": 0, "delta": {"content": {"odd": 1}}}]}),
        sse({"choices": [{"index": 0, "delta": {"content": " two"}}], "usage": {"completion_tokens": "2"}}),
        chunk(finish="stop"),
        DONE,
    ])  # fmt: skip
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.reason == "stop" and fin.error is None
    assert fin.text == "One two"
