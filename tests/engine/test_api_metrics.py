"""GET /metrics on Ember's API server: Prometheus's text format (0.0.4), read by a strict parser
(tests/helpers/prometheus_text.py), against a real server on 127.0.0.1 over the tiny model. The figures
are checked against what the same requests' responses said (usage) and what was sent (status codes);
each test reads the counters before and after its requests, so the module's shared server is fine."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import httpx2
import openai
import pytest

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.pool.memory import MemoryBudget
from ember_chat.engine.inference.pool.pool import ModelPool
from ember_chat.engine.inference.service.engine import EngineService, QueueState, RequestRecord
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.metrics_export import CONTENT_TYPE, EngineView, MetricsRegistry, route_label
from ember_chat.engine.serve.request_log import HttpExchange
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.api_support import MESSAGES, WAIT_S, assert_error
from tests.helpers.prometheus_text import Family, FormatError, parse, value

CHAT = "/v1/chat/completions"


def _scrape(http: httpx2.Client, **headers: str) -> dict[str, Family]:
    r = http.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == CONTENT_TYPE
    return parse(r.text)


def _delta(before: dict[str, Family], after: dict[str, Family], sample: str, **labels: str) -> float:
    return value(after, sample, **labels) - value(before, sample, **labels)


def test_the_servers_requests_and_tokens_are_counted(
    tiny_server: ApiServer, client: openai.OpenAI, http: httpx2.Client
) -> None:
    before = _scrape(http)
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model="tiny", messages=MESSAGES, max_tokens=5, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    (streamed,) = [c.usage for c in chunks if c.usage is not None]
    text = client.completions.create(model="tiny", prompt="Once upon", max_tokens=4, temperature=0)
    assert_error(http.get("/v1/nothing-here"), 404)
    assert_error(http.post(CHAT, json={"model": "tiny"}), 400, param="messages")
    after = _scrape(http)

    def requests(route: str, code: str, method: str = "POST") -> float:
        return _delta(before, after, "ember_http_requests_total", model="tiny", route=route, method=method, code=code)

    assert requests(CHAT, "200") == 2 and requests(CHAT, "400") == 1
    assert requests("/v1/completions", "200") == 1
    assert requests("other", "404", "GET") == 1  # the unknown path itself is no label
    assert requests("/metrics", "200", "GET") == 1  # the first scrape (this one is told once it is sent)
    assert _delta(before, after, "ember_http_requests_total") == 6

    usages = [plain.usage, streamed, text.usage]
    assert all(u is not None for u in usages)
    outputs = [u.completion_tokens for u in usages if u is not None]
    assert _delta(before, after, "ember_output_tokens_total", model="tiny") == sum(outputs)
    assert _delta(before, after, "ember_prompt_tokens_total", model="tiny") == sum(
        u.prompt_tokens for u in usages if u is not None
    )
    cached = [u.prompt_tokens_details.cached_tokens for u in usages if u and u.prompt_tokens_details]
    assert len(cached) == 3 and _delta(before, after, "ember_prompt_tokens_cached_total", model="tiny") == sum(cached)
    # one generation each for the three answered (the 400 never reached the engine)
    assert _delta(before, after, "ember_generations_total", model="tiny") == 3
    assert _delta(before, after, "ember_time_to_first_token_seconds_count", model="tiny") == 3
    assert _delta(before, after, "ember_time_to_first_token_seconds_sum", model="tiny") > 0
    # a gap between each two tokens of an answer
    assert _delta(before, after, "ember_inter_token_latency_seconds_count", model="tiny") == sum(
        n - 1 for n in outputs if n
    )
    # the end-to-end latency of every request to a generation route, the refused one included
    assert _delta(before, after, "ember_request_duration_seconds_count", route=CHAT) == 3
    assert _delta(before, after, "ember_request_duration_seconds_count", route="/v1/completions") == 1
    assert value(after, "ember_request_duration_seconds_count", route="/metrics") == 0  # not a generation

    # nothing runs or waits now; the module's service loaded the model once; nothing evicted
    for client_kind in ("api", "window"):
        assert value(after, "ember_queue_depth", model="tiny", client=client_kind) == 0
        assert value(after, "ember_slots_busy", model="tiny", client=client_kind) == 0
    assert value(after, "ember_model_loads_total", model="tiny") == 1
    assert value(after, "ember_model_evictions_total", model="tiny") == 0
    for family in after.values():
        assert family.name.startswith("ember_") and family.help
        assert all(labels.get("model") == "tiny" for _, labels, _ in family.samples)


def test_metrics_need_the_api_key_and_health_does_not(
    tiny_service: EngineService, serve: Callable[[EngineService, ServerConfig], ApiServer]
) -> None:
    """/metrics tells who uses the server and how much: it is guarded like every route but /health."""
    server = serve(tiny_service, ServerConfig(port=0, api_key="sekret"))
    with httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as http:
        assert_error(http.get("/metrics"), 401, code="invalid_api_key")
        assert_error(http.get("/metrics", headers={"Authorization": "Bearer wrong"}), 401, code="invalid_api_key")
        assert http.get("/health").status_code == 200
        families = _scrape(http, Authorization="Bearer sekret")
    refused = value(families, "ember_http_requests_total", route="/metrics", method="GET", code="401")
    assert refused == 2 and value(families, "ember_http_requests_total", route="/health", code="200") == 1


def test_a_stored_responses_id_is_one_route(tiny_server: ApiServer, http: httpx2.Client) -> None:
    before = _scrape(http)
    assert_error(http.get("/v1/responses/resp_nope1"), 404)
    assert_error(http.get("/v1/responses/resp_nope2"), 404)
    after = _scrape(http)
    assert _delta(before, after, "ember_http_requests_total", route="/v1/responses/{id}", code="404") == 2
    assert not any("nope" in str(labels) for f in after.values() for _, labels, _ in f.samples)


def test_every_load_of_the_engine_is_counted_by_its_name_here(
    tiny_model: Path, serve: Callable[[EngineService, ServerConfig], ApiServer]
) -> None:
    """The loads come from the engine service (its real load path), so those made before the server
    started count too; the served model is named as the server names it (its alias)."""
    service = EngineService()
    try:
        config = LoadConfig(tiny_model, n_ctx=256, threads=1)
        load_blocking(service, config, "first")
        load_blocking(service, config, "second")
        load_blocking(service, config, "first")
        server = serve(service, ServerConfig(port=0, alias="served"))
        with httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as http:
            families = _scrape(http)
        assert value(families, "ember_model_loads_total", model="served") == 2  # "first", served as "served"
        assert value(families, "ember_model_loads_total", model="second") == 1
        assert value(families, "ember_model_evictions_total", model="second") == 0
        assert value(families, "ember_queue_depth", model="served", client="api") == 0
    finally:
        service.close()


def test_kv_cells_of_each_loaded_model_are_gauges(tiny_model: Path) -> None:
    """ember_kv_cells_used / _total per local model loaded here: the server's own engine's and each of its
    pool's, the total the model's context size, the used cells those its conversation holds."""
    service = EngineService()
    pool = ModelPool(
        lambda: {"other": LoadConfig(tiny_model, n_ctx=512, threads=1)}, MemoryBudget(ram_bytes=10**12, vram_bytes=0)
    )
    server = ApiServer(service, ServerConfig(port=0), pool=pool)
    try:
        load_blocking(service, LoadConfig(tiny_model, n_ctx=256, threads=1), "tiny")
        server.start()
        with (
            httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=WAIT_S) as http,
            openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as client,
        ):
            fresh = _scrape(http)
            assert value(fresh, "ember_kv_cells_used", model="tiny") == 0  # (nothing evaluated yet)
            assert value(fresh, "ember_kv_cells_total", model="tiny") == 256
            assert "other" not in str(fresh["ember_kv_cells_total"].samples)  # (not loaded: no series)
            for model, n_ctx in (("tiny", 256), ("other", 512)):
                answer = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=5, temperature=0)
                assert answer.usage is not None and answer.usage.completion_tokens >= 1
                families = _scrape(http)
                used = value(families, "ember_kv_cells_used", model=model)
                # the prompt's cells and the answer's (its last sampled token is never evaluated)
                assert answer.usage.prompt_tokens <= used <= answer.usage.total_tokens <= n_ctx
                assert value(families, "ember_kv_cells_total", model=model) == n_ctx
                engine = dict(pool.engines()).get(model, service)  # (what GET /api/models says of it too)
                assert engine.model is not None and engine.model.n_ctx == n_ctx
            assert families["ember_kv_cells_used"].type == families["ember_kv_cells_total"].type == "gauge"
    finally:
        server.stop()
        pool.close()
        service.close()


def _generation(model: str, output: int) -> GenerationMetrics:
    return GenerationMetrics(
        ttft_s=0.05, prompt_tokens=10, prompt_tokens_reused=4, prefill_tokens_per_s=None, decode_tokens_per_s=None,
        output_tokens=output, itl_p50_ms=None, itl_p95_ms=None, itl_p99_ms=None, tpot_ms=None, e2e_s=0.2,
        stop_reason="stop", n_ctx=512, context_used=14, model=model, quantization=None, backend="cpu",
        threads=1, gpu_layers=0,
    )  # fmt: skip


def test_label_values_are_escaped_and_buckets_hold_their_bounds() -> None:
    """A model's name is the user's: a quote, a backslash or a line feed in it reads back as it was. A
    value on a bucket's bound is in that bucket (`le`: less or equal)."""
    odd = 'my "model"\\v2\nbeta'
    registry = MetricsRegistry()
    registry.generation(odd, _generation(odd, 3), [1.0, 2.5])  # ms: on the 0.001 and 0.0025 bounds
    registry.request(odd, CHAT, HttpExchange(0.0, "POST", CHAT, 200, "127.0.0.1", 0.01))
    registry.evicted(odd)
    running = RequestRecord(1, "api", "POST /v1/chat/completions", "running")
    queued = (RequestRecord(2, "api", "x", "queued"), RequestRecord(3, "window", "y", "queued"))
    families = parse(registry.render(EngineView(odd, QueueState(running, queued, (running,)), {odd: 1})))
    assert value(families, "ember_output_tokens_total", model=odd) == 3
    assert value(families, "ember_model_evictions_total", model=odd) == 1
    assert value(families, "ember_queue_depth", model=odd, client="api") == 1
    assert value(families, "ember_queue_depth", model=odd, client="window") == 1
    assert value(families, "ember_slots_busy", model=odd, client="api") == 1
    assert value(families, "ember_slots_busy", model=odd, client="window") == 0
    itl = "ember_inter_token_latency_seconds_bucket"
    assert value(families, itl, model=odd, le="0.001") == 1 and value(families, itl, model=odd, le="0.0025") == 2
    assert value(families, "ember_request_duration_seconds_bucket", le="0.01") == 1
    assert math.isclose(value(families, "ember_inter_token_latency_seconds_sum"), 0.0035)


def test_route_labels_are_bounded() -> None:
    served = ("/health", CHAT)
    assert route_label(CHAT, served, ("/v1/responses/",)) == CHAT
    assert route_label("/v1/responses/resp_1", served, ("/v1/responses/",)) == "/v1/responses/{id}"
    assert route_label("/wp-admin.php", served, ("/v1/responses/",)) == "other"


@pytest.mark.parametrize(
    "text",
    [
        "ember_x_total 1\n",  # no HELP nor TYPE
        "# HELP ember_x_total x\n# TYPE ember_x_total counter\nember_x_total -1\n",  # a counter below 0
        '# HELP ember_x x\n# TYPE ember_x gauge\nember_x{a="1\\t"} 1\n',  # an escape the spec has not
        "# HELP ember_h h\n# TYPE ember_h histogram\n"
        'ember_h_bucket{le="1"} 2\nember_h_bucket{le="+Inf"} 1\nember_h_sum 1\nember_h_count 1\n',  # not cumulative
        "# HELP ember_h h\n# TYPE ember_h histogram\n"
        'ember_h_bucket{le="1"} 1\nember_h_bucket{le="+Inf"} 2\nember_h_sum 1\nember_h_count 3\n',  # +Inf ≠ count
        '# HELP ember_h h\n# TYPE ember_h histogram\nember_h_bucket{le="1"} 1\nember_h_sum 1\nember_h_count 1\n',
    ],
)
def test_the_parser_refuses_what_a_scraper_would(text: str) -> None:
    """The strict parser is what the tests above lean on: it must fail where the format breaks."""
    with pytest.raises(FormatError):
        parse(text)
