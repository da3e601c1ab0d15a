"""The remote backend (`RemoteBackend`, `check_connection`, its error types) against a real HTTP server
on 127.0.0.1 that scripts each answer and injects faults (tests/sse_server.py): stream shapes of real
servers (vLLM, llama.cpp, SGLang, Ollama, llama-cpp-python), metrics, errors before and after the
200, retries, cuts, stalls, cancellation, TLS, redirects and the API key."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ember_chat.engine.inference.backend import Endpoint, RemoteModelRef
from ember_chat.engine.inference.events import Event, Finished, PromptReady, Retrying, Token
from ember_chat.engine.inference.messages import ChatMessage
from ember_chat.engine.inference.params import SamplingParams
from ember_chat.engine.inference.remote import (
    RETRY_DELAYS_S,
    RemoteAuthError,
    RemoteBackend,
    RemoteError,
    RemoteNotFound,
    RemoteServerError,
    RemoteStreamError,
    RemoteUnreachable,
    check_connection,
)

from tests.sse_server import DONE, PING, FakeOpenAI, chunk, sse, text_chunk, usage_chunk

MODEL = "test-model"
HI = [ChatMessage("user", "Hi")]
PARAMS = SamplingParams(temperature=0.3, max_tokens=64, seed=7, stop=("</s>", "\nUser:"))
API_KEY = "sk-test-5ecret-do-not-leak"


# ----- fixtures and helpers
@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    """Every server thread (accept loop and request handlers) is joined by the end of each test."""
    yield
    left = [t.name for t in threading.enumerate() if "process_request" in t.name or t.name.startswith("fake-openai")]
    assert not left, left


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def other_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


class Backends:
    """Makes loaded backends whose retry waits are recorded instead of slept; closes them all."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self._made: list[RemoteBackend] = []

    def endpoint(self, server: FakeOpenAI | str, **kw: object) -> Endpoint:
        url = server if isinstance(server, str) else server.base_url
        return Endpoint("lab", url, **kw)  # type: ignore[arg-type]

    def make(self, server: FakeOpenAI | str, model: str = MODEL, **kw: object) -> RemoteBackend:
        backend = RemoteBackend(sleep=self.sleeps.append)
        self._made.append(backend)
        backend.load(RemoteModelRef(self.endpoint(server, **kw), model))
        return backend

    def close(self) -> None:
        for backend in self._made:
            backend.close()


@pytest.fixture
def backends(server: FakeOpenAI) -> Iterator[Backends]:
    made = Backends()
    yield made
    made.close()  # before the servers stop


def drain(events: Iterator[Event]) -> tuple[list[Event], Finished]:
    out = list(events)
    assert out, "no events"
    assert isinstance(out[-1], Finished), out[-1]
    assert sum(isinstance(e, Finished) for e in out) == 1
    return out, out[-1]


def tokens(events: list[Event]) -> list[Token]:
    return [e for e in events if isinstance(e, Token)]


def free_port() -> int:
    """A port nothing listens on: bound, read, closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """A server context with a self-signed certificate for 127.0.0.1, made now."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(Path(cert_file), Path(key_file))
    return ctx


@pytest.fixture
def tls_server(tls_context: ssl.SSLContext) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(tls=tls_context) as fake:
        yield fake


# ----- the happy path and the stream shapes of real servers
def test_happy_path_text_metrics_and_request(server: FakeOpenAI, backends: Backends) -> None:
    server.stream(
        [
            chunk("", role="assistant"),  # vLLM/SGLang: a role-only first chunk
            chunk("Hello there"),
            chunk(" brave new"),
            chunk(" world."),
            chunk(finish="stop"),
            usage_chunk(prompt=12, completion=7, cached=4),
            DONE,
        ],
        pauses={1: 0.2},  # between the role chunk and the first content
        interval_s=0.02,
    )
    backend = backends.make(server)
    events, fin = drain(backend.chat(HI, PARAMS))

    assert [type(e) for e in events] == [PromptReady, Token, Token, Token, Finished]
    assert [t.text for t in tokens(events)] == ["Hello there", " brave new", " world."]
    assert fin.reason == "stop"
    assert fin.error is None
    assert fin.text == "Hello there brave new world."
    m = fin.metrics
    assert m.output_tokens == 7
    assert m.token_count == "exact"
    assert m.prompt_tokens == 12
    assert m.prompt_tokens_reused == 4
    assert m.ttft_s is not None and m.ttft_s >= 0.2  # the first content, not the role chunk
    assert m.ttft_s < m.e2e_s
    assert m.itl_p50_ms is not None and m.itl_p95_ms is not None and m.itl_p99_ms is not None
    assert m.decode_tokens_per_s is not None and m.decode_tokens_per_s > 0
    assert m.connection == "lab"
    assert m.backend == "remote"
    assert m.model == MODEL
    assert m.n_ctx == 8192  # the server's max_model_len
    assert m.stop_reason == "stop"
    assert m.server_timings == {
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 7,
            "total_tokens": 19,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
        "timings": {},
    }

    [request] = server.generate_requests()
    assert request.path == "/v1/chat/completions"
    assert request.headers["accept"] == "text/event-stream"
    body = request.body
    assert body["model"] == MODEL
    assert body["messages"] == [{"role": "user", "content": "Hi"}]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 64
    assert body["temperature"] == 0.3
    assert body["stop"] == ["</s>", "\nUser:"]
    assert body["seed"] == 7
    assert body["repeat_penalty"] == body["repetition_penalty"] == 1.0
    assert "continue_final_message" not in body


def test_no_usage_counts_one_token_per_chunk_estimated(server: FakeOpenAI, backends: Backends) -> None:
    # llama-cpp-python's server: role in the first content chunk, no usage ever.
    server.stream([chunk("The", role="assistant"), chunk(" cat"), chunk(" sat."), chunk(finish="stop"), DONE])
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.reason == "stop"
    assert fin.text == "The cat sat."
    assert fin.metrics.token_count == "estimated"
    assert fin.metrics.output_tokens == 3
    assert fin.metrics.prompt_tokens == 0
    assert fin.metrics.server_timings is None
    assert "~3 tokens" in fin.metrics.summary_line()


def test_llama_cpp_timings_on_the_last_chunk(server: FakeOpenAI, backends: Backends) -> None:
    timings = {"cache_n": 3, "prompt_n": 9, "prompt_ms": 45.5, "predicted_n": 6, "predicted_ms": 80.25}
    server.stream(
        [
            chunk(None, role="assistant"),  # llama.cpp: content null
            chunk("Bonjour"),
            chunk(" le monde"),
            chunk(finish="stop", timings=timings),
            DONE,
        ]
    )
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    m = fin.metrics
    assert fin.text == "Bonjour le monde"
    assert m.output_tokens == 6
    assert m.token_count == "exact"
    assert m.prompt_tokens == 12  # prompt_n + cache_n
    assert m.prompt_tokens_reused == 3
    assert m.llama_prefill_ms == 45.5
    assert m.llama_prefill_tokens == 9
    assert m.llama_decode_ms == 80.25
    assert m.llama_decode_tokens == 6
    assert m.server_timings == {"usage": {}, "timings": timings}


def test_vllm_continuous_usage_gives_per_chunk_counts(server: FakeOpenAI, backends: Backends) -> None:
    usage1 = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    usage2 = {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}
    server.stream(
        [chunk("A", usage=usage1), chunk(" bundled three", usage=usage2), chunk(finish="stop"), usage_chunk(5, 4), DONE]
    )
    events, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert [t.count for t in tokens(events)] == [1, 3]
    assert fin.metrics.output_tokens == 4
    assert fin.metrics.token_count == "exact"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_is_wrapped_in_think_tags(server: FakeOpenAI, backends: Backends, field: str) -> None:
    server.stream(
        [
            chunk("", role="assistant"),
            chunk(**{field: "Let me"}),
            chunk(**{field: " think."}),
            chunk("The answer"),
            chunk(" is 4."),
            chunk(finish="stop"),
            DONE,
        ]
    )
    events, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.text == "<think>\nLet me think.\n</think>\n\nThe answer is 4."
    assert "".join(t.text for t in tokens(events)) == fin.text
    assert fin.metrics.ttft_s is not None  # reasoning counts as the first token


def test_reasoning_only_answer_closes_the_think_tag(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk(reasoning_content="Hmm"), chunk(finish="length"), DONE])
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.text == "<think>\nHmm\n</think>\n"
    assert fin.reason == "length"


def test_completion_mode_uses_v1_completions(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([text_chunk("Once"), text_chunk(" upon"), text_chunk(" a time", finish="length"), DONE])
    events, fin = drain(backends.make(server).complete("Tell me a story:", PARAMS))
    assert fin.text == "Once upon a time"
    assert fin.reason == "length"
    assert len(tokens(events)) == 3
    [request] = server.generate_requests()
    assert request.path == "/v1/completions"
    assert request.body["prompt"] == "Tell me a story:"
    assert "messages" not in request.body
    assert request.body["stream"] is True


def test_continuing_an_assistant_message_sends_vllm_flags(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk(" more"), chunk(finish="stop"), DONE])
    msgs = [ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello and")]
    _, fin = drain(backends.make(server).chat(msgs, PARAMS))
    assert fin.text == " more"
    [request] = server.generate_requests()
    assert request.body["continue_final_message"] is True
    assert request.body["add_generation_prompt"] is False


@pytest.mark.parametrize(("sent", "reason"), [("length", "length"), ("eos", "stop"), ("abort", "cancelled")])
def test_finish_reasons_are_mapped(server: FakeOpenAI, backends: Backends, sent: str, reason: str) -> None:
    server.stream([chunk("x"), chunk(finish=sent), DONE])
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.reason == reason


def test_finish_reason_without_done_is_a_complete_answer(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk("Fine"), chunk(finish="stop")])  # a llama.cpp fork that omitted [DONE]
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert (fin.reason, fin.text, fin.error) == ("stop", "Fine", None)


def test_ping_comments_are_ignored(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([PING, chunk("a"), PING, ": keep-alive\n\n", chunk("b"), chunk(finish="stop"), PING, DONE])
    events, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.text == "ab"
    assert fin.reason == "stop"
    assert len(tokens(events)) == 2


def test_a_2_mb_chunk_arrives_intact(server: FakeOpenAI, backends: Backends) -> None:
    big = "".join(f"{i:07d}é " for i in range(210_000))
    assert len(big.encode()) > 2 * 1024 * 1024
    server.stream([chunk("<"), chunk(big), chunk(">"), chunk(finish="stop"), DONE])
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.text == "<" + big + ">"
    assert fin.reason == "stop"


def test_crlf_line_endings(server: FakeOpenAI, backends: Backends) -> None:
    # sse-starlette (llama-cpp-python's server) separates lines with \r\n
    frames = [f.replace("\n", "\r\n") for f in (chunk("Hi", role="assistant"), chunk(" you"), chunk(finish="stop"))]
    server.stream([*frames, ": ping\r\n\r\n", "data: [DONE]\r\n\r\n"])
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert (fin.reason, fin.text) == ("stop", "Hi you")


def test_utf8_split_across_network_reads(server: FakeOpenAI, backends: Backends) -> None:
    text = "héllo wörld 🌍 done"
    frame = ("data: " + json.dumps({"choices": [{"delta": {"content": text}}]}, ensure_ascii=False) + "\n\n").encode()
    cut = frame.index("🌍".encode()) + 2  # inside the 4-byte emoji
    server.stream([frame[:cut], frame[cut:], chunk(finish="stop"), DONE], pauses={1: 0.05})
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.text == text
    assert "\ufffd" not in fin.text


@pytest.mark.parametrize(
    "last",
    [
        sse({"choices": None, "usage": {"prompt_tokens": 4, "completion_tokens": 5}}),  # choices null
        sse({"usage": {"prompt_tokens": 4, "completion_tokens": 5}}),  # choices missing
        chunk(finish="stop", usage={"prompt_tokens": 4, "completion_tokens": 5}),  # older SGLang: on the finish chunk
    ],
    ids=["choices-null", "choices-missing", "on-finish-chunk"],
)
def test_usage_chunk_variants(server: FakeOpenAI, backends: Backends, last: str) -> None:
    server.stream([chunk("a b"), chunk(" c d e"), chunk(finish="stop"), last, DONE])
    _, fin = drain(backends.make(server).chat(HI, PARAMS))
    assert fin.text == "a b c d e"
    assert fin.reason == "stop"
    assert (fin.metrics.output_tokens, fin.metrics.token_count, fin.metrics.prompt_tokens) == (5, "exact", 4)


# ----- connection checks and loading
def test_check_connection_lists_models_and_round_trip(server: FakeOpenAI) -> None:
    server.models = [
        {"id": "meta/llama-3-8b", "object": "model", "owned_by": "vllm", "max_model_len": 32768},
        {"id": "qwen", "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx_train": 40960}},
        {"id": "plain", "object": "model"},
    ]
    check = check_connection(Endpoint("lab", server.base_url, api_key=API_KEY))
    assert [(m.id, m.n_ctx, m.owned_by) for m in check.models] == [
        ("meta/llama-3-8b", 32768, "vllm"),
        ("qwen", 40960, "llamacpp"),
        ("plain", None, None),
    ]
    assert 0 < check.round_trip_s < 5
    [request] = server.received("/v1/models")
    assert request.method == "GET"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"


def test_load_describes_the_served_model(server: FakeOpenAI) -> None:
    backend = RemoteBackend()
    try:
        desc = backend.load(RemoteModelRef(Endpoint("lab", server.base_url), MODEL))
        assert backend.loaded
        assert (desc.name, desc.backend, desc.n_ctx, desc.source) == (MODEL, "remote", 8192, "lab")
        assert desc.is_remote
    finally:
        backend.close()
    assert not backend.loaded


def test_load_of_a_model_the_server_does_not_serve(server: FakeOpenAI) -> None:
    server.models = [{"id": "alpha", "object": "model"}, {"id": "beta", "object": "model"}]
    backend = RemoteBackend()
    with pytest.raises(RemoteNotFound) as info:
        backend.load(RemoteModelRef(Endpoint("lab", server.base_url), "gamma"))
    msg = str(info.value)
    assert "'gamma'" in msg and "alpha" in msg and "beta" in msg
    assert not backend.loaded


def test_models_endpoint_answering_html_is_a_clear_error(server: FakeOpenAI) -> None:
    server.fail(200, "<html>login page</html>", paths=("/v1/models",))
    with pytest.raises(RemoteStreamError, match="not JSON"):
        check_connection(Endpoint("lab", server.base_url))


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
