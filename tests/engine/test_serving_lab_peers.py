"""The serving lab against real servers other than Ember's: llama.cpp's `llama-server` built from the
pinned source (bench.llama_tools; skipped when not built) and llama-cpp-python's own server, on the chat
starter — a short sweep at 1 and 2 users completes, and what each server says of its own timing is kept
per request."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.api import ServerProcess
from bench.llama_tools import find_tool
from ember_chat.engine.bench.serving.load import LoadPlan, LoadRun
from ember_chat.engine.bench.serving.model_facts import REMOTE_HASH
from ember_chat.engine.bench.serving.report import sweep
from ember_chat.engine.bench.serving.summary import Slo
from ember_chat.engine.bench.serving.targets import url_target
from ember_chat.engine.bench.serving.workload import workload_for
from tests.helpers.peer_servers import llama_cpp_server

PLANS = [LoadPlan(concurrency=1, requests=3), LoadPlan(concurrency=2, requests=3)]


def short_sweep(base_url: str) -> tuple[dict[str, object], list[LoadRun]]:
    runs: list[LoadRun] = []
    result = sweep(url_target(base_url), workload_for("short", count=16), PLANS, Slo(), load_runs=runs)
    assert [run.plan.concurrency for run in runs] == [1, 2]
    for summary in result["runs"]:
        assert summary["completed"] == 3 and summary["failed"] == 0, summary["failures"]
        assert summary["ttft_ms"]["p50"] > 0 and summary["output_tokens_per_s"] > 0
    return result, runs


@pytest.mark.skipif(find_tool("llama-server") is None, reason="llama-server is not built (python -m bench.llama_tools)")
def test_a_sweep_against_llama_server_keeps_its_own_timings_per_request(chat_starter_model: Path) -> None:
    tool = find_tool("llama-server")
    assert tool is not None
    server = ServerProcess.llama_server(tool, chat_starter_model, threads=1, n_ctx=1024, parallel=2)
    try:
        result, runs = short_sweep(f"http://127.0.0.1:{server.port}/v1")
    finally:
        server.close()
    assert result["context"]["engine"] == "llamacpp"  # (its /v1/models' owned_by)
    context = result["context"]  # (what its /props says of the file; the hash is the server's to know)
    assert context["model_file"] == f"{chat_starter_model} (on the server)" and context["quant"] == "Q4_1"
    assert context["model_sha256"] == REMOTE_HASH and str(context["engine_version"]).startswith("llama-server b")
    assert context["load_settings"] == {"parallel": 2}
    for r in (r for run in runs for r in run.results):
        assert r.server is not None and r.server["source"] == "timings"
        assert r.server["prompt_ms"] > 0 and r.server["predicted_per_second"] > 0
        # (ignore_eos: the tokens asked for, written and counted alike by both sides)
        assert r.server["predicted_n"] == r.output_tokens >= 8
        assert r.ttft_s is not None and r.ttft_s * 1000 >= r.server["prompt_ms"]  # (its prefill is in the TTFT)


def test_a_sweep_against_llama_cpp_python_s_server_completes(chat_starter_model: Path) -> None:
    with llama_cpp_server(chat_starter_model, threads=1) as base_url:
        _, runs = short_sweep(base_url)
    for r in (r for run in runs for r in run.results):
        assert r.ok and r.output_tokens >= 8 and r.tpot_s is not None and r.tpot_s > 0
