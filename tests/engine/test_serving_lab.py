"""The serving lab (issue 32, engine/bench/serving/): the open-loop schedule is a gamma process (Poisson at
burstiness 1) and requests go out at their scheduled times however slow the server is (no coordinated
omission); a server that refuses, answers garbage or stalls mid-stream costs failed requests with their
reasons while the run goes on; a load the server cannot keep up with is stopped and said; ShareGPT files
that are not one are refused naming what is wrong; and `ember-chat bench serve` against Ember's own server
on the chat starter gives the figures and the plain answer."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ember_chat.engine.bench.serving.client import RequestResult
from ember_chat.engine.bench.serving.knobs import (
    Figures,
    Knob,
    apply_winner,
    figures_of,
    pareto_front,
    parse_knob,
    parse_knobs,
    winner,
)
from ember_chat.engine.bench.serving.load import LoadPlan, LoadRun, arrival_times
from ember_chat.engine.bench.serving.machine import listening_pids, process_cpu_s
from ember_chat.engine.bench.serving.report import _landing_words, plain_answer, sweep
from ember_chat.engine.bench.serving.summary import Slo, landing_stall, over_repeats, parse_slo, t_interval
from ember_chat.engine.bench.serving.targets import USUAL_PORTS, FoundServer, find_servers, url_target
from ember_chat.engine.bench.serving.workload import (
    WEATHER_RESULT,
    ChatSessions,
    ToolCall,
    ToolLoops,
    sharegpt,
    synthetic,
    workload_for,
)
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.errors import EmberError
from ember_chat.engine.models.starter import CHAT_STARTER
from ember_chat.engine.storage.model_settings import ModelSettingsStore
from tests.helpers.cli import cli
from tests.helpers.peer_servers import ember_server, free_port
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk, sse, usage_chunk


def ks_exponential(gaps: list[float], mean: float) -> float:
    """Kolmogorov–Smirnov distance between the gaps and the exponential distribution of this mean."""
    ordered = sorted(gaps)
    n = len(ordered)
    return max(
        max(abs((i + 1) / n - (1 - math.exp(-g / mean))), abs(i / n - (1 - math.exp(-g / mean))))
        for i, g in enumerate(ordered)
    )


def gaps_of(times: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0, *times], times, strict=False)]


def test_open_loop_arrivals_are_poisson_at_burstiness_one_and_burstier_below() -> None:
    rate, n = 5.0, 4000
    gaps = gaps_of(arrival_times(rate, 1.0, n, seed=3))
    assert statistics.fmean(gaps) == pytest.approx(1 / rate, rel=0.05)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(1.0, abs=0.07)  # (CV of exponential)
    assert ks_exponential(gaps, 1 / rate) < 1.36 / math.sqrt(n)  # (KS test at 5 %)
    bursty = gaps_of(arrival_times(rate, 0.5, n, seed=3))
    assert statistics.fmean(bursty) == pytest.approx(1 / rate, rel=0.08)  # the same rate…
    assert statistics.pstdev(bursty) / statistics.fmean(bursty) == pytest.approx(math.sqrt(2), abs=0.12)  # …burstier
    assert arrival_times(rate, 1.0, 10, seed=3) == arrival_times(rate, 1.0, 10, seed=3)


@pytest.fixture
def fake() -> FakeOpenAI:
    with FakeOpenAI() as server:
        yield server


def tokens_stream(n: int) -> list[str]:
    return [chunk("a", role="assistant"), *(chunk(" b") for _ in range(n - 1)), chunk(finish="length"),
            usage_chunk(12, n), DONE]  # fmt: skip


def test_requests_go_out_at_their_times_while_a_slow_server_has_not_answered(fake: FakeOpenAI) -> None:
    """Each answer's first token comes 0.6 s after its request, and 12 requests are due within 0.6 s: a
    generator that waited for answers would send most of them late."""
    fake.stream(tokens_stream(4), pauses={0: 0.6})
    target = url_target(fake.base_url)
    plan = LoadPlan(rate=20.0, requests=12, warmup=0, seed=1)
    result = sweep(target, synthetic("short", 16), [plan], Slo())
    [run] = result["runs"]
    assert run["completed"] == 12 and run["failed"] == 0
    assert run["send_lateness_ms"]["p99"] < 150  # (sent on schedule: not after the earlier answers)
    assert run["ttft_ms"]["p50"] >= 600
    assert len(fake.generate_requests()) == 12
    body = fake.generate_requests()[0].body
    assert body["stream"] is True and body["ignore_eos"] is True and body["stream_options"] == {"include_usage": True}


def test_refusals_garbage_and_stalls_are_failed_requests_with_their_reasons(fake: FakeOpenAI) -> None:
    target = url_target(fake.base_url)
    workload = synthetic("short", 8)
    closed = LoadPlan(concurrency=1, requests=3, warmup=0)
    fake.fail(503, {"error": {"message": "busy"}}, times=1)
    [run] = sweep(target, workload, [closed], Slo())["runs"]
    assert run["completed"] == 2 and run["failed"] == 1  # the run went on
    [reason] = run["failures"]
    assert reason.startswith("HTTP 503") and "busy" in reason
    fake.stream([chunk("a", role="assistant"), "data: {not json\n\n", DONE])
    [run] = sweep(target, workload, [LoadPlan(concurrency=1, requests=1, warmup=0)], Slo())["runs"]
    assert run["failed"] == 1 and "not JSON" in next(iter(run["failures"]))
    fake.stream(tokens_stream(4), stall_after=2)
    [run] = sweep(target, workload, [LoadPlan(concurrency=1, requests=1, warmup=0)], Slo(), read_timeout_s=0.5)["runs"]
    assert run["failed"] == 1 and "stalled" in next(iter(run["failures"]))
    assert run["slo_attainment"] == 0.0 and run["goodput_requests_per_s"] == 0.0


def test_a_load_the_server_cannot_keep_up_with_is_stopped_and_said(fake: FakeOpenAI) -> None:
    fake.stream(tokens_stream(2), pauses={0: 1.0})
    plan = LoadPlan(rate=50.0, requests=40, warmup=0, max_in_flight=4)
    [run] = sweep(url_target(fake.base_url), synthetic("short", 8), [plan], Slo())["runs"]
    assert run["saturated"] and "cannot keep up with 50 requests/s" in run["saturated"]
    assert run["completed"] == 4 and len(fake.generate_requests()) == 4  # (no queue left to grow)


def test_a_target_that_is_down_is_said() -> None:
    with pytest.raises(EmberError, match="does not answer"):
        url_target(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(EmberError, match="http:// or https://"):
        url_target("ftp://127.0.0.1/v1")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{", "is not JSON"),
        ('{"conversations": []}', "must be a JSON list"),
        ('[{"id": 1}]', 'entry 0 has no "conversations" list'),
        ('[{"conversations": [{"from": "gpt", "value": "hi"}]}]', "no conversation with a human turn"),
    ],
)
def test_a_sharegpt_file_that_is_not_one_is_refused_naming_why(tmp_path: Path, content: str, said: str) -> None:
    path = tmp_path / "mine.json"
    path.write_text(content)
    with pytest.raises(EmberError, match=said):
        sharegpt(path)


def test_a_sharegpt_file_s_first_exchanges_are_the_requests(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    turns = [{"from": "human", "value": "Why is the sky blue?"}, {"from": "gpt", "value": "word " * 100}]
    path.write_text(json.dumps([{"conversations": turns}, {"conversations": turns[:1]}]))
    workload = sharegpt(path)
    assert len(workload.requests) == 1
    assert workload.requests[0].messages == (("user", "Why is the sky blue?"),)
    assert workload.requests[0].max_tokens == 130  # (100 words × 1.3 tokens)


def test_the_objective_is_parsed_with_its_units() -> None:
    assert parse_slo("ttft=1s,tpot=100ms") == Slo(ttft_ms=1000.0, tpot_ms=100.0, e2el_ms=None)
    assert parse_slo("e2el=2.5s") == Slo(None, None, 2500.0)
    for bad in ("ttft", "speed=1s", "ttft=fast", "tpot=-1ms"):
        with pytest.raises(EmberError, match="--slo"):
            parse_slo(bad)


def test_the_plain_answer_names_the_most_users_within_the_objective() -> None:
    def run(users: int, attained: float, ttft: float, tpot: float) -> dict[str, object]:
        return {"concurrency": users, "request_rate": None, "slo_attainment": attained, "saturated": None,
                "completed": 8, "failed": 0, "ttft_ms": {"p95": ttft}, "tpot_ms": {"p95": tpot}}  # fmt: skip

    context = {"model": "gemma", "hardware": "a 2-core CPU"}
    runs = [run(1, 1.0, 300.0, 40.0), run(2, 0.96, 700.0, 60.0), run(4, 0.5, 2500.0, 140.0)]
    answer = plain_answer(context, runs, Slo())
    assert answer.startswith("gemma on a 2-core CPU serves 2 chats at once within the objective")
    assert "first tokens within 0.70 s (p95)" in answer and "≥ 16.7 tokens/s each" in answer
    assert "did not meet the objective" in plain_answer(context, [run(1, 0.2, 3000.0, 90.0)], Slo())
    assert "serves 2 chats at once (the most tried: try more)" in plain_answer(context, runs[:2], Slo())
    # the window's model: named as the window names it, not by the key its server serves it as
    shown = {**context, "model": "starter", "model_name": "SmolLM2 135M (chat starter)"}
    assert plain_answer(shown, runs, Slo()).startswith("SmolLM2 135M (chat starter) on a 2-core CPU serves")


def test_bench_serve_against_ember_s_server_gives_the_figures(chat_starter_model: Path, tmp_path: Path) -> None:
    with ember_server(chat_starter_model, threads=1, extra=("--parallel", "2")) as base_url:
        out = cli("bench", "serve", "--target", base_url, "--concurrency", "1,2", "--requests", "3",
                  "--workload", "short", "--json", "--save-result", str(tmp_path / "r.json"),
                  data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert json.loads((tmp_path / "r.json").read_text()) == result
    assert result["context"]["base_url"] == base_url and "hardware" in result["context"]
    assert [r["concurrency"] for r in result["runs"]] == [1, 2]
    for r in result["runs"]:
        assert r["completed"] == 3 and r["failed"] == 0
        for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2el_ms"):
            assert set(r[key]) == {"mean", "p50", "p90", "p95", "p99"} and r[key]["p50"] > 0
        assert r["output_tokens_per_s"] > 0 and 0 <= r["slo_attainment"] <= 1
        assert r["total_output_tokens"] >= 3 * 8  # (ignore_eos: each asked for 8 to 32 tokens, and wrote them)
    assert result["answer"].startswith(f"{result['context']['model']} on ")  # (the plain answer first)


def test_bench_serve_loads_a_local_model_in_process(chat_starter_model: Path, tmp_path: Path) -> None:
    out = cli("bench", "serve", "--target", f"local:{chat_starter_model}", "--concurrency", "1", "--requests", "2",
              "--workload", "short", "--json", "--parallel", "1", "--ctx", "1024", "--threads", "1",
              data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["context"]["engine"].startswith("Ember (in process), CPU")
    assert result["context"]["target"] == f"local:{chat_starter_model}"
    context = result["context"]  # (the file, its hash and quant, the settings it ran with)
    assert context["model_file"] == str(chat_starter_model) and context["model_sha256"] == CHAT_STARTER.sha256
    assert context["quant"] == "Q4_1" and context["threads"] == 1 and context["load_settings"]["n_ctx"] == 1024
    [run] = result["runs"]
    assert run["completed"] == 2 and run["failed"] == 0


def test_runs_export_in_vllm_s_save_result_shape_and_as_csv_rows(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.stream(tokens_stream(4))
    fake.fail(503, {"error": {"message": "busy"}}, times=1)
    out = cli("bench", "serve", "--target", fake.base_url, "--concurrency", "1,2", "--requests", "3", "--warmup", "0",
              "--workload", "short", "--save-result-vllm", str(tmp_path / "v.json"), "--csv", str(tmp_path / "r.csv"),
              data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    first, second = json.loads((tmp_path / "v.json").read_text())  # (two loads: a list)
    for key in ("date", "backend", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency",
                "duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
                "request_goodput", "output_throughput", "total_token_throughput", "input_lens", "output_lens",
                "ttfts", "itls", "errors"):  # fmt: skip
        assert key in first and key in second, key
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p99"):
            assert f"{stat}_{metric}_ms" in first
    assert first["request_rate"] == "inf" and [first["max_concurrency"], second["max_concurrency"]] == [1, 2]
    assert first["num_prompts"] == 3 and first["completed"] == 2  # (the refusal: a request, not completed)
    assert first["errors"][0].startswith("HTTP 503") and first["errors"][1:] == ["", ""]
    assert first["output_lens"] == [0, 4, 4] and first["input_lens"] == [0, 12, 12]
    assert first["ttfts"][0] == 0.0 and all(t > 0 for t in first["ttfts"][1:])
    assert [len(gaps) for gaps in first["itls"]] == [0, 3, 3]  # (4 content chunks: 3 gaps)
    assert first["total_output_tokens"] == 8 and first["output_throughput"] == pytest.approx(8 / first["duration"])
    assert first["p99_ttft_ms"] >= first["median_ttft_ms"] > 0 and first["std_ttft_ms"] >= 0
    assert second["completed"] == 3 and second["errors"] == ["", "", ""]
    rows = list(csv.DictReader((tmp_path / "r.csv").read_text().splitlines()))
    assert [row["max_concurrency"] for row in rows] == ["1", "2"]  # (one row per load)
    assert "ttfts" not in rows[0] and float(rows[1]["mean_ttft_ms"]) == pytest.approx(second["mean_ttft_ms"])


def test_the_t_interval_and_the_repeats_median() -> None:
    low, high = t_interval([1.0, 2.0, 3.0])
    assert (low + high) / 2 == pytest.approx(2.0) and (high - low) / 2 == pytest.approx(4.303 / math.sqrt(3))
    assert t_interval([5.0]) is None
    runs = [{"load": "concurrency 1", "concurrency": 1, "ttft_ms": {"p95": v}, "saturated": s, "failures": f}
            for v, s, f in ((100.0, None, {}), (300.0, "fell behind", {"HTTP 503": 1}), (200.0, None, {}))]  # fmt: skip
    repeated = over_repeats(runs)
    assert repeated["repeats"] == 3 and "t-interval" in repeated["method"]
    assert repeated["median"]["ttft_ms"]["p95"] == 200.0 and repeated["median"]["concurrency"] == 1
    assert repeated["median"]["saturated"] == "fell behind"  # (said in one repeat: said)
    assert repeated["interval95"]["ttft_ms"]["p95"] == pytest.approx([200 - 4.303 * 100 / math.sqrt(3),
                                                                      200 + 4.303 * 100 / math.sqrt(3)])  # fmt: skip
    assert "load" not in repeated["interval95"] and repeated["interval95"]["concurrency"] == [1.0, 1.0]


def test_the_server_listening_on_a_loopback_port_is_found() -> None:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not listening_pids(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listening_pids(port) == [server.pid]
        assert process_cpu_s(server.pid) >= 0
    finally:
        server.kill()
        server.wait()


def test_repeats_give_medians_and_intervals_and_a_busy_machine_is_said(fake: FakeOpenAI, tmp_path: Path) -> None:
    """A program spinning on one core of this machine during the runs: the result and the plain answer say
    that other programs used a share of the CPU (this process's and the server's own time are not counted)."""
    fake.stream(tokens_stream(4), pauses={0: 0.3})
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        out = cli("bench", "serve", "--target", fake.base_url, "--concurrency", "1", "--requests", "2", "--warmup",
                  "0", "--workload", "short", "--repeats", "3", "--json", data_dir=tmp_path)  # fmt: skip
    finally:
        burner.kill()
        burner.wait()
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [r["repeat"] for r in result["runs"]] == [1, 2, 3]
    [load] = result["loads"]
    assert load["repeats"] == 3 and "t-interval" in load["method"]
    ttfts = sorted(r["ttft_ms"]["p95"] for r in result["runs"])
    assert load["median"]["ttft_ms"]["p95"] == ttfts[1]
    low, high = load["interval95"]["ttft_ms"]["p95"]
    assert low <= statistics.fmean(ttfts) <= high
    assert all(r["busy_cpu_share"] >= 0.25 for r in result["runs"])  # (1 core of this machine's spun)
    assert load["median"]["busy"].startswith("busy: ") and "used by other programs during this load" in result["answer"]
    assert "Medians of 3 repeats" in result["answer"] or "did not meet" in result["answer"]


def test_multiturn_users_each_keep_their_conversation_with_the_server_s_answers(fake: FakeOpenAI) -> None:
    fake.stream(tokens_stream(4))
    workload = workload_for("multiturn", seed=2)
    [run] = sweep(url_target(fake.base_url), workload, [LoadPlan(concurrency=2, requests=6, warmup=0)], Slo())["runs"]
    assert run["completed"] == 6
    sent = [tuple((m["role"], m["content"]) for m in r.body["messages"]) for r in fake.generate_requests()]
    chats: dict[str, list[int]] = {}
    for messages in sent:
        chats.setdefault(messages[0][1].split(",")[0], []).append(len(messages))
    # 2 users, 6 turns between them: each conversation its turns in order (a user whose answers came sooner
    # may have taken more of them: a closed loop's users go at the server's pace)
    assert sum(len(lengths) for lengths in chats.values()) == 6
    for lengths in chats.values():
        assert sorted(lengths) == [2 * k + 1 for k in range(len(lengths))]
    for messages in sent:
        if len(messages) > 1:  # the conversation so far, the server's answer included, then the new turn
            assert messages[:-2] in sent and messages[-2] == ("assistant", "a b b b")
            assert messages[-1][0] == "user" and messages[-1][1].startswith(messages[0][1].split(",")[0])
    assert {m[0][1].split(",")[0] for m in sent} == {"Chat 0", "Chat 1"}


def test_a_conversation_ends_after_its_turns_and_a_failed_turn_is_not_kept() -> None:
    sessions = workload_for("multiturn")
    assert isinstance(sessions, ChatSessions) and sessions.turns == 6
    first = sessions.request(0)
    sessions.done(0, None)  # (failed: the conversation goes on without that turn)
    again = sessions.request(1)
    assert len(again.messages) == 1 and again.messages[0][1].startswith("Chat 0, turn 1.")
    assert again == first  # (drawn from the conversation and turn: the same turn asked again)
    for i in range(1, 7):
        sessions.done(i, "an answer")
        if i < 6:
            assert len(sessions.request(i + 1).messages) == 2 * i + 1
    assert sessions.request(8).messages[0][1].startswith("Chat 1, turn 1.")  # (6 turns: a new conversation)


def test_the_stall_a_landing_document_causes_is_the_others_itl_while_it_was_read() -> None:
    def answered(sent: float, ttft: float, gaps: list[float]) -> RequestResult:
        r = RequestResult(0, sent, sent, ok=True, ttft_s=ttft, e2el_s=ttft + sum(gaps), output_tokens=len(gaps) + 1)
        r.itl_s = gaps
        return r

    # chunks every 50 ms, one gap of 900 ms that began while the document (sent at 1.0 s, first token at
    # 1.8 s) was read; gaps that ended before 1.0 s are "before"
    other = answered(0.0, 0.1, [0.05] * 17 + [0.9] + [0.05] * 4)  # (chunks at 0.1 … 0.95, then 1.85, …)
    run = LoadRun(LoadPlan(concurrency=1), [other], duration_s=3.0)
    run.landing = RequestResult(-1, 1.0, 1.0, ok=True, ttft_s=0.8, e2el_s=1.0, output_tokens=4, prompt_tokens=1560)
    stall = landing_stall(run)
    assert stall is not None
    assert stall["gaps_before"] == 17 and stall["itl_p99_before_ms"] == pytest.approx(50.0)
    assert stall["gaps_during"] == 1 and stall["itl_p99_during_ms"] == pytest.approx(900.0)
    assert stall["stall_ms"] == pytest.approx(850.0) and stall["ttft_ms"] == pytest.approx(800.0)
    assert landing_stall(LoadRun(LoadPlan(concurrency=1))) is None
    summary = {"load": "concurrency 1", "document": stall}
    assert "ITL p99 went from 50 ms before to 900 ms while it was read" in _landing_words(summary)
    assert "a 1,560-token document landing at 1.0 s" in _landing_words(summary)


def test_a_document_landing_on_ember_s_server_stalls_the_others(chat_starter_model: Path, tmp_path: Path) -> None:
    with ember_server(chat_starter_model, threads=1, n_ctx=2048, extra=("--parallel", "2")) as base_url:
        out = cli("bench", "serve", "--target", base_url, "--concurrency", "1", "--requests", "2", "--warmup", "0",
                  "--workload", "document-lands", "--json", data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    [run] = result["runs"]
    doc = run["document"]
    assert run["completed"] == 2 and doc["ok"], doc
    assert doc["prompt_tokens"] > 1000 and doc["gaps_before"] > 0 and doc["gaps_during"] > 0
    assert doc["itl_p99_during_ms"] > doc["itl_p99_before_ms"]  # (its prefill held the other answer up)
    assert "while it was read" in result["answer"]


def test_find_lists_the_model_servers_answering_on_loopback_ports(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.models = [{"id": "qwen3-4b", "object": "model", "owned_by": "llamacpp"}, {"id": "gemma-3", "object": "model"}]
    other = subprocess.Popen([sys.executable, "-m", "http.server", str(port := free_port()), "--bind", "127.0.0.1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not listening_pids(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        nobody = free_port()
        found = find_servers({nobody: "", port: "", fake.port: "llama-server"})
        assert found == [FoundServer(fake.port, f"http://127.0.0.1:{fake.port}/v1", "llama-server",
                                     ("qwen3-4b", "gemma-3"), "llamacpp")]  # fmt: skip
        # (the http.server answers 404: not a model server, not listed; the free port: nothing there)
        ports = f"{nobody},{port},{fake.port}"
        out = cli("bench", "serve", "--find", "--ports", ports, "--json", data_dir=tmp_path)
        assert out.returncode == 0, out.stderr
        assert [s["base_url"] for s in json.loads(out.stdout)] == [fake.base_url]
        fake.fail(401, {"error": {"message": "no key"}}, paths=("/v1/models",))
        out = cli("bench", "serve", "--find", "--ports", ports, data_dir=tmp_path)
        assert out.returncode == 0, out.stderr
        assert f"http://127.0.0.1:{fake.port}/v1: needs an API key" in out.stdout
        out = cli("bench", "serve", "--find", "--ports", str(nobody), data_dir=tmp_path)
        assert f"No server answers GET /v1/models on 127.0.0.1 at ports {nobody}." in out.stdout
    finally:
        other.kill()
        other.wait()
    assert all(r.path == "/v1/models" for r in fake.received())
    assert USUAL_PORTS.keys() >= {8080, 8000, 11434, 1234, 30000}
    out = cli("bench", "serve", data_dir=tmp_path)
    assert out.returncode != 0 and "--target" in out.stderr


def test_every_load_of_a_sweep_sends_requests_of_its_own(fake: FakeOpenAI) -> None:
    """A server's prefix cache must not answer a later load from an earlier one's prompts (review)."""
    fake.stream(tokens_stream(3))
    plans = [LoadPlan(concurrency=1, requests=3, warmup=1), LoadPlan(concurrency=2, requests=3, warmup=1)]
    sweep(url_target(fake.base_url), synthetic("short", 2), plans, Slo())
    prompts = [r.body["messages"][-1]["content"] for r in fake.generate_requests()]
    assert len(prompts) == 8 and len(set(prompts)) == 8


def test_odd_streams_are_read_or_failed_with_a_reason_and_counted(fake: FakeOpenAI) -> None:
    target, workload = url_target(fake.base_url), synthetic("short", 4)
    one = [LoadPlan(concurrency=1, requests=2, warmup=0)]
    # an event of another shape: a failed request with its reason, the run going on and counting it
    fake.stream([chunk("a", role="assistant"), 'data: {"choices": 5}\n\n', DONE])
    [run] = sweep(target, workload, one, Slo())["runs"]
    assert run["failed"] == 2 and run["completed"] == 0
    assert next(iter(run["failures"])).startswith("the server's answer could not be read")
    # U+2028 in JSON text ends no line of a server-sent-event stream; thinking (`reasoning`) is output
    fake.stream([chunk(reasoning="hmm\u2028", role="assistant"), chunk("a\u2028b"), usage_chunk(5, 2), DONE])
    [run] = sweep(target, workload, one, Slo())["runs"]
    assert run["completed"] == 2 and run["failed"] == 0 and run["total_output_tokens"] == 4
    # a line that never ends: refused at its bound, not kept in memory
    fake.stream([chunk("a", role="assistant"), "data: " + "x" * (2 << 20)])
    [run] = sweep(target, workload, one, Slo())["runs"]
    assert run["failed"] == 2 and "a line of more than" in next(iter(run["failures"]))


def test_a_cancel_ends_the_requests_in_flight(fake: FakeOpenAI) -> None:
    """A stream of 200 slow frames (40 s) is left at its next frame once the run is cancelled."""
    fake.stream(tokens_stream(200), interval_s=0.2)
    cancel = threading.Event()

    def cancel_once_streaming() -> None:
        # (at the first chat request, not on a timer: the target's probes before it (/models, /props) took
        # over the first arrival's 0.37 s on a busy machine, so a timer cancelled before anything was sent)
        fake.request_arrived.clear()  # (cleared before looking: a request arriving meanwhile sets it again)
        while not any(r.path.endswith("/chat/completions") for r in fake.requests):
            if not fake.request_arrived.wait(10):
                break
            fake.request_arrived.clear()
        cancel.set()

    started = time.perf_counter()
    canceller = threading.Thread(target=cancel_once_streaming)
    canceller.start()
    try:
        [run] = sweep(url_target(fake.base_url), synthetic("short", 4), [LoadPlan(rate=5.0, requests=4, warmup=0)],
                      Slo(), cancel)["runs"]  # fmt: skip
    finally:
        canceller.join()
    assert time.perf_counter() - started < 10
    assert run["cancelled"] and run["completed"] == 0 and set(run["failures"]) == {"cancelled"}


def figures(goodput: float, tok_s: float, ttft: float | None, within: bool = True) -> Figures:
    return Figures(goodput, tok_s, ttft, within, "1 user")


def test_the_pareto_front_and_the_winner_of_a_knob_sweep_on_given_figures() -> None:
    points = [
        figures(2.0, 50.0, 500.0),  # beaten by the next on every figure
        figures(2.0, 60.0, 400.0),
        figures(3.0, 40.0, 900.0, within=False),  # the most goodput, but not within the objective
        figures(1.0, 30.0, 200.0),  # the fastest first token
        figures(2.0, 60.0, None),  # nothing completed: as late as can be
    ]
    assert pareto_front(points) == [1, 2, 3]
    assert winner(points) == 1
    assert winner([figures(2.0, 50.0, 300.0), figures(2.0, 55.0, 900.0)]) == 1  # (a tie on goodput: tok/s)
    assert winner([figures(3.0, 40.0, 900.0, within=False)]) is None
    assert pareto_front([figures(1.0, 1.0, 1.0), figures(1.0, 1.0, 1.0)]) == [0, 1]  # (equals both stay)

    def load(name: str, goodput: float, attained: float) -> dict[str, object]:
        return {"median": {"load": name, "goodput_requests_per_s": goodput, "output_tokens_per_s": 10 * goodput,
                           "ttft_ms": {"p95": 100.0}, "slo_attainment": attained, "saturated": None,
                           "completed": 4}}  # fmt: skip

    best = figures_of([load("1 user", 1.0, 1.0), load("4 users", 2.0, 0.5)])  # (the served load, not the most)
    assert best is not None and (best.load, best.goodput, best.within_slo) == ("1 user", 1.0, True)


def test_a_bad_sweep_value_is_said_clearly(tmp_path: Path) -> None:
    assert parse_knob("flash-attn=on,off") == Knob("flash_attn", (True, False))
    assert parse_knob("ctx=2048,4096") == Knob("n_ctx", (2048, 4096))
    for bad, said in [("parallel=1,lots", "--sweep parallel: 'lots' is not a whole number"),
                      ("parallel=0", "--sweep parallel: parallel sequences must be between 1 and 16, got 0"),
                      ("speed=1,2", "--sweep speed: not a load setting"),
                      ("kv_cache_type=f8", "--sweep kv_cache_type: KV cache type must be one of f16, q8_0, q4_0"),
                      ("flash_attn=maybe", "'maybe' is neither on nor off"),
                      ("parallel", "--sweep takes NAME=VALUE")]:  # fmt: skip
        with pytest.raises(EmberError) as caught:
            parse_knobs([bad])
        assert said in str(caught.value)
    with pytest.raises(EmberError, match="more than once"):
        parse_knobs(["parallel=1", "parallel=2"])
    out = cli("bench", "serve", "--target", "local:starter", "--sweep", "threads=2,many", data_dir=tmp_path)
    assert out.returncode != 0 and "--sweep threads: 'many' is not a whole number" in out.stderr
    out = cli("bench", "serve", "--target", "http://127.0.0.1:9/v1", "--sweep", "parallel=1,2", data_dir=tmp_path)
    assert out.returncode != 0 and "needs --target local:MODEL" in out.stderr


def test_applying_a_winner_keeps_the_model_s_other_settings(tmp_path: Path) -> None:
    store = ModelSettingsStore(tmp_path / "model_settings.json")
    measured = LoadConfig(tmp_path / "m.gguf", n_ctx=1024, threads=1, parallel=1)
    saved = apply_winner(store, "m.gguf", {"parallel": 2}, measured)  # (no settings of its own: the measured)
    assert (saved.parallel, saved.n_ctx, saved.threads) == (2, 1024, 1)
    store.save("m.gguf", dataclasses.replace(saved, n_ctx=8192, threads=3))
    apply_winner(store, "m.gguf", {"parallel": 4, "flash_attn": False}, measured)
    kept = store.get("m.gguf")
    assert kept is not None and (kept.parallel, kept.flash_attn, kept.n_ctx, kept.threads) == (4, False, 8192, 3)


def test_a_knob_sweep_on_a_local_model_applies_the_winner(
    chat_starter_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_CONFIG_DIR", str(tmp_path / "config"))  # (model_settings.json: the test's own)
    out = cli("bench", "serve", "--target", f"local:{chat_starter_model}", "--sweep", "parallel=1,2",
              "--concurrency", "1", "--requests", "2", "--workload", "short", "--warmup", "0", "--ctx", "1024",
              "--threads", "1", "--slo", "ttft=120s,tpot=10s,e2el=300s", "--apply", "--json",
              data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [s["label"] for s in result["settings"]] == ["parallel=1", "parallel=2"]
    assert [r["setting"] for r in result["runs"]] == ["parallel=1", "parallel=2"]
    assert all(r["completed"] == 2 and r["failed"] == 0 for r in result["runs"])
    assert result["winner"] in result["pareto"] and result["answer"].startswith("Best within the objective")
    assert result["applied"]["model"] == "starter"  # (given by its path: saved under the name the window uses)
    saved = json.loads((tmp_path / "config" / "model_settings.json").read_text())["starter"]
    assert saved["parallel"] == result["winner_setting"]["parallel"]
    assert (saved["n_ctx"], saved["threads"]) == (1024, 1)  # (the ones not swept: as measured)


def test_the_server_s_own_timings_are_summarised_beside_the_client_s(fake: FakeOpenAI, tmp_path: Path) -> None:
    """llama-server's `timings` in the last chunk: each load's summary gives the server's medians and the
    client's figures less the server's (the TTFT gap: what came before the server's clock started), the CLI
    a line under the load, and --report a Markdown report with the answer, the context and the line."""
    timings = {"prompt_ms": 50.0, "predicted_per_second": 40.0, "predicted_n": 4}
    fake.stream([chunk("a", role="assistant"), chunk(" b"), chunk(" b"), chunk(" b"),
                 chunk(finish="length", timings=timings), usage_chunk(12, 4), DONE], pauses={0: 0.3},
                interval_s=0.05)  # fmt: skip
    fake.fail(503, {"error": {"message": "busy"}}, times=1)
    out = cli("bench", "serve", "--target", fake.base_url, "--concurrency", "1", "--requests", "3", "--warmup", "0",
              "--workload", "short", "--save-result", str(tmp_path / "a.json"), "--report", str(tmp_path / "r.md"),
              data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    [run] = json.loads((tmp_path / "a.json").read_text())["runs"]
    assert run["server_timings"] == "timings"
    assert run["server_ttft_ms"] == 50.0 and run["server_decode_tokens_per_s"] == 40.0
    assert run["ttft_minus_server_ms"] == pytest.approx(run["ttft_ms"]["p50"] - 50.0)  # (2 answered: both medians)
    assert run["ttft_minus_server_ms"] >= 250  # (the 0.3 s before the first chunk: not the server's prefill)
    # (a chunk every 50 ms: the client's 1/TPOT about 20 tokens/s, 20 below what the server said)
    assert run["decode_minus_server_tokens_per_s"] == pytest.approx(1000 / run["tpot_ms"]["p50"] - 40.0, abs=1.0)
    assert run["decode_minus_server_tokens_per_s"] < -10
    assert "queueing, network and HTTP" in run["server_note"] and "leaves out the first token" in run["server_note"]
    assert "server's own (timings): TTFT p50 50 ms (client +" in out.stdout and "decode 40.0 tok/s" in out.stdout
    report = (tmp_path / "r.md").read_text()
    assert report.startswith("# Serving lab report\n") and run["load"] in report
    for said in ("## Context", "| Model | test-model |", "| Workload | short", "| Objective (SLO) | TTFT ≤ 1000 ms",
                 "| TTFT ms |", "Server's own (timings): TTFT p50 50 ms", "1 × HTTP 503",
                 "Completed 2, failed 1"):  # fmt: skip
        assert said in report, said
    assert json.loads((tmp_path / "a.json").read_text())["answer"] in report


def test_ember_s_own_metrics_are_read_as_the_server_s_timings() -> None:
    from ember_chat.engine.bench.serving.summary import server_side

    def answered(ttft_s: float, server: dict[str, object] | None) -> RequestResult:
        return RequestResult(0, 0.0, ok=True, ttft_s=ttft_s, e2el_s=ttft_s + 0.3, output_tokens=4, server=server)

    done = [answered(0.15, {"source": "ember", "ttft_s": 0.1, "decode_tokens_per_s": 9.0}),
            answered(0.35, {"source": "ember", "ttft_s": 0.2, "decode_tokens_per_s": 11.0}),
            answered(0.5, None)]  # fmt: skip
    said = server_side(done)
    assert said["server_timings"] == "ember" and said["server_ttft_ms"] == pytest.approx(150.0)
    assert said["ttft_minus_server_ms"] == pytest.approx(100.0)  # (the gaps 50 and 150)
    assert said["server_decode_tokens_per_s"] == 10.0 and said["decode_minus_server_tokens_per_s"] == pytest.approx(0.0)
    assert "Ember's clock" in said["server_note"]
    assert server_side([answered(0.5, None)])["server_ttft_ms"] is None


def test_two_saved_runs_are_compared_side_by_side_and_a_file_that_is_not_one_is_refused(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.stream(tokens_stream(4))
    out = cli("bench", "serve", "--target", fake.base_url, "--concurrency", "1,2", "--requests", "2", "--warmup", "0",
              "--workload", "short", "--save-result", str(tmp_path / "a.json"), "--json",
              data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    b = json.loads((tmp_path / "a.json").read_text())
    b["loads"][0]["median"]["output_tokens_per_s"] *= 2  # (B: twice A's tok/s at the first load)
    b["loads"].pop()  # (and the second load not run)
    (tmp_path / "b.json").write_text(json.dumps(b))
    a_b = ("bench", "serve", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    out = cli(*a_b, "--json", data_dir=tmp_path)
    assert out.returncode == 0, out.stderr
    compared = json.loads(out.stdout)
    [load] = compared["loads"]
    assert load["load"] == "concurrency 1" and compared["only_a"] == ["concurrency 2"] and compared["only_b"] == []
    rows = {row["figure"]: row for row in load["figures"]}
    assert rows["output tok/s"]["ratio"] == pytest.approx(2.0) and rows["TTFT p95 ms"]["ratio"] == pytest.approx(1.0)
    assert compared["a"]["model"] == "test-model"
    out = cli(*a_b, data_dir=tmp_path)
    assert out.returncode == 0 and "B/A" in out.stdout and "Only in A: concurrency 2" in out.stdout
    assert any(
        line.split()[:2] == ["output", "tok/s"] and line.split()[-1] == "2.00" for line in out.stdout.splitlines()
    )
    for content, said in (("{not json", "is not JSON"), ("[1, 2]", "JSON list, not a serving result"),
                          ('{"settings": [], "winner": null}', "knob sweep's result"),
                          ('{"context": {}}', "no `loads` list"),
                          ('{"context": {}, "loads": [{"load": 1}]}', "load 1")):  # fmt: skip
        (tmp_path / "bad.json").write_text(content)
        out = cli(
            "bench", "serve", "--compare", str(tmp_path / "a.json"), str(tmp_path / "bad.json"), data_dir=tmp_path
        )
        assert out.returncode != 0 and said in out.stderr and "bad.json" in out.stderr, (content, out.stderr)


def tool_call_stream() -> list[str]:
    """llama.cpp's server calling get_weather: the call's id and name, then its arguments in two pieces."""
    call = lambda d: sse({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d}]})  # noqa: E731
    first = {"index": 0, "id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '{"ci'}}
    return [chunk(role="assistant"), call({"tool_calls": [first]}),
            call({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Lima"}'}}]}),
            chunk(finish="tool_calls"), usage_chunk(90, 12), DONE]  # fmt: skip


def test_tool_loops_send_the_call_and_its_result_back_and_time_the_user_s_turn(fake: FakeOpenAI) -> None:
    fake.stream(tool_call_stream(), interval_s=0.01)
    workload = workload_for("tools", seed=1)
    assert isinstance(workload, ToolLoops)
    [run] = sweep(url_target(fake.base_url), workload, [LoadPlan(concurrency=1, requests=4, warmup=0)], Slo())["runs"]
    assert run["completed"] == 4 and run["failed"] == 0  # (an answer that is only a tool call is an answer)
    bodies = [r.body for r in fake.generate_requests()]
    assert all(b["tools"][0]["function"]["name"] == "get_weather" and "ignore_eos" not in b for b in bodies)
    assert [len(b["messages"]) for b in bodies] == [1, 3, 1, 3]  # (a question, then it with the call and result)
    question, call, result = bodies[1]["messages"]
    assert question == bodies[0]["messages"][0] and question["content"].startswith("Question 0:")
    assert call["role"] == "assistant" and call["tool_calls"] == [
        {"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'}}
    ]
    assert result == {"role": "tool", "tool_call_id": "call_7", "content": WEATHER_RESULT}
    assert bodies[2]["messages"][0]["content"].startswith("Question 1:")
    # (the server called the tool again after its result: the turn ends there, no loop for ever)
    assert run["tools"]["turns"] == 2 and run["tools"]["called_tool"] == 2
    # (a turn is its two requests: the turns' median is above the requests' E2E median)
    assert run["tools"]["turn_ms"]["p50"] > run["e2el_ms"]["p50"] > 0


def test_a_server_that_never_calls_the_tool_ends_each_turn_at_its_answer(fake: FakeOpenAI) -> None:
    fake.stream(tokens_stream(4))
    plan = [LoadPlan(concurrency=2, requests=5, warmup=0)]
    [run] = sweep(url_target(fake.base_url), workload_for("tools"), plan, Slo())["runs"]
    assert run["completed"] == 5 and run["tools"]["turns"] == 5 and run["tools"]["called_tool"] == 0
    assert all(len(r.body["messages"]) == 1 for r in fake.generate_requests())
    [chat] = sweep(url_target(fake.base_url), workload_for("short"), plan, Slo())["runs"]
    assert chat["tools"] is None  # (a workload without tools has no turns to count)


def test_a_failed_follow_up_drops_the_turn_and_its_user_asks_anew() -> None:
    workload = workload_for("tools")
    assert isinstance(workload, ToolLoops)
    workload.request(0)
    assert workload.done(0, "", (ToolCall("c1", "get_weather", '{"city": "Oslo"}'),)) is None  # (the tool called)
    follow_up = workload.request(1)
    assert len(follow_up.messages) == 3 and "ignore_eos" not in follow_up.body("m")
    assert workload.done(1, None) is None  # (failed: no turn to count)
    assert follow_up.messages[0] != (fresh := workload.request(2).messages)[0] and len(fresh) == 1
    ended = workload.done(2, "Sunny.")
    assert ended is not None and not ended.called_tool and ended.seconds >= 0


def test_a_model_file_s_hash_is_read_once_and_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember_chat.engine.bench.serving import model_facts

    model = tmp_path / "Tiny-Q8_0.gguf"
    model.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    expected = hashlib.sha256(model.read_bytes()).hexdigest()
    facts = model_facts.local_facts(model, "Q8_0", tmp_path / "data", 2, {"n_ctx": 2048, "flash_attn": False})
    assert facts["model_file"] == str(model) and facts["model_sha256"] == expected and facts["quant"] == "Q8_0"
    assert facts["threads"] == 2 and facts["load_settings"] == {"n_ctx": 2048, "flash_attn": False}
    assert str(facts["engine_version"]).startswith("ember-chat ")
    reads: list[Path] = []
    monkeypatch.setattr(model_facts, "sha256_file", lambda p: reads.append(p) or "0" * 64)
    assert model_facts.model_sha256(model, tmp_path / "data") == expected and reads == []  # (kept: not read)
    model.write_bytes(model.read_bytes()[:-1])  # (another size: read again)
    assert model_facts.model_sha256(model, tmp_path / "data") == "0" * 64 and reads == [model.resolve()]
    (tmp_path / "data" / model_facts.HASH_CACHE).write_text("[not a cache")  # (damaged: read again, no error)
    assert model_facts.model_sha256(model, tmp_path / "data") == "0" * 64 and len(reads) == 2


def test_a_verified_starter_s_hash_is_its_marker_s_without_reading_it(
    chat_starter_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember_chat.engine.bench.serving import model_facts
    from ember_chat.engine.models.starter import starter_model_path

    starter_model_path(tmp_path / "data" / "models")  # (verified: its marker in the models folder)
    monkeypatch.setattr(model_facts, "sha256_file", lambda p: pytest.fail(f"{p} was read"))
    assert model_facts.model_sha256(chat_starter_model, tmp_path / "data") == CHAT_STARTER.sha256


def test_a_server_s_model_file_and_quant_are_as_it_says_and_its_hash_unknown(fake: FakeOpenAI) -> None:
    from ember_chat.engine.bench.serving.model_facts import REMOTE_HASH

    fake.models[0]["root"] = "/srv/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf"  # (vLLM's /v1/models says it so)
    context = url_target(fake.base_url).context()
    assert context["model_file"] == "/srv/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf (on the server)"
    assert context["quant"] == "Q4_K_M (from the file's name)" and context["model_sha256"] == REMOTE_HASH
    fake.models[0]["root"] = "<b>" * 400  # (bounded: a name past 300 characters is cut)
    assert len(str(url_target(fake.base_url).context()["model_file"])) <= 300 + len(" (on the server)")


def test_a_knob_sweep_s_rows_are_its_settings_and_loads_in_the_plots_the_page_and_the_csv(fake: FakeOpenAI) -> None:
    """Before, the plots and the HTML page of a knob sweep had a point per run named only by its load
    (`concurrency 1` twice, once per setting and repeat) and the CSV did not say which setting a row was."""
    from ember_chat.engine.bench.serving.export import runs_csv
    from ember_chat.engine.bench.serving.knobs import knob_sweep
    from ember_chat.engine.bench.serving.report_html import load_rows, panels, report_html

    fake.stream(tokens_stream(4))
    result = knob_sweep(
        lambda _config: url_target(fake.base_url), LoadConfig(Path("m.gguf")), [Knob("parallel", (1, 2))],
        workload_for("short"), [LoadPlan(concurrency=1, requests=2, warmup=0), LoadPlan(concurrency=2, requests=2,
        warmup=0)], Slo(), repeats=2,
    )  # fmt: skip
    labels = ["parallel=1: concurrency 1", "parallel=1: concurrency 2", "parallel=2: concurrency 1",
              "parallel=2: concurrency 2"]  # fmt: skip
    rows = load_rows(result)
    assert [f"{r['setting']}: {r['load']}" for r in rows] == labels  # (a row per setting and load: the table's)
    first = result["settings"][0]["loads"][0]
    assert rows[0]["ttft_ms"]["p95"] == first["median"]["ttft_ms"]["p95"]  # (the repeats as one: their median)
    [ttft, _e2e] = panels(result, "latency")
    assert [label for _x, _y, label in ttft.series[0].points] == labels
    [goodput] = panels(result, "goodput")
    assert goodput.categories == ["parallel=1 · 1", "parallel=1 · 2", "parallel=2 · 1", "parallel=2 · 2"]
    page = report_html(result)
    assert all(f"<td>{label}</td>" in page and f"<h3>{label}</h3>" in page for label in labels)
    table = list(csv.DictReader(runs_csv(result).splitlines()))
    assert [(r["setting"], r["load"], r["repeat"]) for r in table] == [
        (s, f"concurrency {c}", k) for s in ("parallel=1", "parallel=2") for c in (1, 2) for k in ("1", "2")
    ]


def test_the_tools_workload_s_answer_is_said_in_users_and_their_tool_turns(fake: FakeOpenAI) -> None:
    """Before, it said '1 chat at a time' and only each request's figures, not the turns a user waits for."""
    fake.stream(tool_call_stream(), interval_s=0.01)
    result = sweep(url_target(fake.base_url), workload_for("tools", seed=1), [LoadPlan(concurrency=1, requests=4,
                   warmup=0)], Slo())  # fmt: skip
    [run] = result["runs"]
    turn = run["tools"]["turn_ms"]
    assert "serves 1 user calling a tool at a time (the most tried: try more) within" in result["answer"]
    assert (
        "At concurrency 1, 2 tool turns (a question, the tool's call and result, the answer) got their answer, 2 of "
        f"them calling the tool; a turn took {turn['p50'] / 1000:.2f} s (p50), {turn['p95'] / 1000:.2f} s (p95) — "
        "the objective is each request's."
    ) in result["answer"]
    fake.stream(tokens_stream(4))
    plan = LoadPlan(concurrency=2, requests=4, warmup=0)
    two = sweep(url_target(fake.base_url), workload_for("tools"), [plan], Slo())
    assert "2 users calling tools at once" in two["answer"] and "4 tool turns" in two["answer"]
    assert "none calling the tool" in two["answer"]


def test_a_run_ends_by_time_in_a_closed_and_an_open_loop(fake: FakeOpenAI) -> None:
    fake.stream(tokens_stream(2), pauses={0: 0.05})
    target, workload = url_target(fake.base_url), synthetic("short", 8)
    for plan in (LoadPlan(concurrency=1, duration_s=0.6, warmup=0), LoadPlan(rate=10.0, duration_s=0.6, warmup=0)):
        [run] = sweep(target, workload, [plan], Slo())["runs"]
        assert 2 <= run["completed"] <= 20 and run["failed"] == 0, run["load"]  # (0.6 s of requests of 0.05 s+)
        assert 0.5 <= run["duration_s"] < 3.0, run["duration_s"]


def test_a_saved_connection_is_a_target_with_its_key(fake: FakeOpenAI, tmp_path: Path) -> None:
    from ember_chat.engine.bench.serving.targets import connection_target
    from ember_chat.engine.storage.connections import Connection, ConnectionStore

    store = ConnectionStore(tmp_path / "connections.json")
    store.save(Connection("lab box", fake.base_url), api_key="sk-lab")
    target = connection_target(store, "lab box")
    assert (target.name, target.base_url, target.model) == ("lab box", fake.base_url, "test-model")
    fake.stream(tokens_stream(2))
    [run] = sweep(target, synthetic("short", 4), [LoadPlan(concurrency=1, requests=2, warmup=0)], Slo())["runs"]
    assert run["completed"] == 2
    assert all(r.headers["authorization"] == "Bearer sk-lab" for r in fake.generate_requests())
    with pytest.raises(EmberError, match="no connection called 'nowhere'"):  # (a name not saved: said)
        connection_target(store, "nowhere")


def test_a_target_that_goes_down_mid_run_costs_failed_requests_and_the_run_goes_on(fake: FakeOpenAI) -> None:
    fake.stream(tokens_stream(2))
    target = url_target(fake.base_url)

    def stop_after_first(_label: str, done: int, _total: int | None) -> None:
        if done == 1:
            fake.stop()

    plan = LoadPlan(concurrency=1, requests=4, warmup=0)
    [run] = sweep(target, synthetic("short", 8), [plan], Slo(), progress=stop_after_first)["runs"]
    assert run["completed"] == 1 and run["failed"] == 3
    [(reason, count)] = run["failures"].items()
    assert count == 3 and "Connect" in reason, reason


def test_ctrl_c_in_the_terminal_keeps_and_prints_the_loads_that_ran(fake: FakeOpenAI, tmp_path: Path) -> None:
    """Before, Ctrl+C left bench serve with a traceback and nothing written of the loads that had run."""
    import os
    import signal

    from tests.helpers.entry_point import ember_chat

    fake.stream(tokens_stream(2), pauses={0: 0.3})
    env = {**os.environ, "EMBER_DATA_DIR": str(tmp_path)}
    args = ["bench", "serve", "--target", fake.base_url, "--concurrency", "1,2", "--requests", "3", "--warmup", "0",
            "--workload", "short", "--json", "--save-result", str(tmp_path / "r.json")]  # fmt: skip
    with subprocess.Popen([ember_chat(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as proc:  # fmt: skip
        deadline = time.monotonic() + 60
        while len(fake.generate_requests()) < 4 and time.monotonic() < deadline:  # (the second load under way)
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Cancelled: the requests in flight end, what ran is kept" in err and "Traceback" not in err
    result = json.loads(out)
    assert json.loads((tmp_path / "r.json").read_text()) == result
    first = result["runs"][0]
    assert first["load"] == "concurrency 1" and first["completed"] == 3 and not first["cancelled"]
    assert len(result["runs"]) == 2 and result["runs"][1]["cancelled"]


def test_a_server_s_words_stay_in_their_cell_of_the_markdown_report() -> None:
    from ember_chat.engine.bench.serving.report import report_markdown

    context = {"model": "evil | model\n# Heading", "model_file": "/m.gguf (on the server)", "quant": "Q4_1"}
    lines = report_markdown({"context": context, "slo": {}, "answer": "A", "loads": []}).splitlines()
    assert "| Model | evil \\| model # Heading |" in lines and "# Heading" not in lines
    assert "| Model file | /m.gguf (on the server) |" in lines and "| Quantisation | Q4_1 |" in lines


def test_a_knob_sweep_varies_the_server_s_speculative_decoding_and_saves_only_the_load_settings(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """`speculative` is the server's default (serve --speculative), not a load setting: make_target is
    given it, `draft` without a draft model is not loaded, and the winner's speculative mode is a chat's
    setting: apply_winner saves the rest and nothing for it."""
    from ember_chat.engine.bench.serving.knobs import knob_sweep, saved_knobs

    assert parse_knob("speculative=off,AUTO,ngram,off") == Knob("speculative", ("off", "auto", "ngram"))
    assert parse_knob("spec=draft").values == ("draft",)
    for bad, said in [("speculative=fast", "--sweep speculative: 'fast' is not one of off, auto, ngram, draft"),
                      ("speculative=", "--sweep speculative: no value given")]:  # fmt: skip
        with pytest.raises(EmberError, match=said):
            parse_knob(bad)
    fake.stream(tokens_stream(4))
    made: list[tuple[int, str]] = []

    def make(config: LoadConfig, speculative: str = "auto") -> object:
        made.append((config.parallel, speculative))
        return url_target(fake.base_url)

    knobs = [Knob("parallel", (2,)), Knob("speculative", ("off", "draft", "ngram"))]
    plans = [LoadPlan(concurrency=1, requests=2, warmup=0)]
    result = knob_sweep(make, LoadConfig(Path("m.gguf")), knobs, workload_for("short"), plans, Slo())
    assert made == [(2, "off"), (2, "ngram")]
    assert [s["label"] for s in result["settings"]] == ["parallel=2, speculative=off", "parallel=2, speculative=ngram"]
    assert [s["label"] for s in result["skipped"]] == ["parallel=2, speculative=draft"]
    assert "no draft model" in result["skipped"][0]["reason"]
    with_draft = LoadConfig(Path("m.gguf"), draft_model=Path("d.gguf"), parallel=1)
    knob_sweep(make, with_draft, [Knob("speculative", ("draft",))], workload_for("short"), plans, Slo())
    assert made[-1] == (1, "draft")

    store = ModelSettingsStore(tmp_path / "model_settings.json")
    measured = LoadConfig(tmp_path / "m.gguf", n_ctx=1024, threads=1, parallel=1)
    assert saved_knobs({"parallel": 2, "speculative": "off"}) == ({"parallel": 2}, {"speculative": "off"})
    saved = apply_winner(store, "m.gguf", {"parallel": 2, "speculative": "off"}, measured)
    assert (
        saved is not None and saved.parallel == 2 and "speculative" not in json.loads(store.path.read_text())["m.gguf"]
    )
    assert apply_winner(store, "other.gguf", {"speculative": "ngram"}, measured) is None
    assert store.get("other.gguf") is None  # (nothing saved for a model that had no settings)


def test_a_local_target_serves_with_the_speculative_mode_swept(chat_starter_model: Path, tmp_path: Path) -> None:
    """Ember's API server in process, started with each mode: its `ember` figures name the mode it drafted
    with (none when off), and the run's context says it."""
    from ember_chat.engine.bench.serving.knobs import knob_sweep
    from ember_chat.engine.cli.bench_serve import local_target

    base = LoadConfig(chat_starter_model, n_ctx=1024, threads=1, parallel=1)
    runs: list[LoadRun] = []
    result = knob_sweep(
        lambda config, **server: local_target(config, "starter", tmp_path, **server), base,
        [Knob("speculative", ("off", "ngram"))], workload_for("short"), [LoadPlan(concurrency=1, requests=2,
        warmup=0)], Slo(ttft_ms=120_000, tpot_ms=10_000, e2el_ms=300_000), load_runs=runs,
    )  # fmt: skip
    assert [s["label"] for s in result["settings"]] == ["speculative=off", "speculative=ngram"]
    assert [s["context"]["load_settings"]["speculative"] for s in result["settings"]] == ["off", "ngram"]
    off, ngram = ([r.server for r in run.results] for run in runs)
    assert all(s is not None and s["source"] == "ember" and s["speculative_mode"] is None for s in off)
    assert all(s is not None and s["speculative_mode"] == "ngram" for s in ngram)


def test_multiturn_chats_reuse_their_prefix_on_ember_s_server(chat_starter_model: Path, tmp_path: Path) -> None:
    """Each later turn of a conversation is the earlier turns and answers plus a new one: Ember's server
    keeps the conversation's prefix, and its own figures (`ember`'s prompt_tokens_reused) say so."""
    from ember_chat.engine.cli.bench_serve import local_target

    target = local_target(LoadConfig(chat_starter_model, n_ctx=2048, threads=1, parallel=1), "starter", tmp_path)
    runs: list[LoadRun] = []
    try:
        workload = dataclasses.replace(workload_for("multiturn"), turns=3, answer=(24, 0.1, 16, 32))  # (short answers)
        sweep(target, workload, [LoadPlan(concurrency=1, requests=3, warmup=0)], Slo(), load_runs=runs)
    finally:
        target.close()
    [run] = runs
    assert [r.ok for r in run.results] == [True] * 3, [r.error for r in run.results]
    reused = [(r.server or {}).get("prompt_tokens_reused") for r in run.results]
    prompts = [(r.server or {}).get("prompt_tokens") for r in run.results]
    assert all(isinstance(n, int) for n in reused + prompts), run.results[0].server
    # (turn 2 carries turn 1's prompt and answer: at least that much is read from the KV cache)
    assert reused[1] > 0 and reused[2] > reused[1], (reused, prompts)
    assert reused[2] >= prompts[1], (reused, prompts)
