"""The remote backend against two real OpenAI-compatible servers started on 127.0.0.1 with the real
Gemma 3 270M (`starter_model`): llama-cpp-python's own server (no usage in its stream: token counts are estimated and
say so) and Ember's own server (usage and Ember's metrics). Greedy answers through either server
match Ember's local runtime token for token."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.inference.events import Finished, Token
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.remote.backend import RemoteBackend, check_connection
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.peer_servers import llama_cpp_server

pytestmark = pytest.mark.slow  # real servers or a fresh virtualenv: seconds each

PROMPT = "The capital of France is"
GREEDY = SamplingParams(temperature=0.0, max_tokens=16, repeat_penalty=1.0)


@pytest.fixture(scope="module")
def local_text(starter_model: Path) -> str:
    rt = LocalRuntime()
    try:
        rt.load(LoadConfig(starter_model, n_ctx=1024, threads=2))
        *_, fin = list(rt.complete(PROMPT, GREEDY))
        assert isinstance(fin, Finished)
        return fin.text
    finally:
        rt.close()


@pytest.fixture(scope="module")
def llama_cpp_url(starter_model: Path) -> Iterator[str]:
    with llama_cpp_server(starter_model, threads=2, n_ctx=1024) as url:
        yield url


@pytest.fixture(scope="module")
def ember_url(starter_model: Path) -> Iterator[str]:
    service = EngineService()
    load_blocking(service, LoadConfig(starter_model, n_ctx=1024, threads=2), "starter")
    server = ApiServer(service, ServerConfig(port=0))
    server.start()
    yield server.url
    server.stop()
    service.close()


def _remote(url: str, name: str) -> RemoteBackend:
    backend = RemoteBackend()
    models = check_connection(Endpoint(name, url)).models
    backend.load(RemoteModelRef(Endpoint(name, url), models[0].id))
    return backend


@pytest.mark.parametrize("peer", ["llama_cpp_url", "ember_url"])
def test_greedy_completion_matches_the_local_runtime(
    peer: str, request: pytest.FixtureRequest, local_text: str
) -> None:
    url = request.getfixturevalue(peer)
    backend = _remote(url, peer)
    try:
        events = list(backend.complete(PROMPT, GREEDY))
    finally:
        backend.close()
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.reason == "length"
    assert fin.text == local_text
    tokens = [e for e in events if isinstance(e, Token)]
    m = fin.metrics
    assert m.backend == "remote" and m.connection == peer and m.ttft_s and m.ttft_s > 0
    assert len(tokens) >= 1
    if peer == "llama_cpp_url":  # no usage in llama-cpp-python's stream: its own tokenizer counts the answer
        assert m.token_count == "tokenized" and m.output_tokens == 16
    else:
        assert m.token_count == "exact" and m.output_tokens == 16 and m.prompt_tokens > 0


@pytest.mark.parametrize("peer", ["llama_cpp_url", "ember_url"])
def test_stop_closes_the_stream_and_the_server_moves_on(peer: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(peer)
    backend = _remote(url, peer)
    try:
        seen: list[Token] = []
        stopper: threading.Thread | None = None
        for ev in backend.complete("Once upon a time", SamplingParams(temperature=0.0, max_tokens=400)):
            if isinstance(ev, Token):
                seen.append(ev)
                if len(seen) == 3:  # Stop from another thread, as the window's Stop button does
                    stopper = threading.Thread(target=backend.request_stop)
                    stopper.start()
            elif isinstance(ev, Finished):
                fin = ev
        assert stopper is not None
        stopper.join()
        assert fin.reason == "cancelled" and len(seen) < 40  # stopped within a few chunks, not 400 tokens
        # the server saw the disconnect and is free again: a new request is answered at once
        again = list(backend.complete("Hello", SamplingParams(temperature=0.0, max_tokens=4)))[-1]
        assert isinstance(again, Finished) and again.reason == "length" and again.metrics.ttft_s
    finally:
        backend.close()


@pytest.mark.parametrize("peer", ["llama_cpp_url", "ember_url"])
def test_the_benchmark_lab_measures_a_real_server(peer: str, request: pytest.FixtureRequest) -> None:
    """The lab on a connection's model: prompts sized by the server's tokenizer where it has one
    (llama-cpp-python's /extras/tokenize), the figures of both prompt lengths, the server named."""
    from ember_chat.engine.bench.lab import BenchPlan, run_lab

    backend = _remote(request.getfixturevalue(peer), peer)
    try:
        counts = backend.count_tokens("the of and to in is")
        run = run_lab(backend, BenchPlan((40, 160), 8, 1))
    finally:
        backend.close()
    assert [p.where for p in run.points] == [peer, peer] and run.machine["server"] == peer
    for want, p in zip((40, 160), run.points, strict=True):
        assert p.prefill_tokens_per_s > 0 and p.decode_tokens_per_s > 0 and p.ttft_s > 0
        assert p.peak_rss_bytes is None and 2 <= p.output_tokens <= 8
        if peer == "ember_url":  # Ember's server honours ignore_eos: exactly the planned tokens
            assert p.output_tokens == 8
        if counts is not None:  # sized by the server's own count: within a few tokens of the plan
            assert abs(p.prompt_tokens - want) <= 3, (want, p.prompt_tokens)
        else:  # n words: at least n tokens, as the server reported them
            assert want <= p.prompt_tokens <= 2 * want + 1
    if peer == "llama_cpp_url":
        assert counts == 6  # one token per common word, without the BOS the server adds
