"""The remote backend (`RemoteBackend`, `check_connection`) against a real HTTP server on 127.0.0.1
that scripts each answer (tests/helpers/sse_server.py): the stream shapes of real servers (vLLM, llama.cpp,
SGLang, Ollama, llama-cpp-python), metrics, connection checks and loading. Faults:
engine/test_remote_faults.py."""

from __future__ import annotations

import json

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.reasoning import Split, split_thinking
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.errors import RemoteNotFound, RemoteStreamError
from ember_chat.engine.inference.events import Finished, PromptReady, Token
from ember_chat.engine.inference.remote.backend import RemoteBackend, check_connection
from tests.helpers.remote_support import API_KEY, HI, MODEL, PARAMS, Backends, drain, tokens
from tests.helpers.sse_server import DONE, PING, FakeOpenAI, chunk, sse, text_chunk, usage_chunk

pytestmark = pytest.mark.usefixtures("no_thread_left")


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
    assert [t.thinking for t in tokens(events)] == [True, True, False, False]
    assert fin.metrics.thinking_tokens == 2 and fin.metrics.ttfat_s > fin.metrics.ttft_s
    assert split_thinking(fin.text) == Split("Let me think.", "The answer is 4.", False)


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
