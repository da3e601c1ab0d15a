"""The serving lab's fidelity (issue 32): are its figures the server's, not the client's?

    python -m bench.serving_fidelity              # JSON on stdout
    python -m bench.serving_fidelity --quick      # a tiny run that checks the machinery

1. Against llama.cpp's `llama-server` (built from the pinned source by bench.llama_tools) on the chat
   starter (or --model), a `short` sweep at concurrency 1 and 2 (`-np 2`): per request, the lab's TTFT
   against the server's own `prompt_ms`, and the lab's decode rate against its `predicted_per_second`.
   The lab's decode rate is 1/TPOT: the time from its first content chunk to the stream's end over the
   tokens after the first. llama-server divides the same span by the same count (its `predicted_ms` runs
   from the first token to the last; its `predicted_n` counts the first token, its
   `predicted_per_second` does not), so the two measure one thing. The lab's TTFT also holds what the
   server's prefill time does not: the HTTP request, the chat template and tokenization, and the first
   chunk's way back. Budget: the median of the per-request relative differences (lab − server) / server
   within 5 % for both.
2. The load generator's own overhead, against an instant server in its own process (a stdlib HTTP/1.1
   server answering every request with a stream rendered beforehand): how many requests/s the lab
   completes with short answers (closed loop, 8 users), whether an open loop at 50 requests/s sends each
   request at its time (lateness p99) and keeps the rate, and how many streamed tokens/s it reads (4
   users, long answers, one event a token). Budgets: ≥ 50 requests/s, ≥ 5,000 tokens/s.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from bench.api import ServerProcess
from bench.llama_tools import find_tool
from ember_chat.engine.bench.serving.client import RequestResult
from ember_chat.engine.bench.serving.load import LoadPlan, LoadRun
from ember_chat.engine.bench.serving.report import sweep
from ember_chat.engine.bench.serving.summary import Slo
from ember_chat.engine.bench.serving.targets import url_target
from ember_chat.engine.bench.serving.workload import RequestSpec, Workload, workload_for

FIDELITY_BUDGET = 0.05  # the median relative difference, TTFT and decode rate
REQUESTS_BUDGET = 50.0  # requests/s the load generator issues
TOKENS_BUDGET = 5000.0  # streamed tokens/s it reads


def relative(lab: float, server: float) -> float | None:
    return (lab - server) / server if server > 0 else None


def compare(results: Sequence[RequestResult]) -> dict[str, Any]:
    """Per request (answered, with llama-server's timings), the lab's TTFT and decode rate against the
    server's prefill time and decode rate; the medians of the relative differences and the budget."""
    rows: list[dict[str, Any]] = []
    for r in results:
        timings = r.server or {}
        if not r.ok or r.ttft_s is None or r.e2el_s is None or timings.get("source") != "timings":
            continue
        prompt_ms, server_rate = timings.get("prompt_ms"), timings.get("predicted_per_second")
        tpot = r.tpot_s
        lab_rate = 1.0 / tpot if tpot else None
        row: dict[str, Any] = {
            "lab_ttft_ms": r.ttft_s * 1000,
            "server_prompt_ms": prompt_ms,
            "ttft_diff": relative(r.ttft_s * 1000, prompt_ms) if isinstance(prompt_ms, int | float) else None,
            "lab_decode_tokens_per_s": lab_rate,
            "server_decode_tokens_per_s": server_rate,
            "decode_diff": (
                relative(lab_rate, server_rate)
                if lab_rate is not None and isinstance(server_rate, int | float)
                else None
            ),
            "tokens": r.output_tokens,
            "server_tokens": timings.get("predicted_n"),
        }
        rows.append(row)
    out: dict[str, Any] = {"compared": len(rows), "requests": len(results)}
    for key in ("ttft_diff", "decode_diff"):
        diffs = [row[key] for row in rows if row[key] is not None]
        out[f"median_{key}"] = statistics.median(diffs) if diffs else None
        out[f"median_abs_{key}"] = statistics.median(abs(d) for d in diffs) if diffs else None
    medians = [out["median_ttft_diff"], out["median_decode_diff"]]
    out["budget_met"] = all(m is not None and abs(m) <= FIDELITY_BUDGET for m in medians) and bool(rows)
    out["rows"] = rows
    return out


def fidelity(model: Path, requests: int, threads: int) -> dict[str, Any]:
    """The sweep against llama-server on `model`, compared request by request (None: not built)."""
    tool = find_tool("llama-server")
    if tool is None:
        return {"skipped": "llama-server is not built (python -m bench.llama_tools --build)"}
    server = ServerProcess.llama_server(tool, model, threads=threads, n_ctx=2048, parallel=2)
    try:
        target = url_target(f"http://127.0.0.1:{server.port}/v1")
        plans = [LoadPlan(concurrency=c, requests=requests) for c in (1, 2)]
        runs: list[LoadRun] = []
        result = sweep(target, workload_for("short", count=4 * requests + 8), plans, Slo(), load_runs=runs)
    finally:
        server.close()
    per_load = {}
    for run in runs:
        compared = compare(run.results)
        compared.pop("rows")
        per_load[run.plan.label] = compared
    every = compare([r for run in runs for r in run.results])
    return {
        "llama_server": str(tool),
        "model": model.name,
        "threads": threads,
        "failed": sum(r["failed"] for r in result["runs"]),
        "loads": per_load,
        **{k: v for k, v in every.items() if k != "rows"},
        "rows": every["rows"],
    }


# --- the instant server: what the load generator can do when the server costs nothing -------------


def _stream_body(tokens: int) -> bytes:
    event = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": " a"}}]}
    frame = b"data: " + json.dumps(event).encode() + b"\n\n"
    usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}}
    return frame * tokens + b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"


class _Instant(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # (keep-alive: the lab's client reuses its connections)
    bodies: ClassVar[dict[int, bytes]] = {}  # (a stream per length, rendered once)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(
            b'{"object":"list","data":[{"id":"instant","object":"model","owned_by":"bench"}]}', "application/json"
        )

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        tokens = int(request.get("max_tokens") or 16)
        body = self.bodies.get(tokens)
        if body is None:
            body = self.bodies[tokens] = _stream_body(tokens)
        self._send(body, "text/event-stream")


class _InstantServer(ThreadingHTTPServer):
    # (the default backlog of 5 drops a burst of 8 users' connections: each waits out a SYN
    # retransmission, a second — the server's cost, not the client's)
    request_queue_size = 128


def _serve_instant(port_out: Any) -> None:
    server = _InstantServer(("127.0.0.1", 0), _Instant)
    server.daemon_threads = True
    port_out.put(server.server_address[1])
    server.serve_forever()


def _workload(tokens: int, count: int) -> Workload:
    specs = tuple(RequestSpec((("user", f"question {i}"),), tokens) for i in range(count))
    return Workload(f"{tokens} tokens", f"{tokens}-token answers from an instant server", specs)


def overhead(requests: int, long_tokens: int) -> dict[str, Any]:
    """What the lab's load generator reaches against the instant server (its own process)."""
    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    proc = ctx.Process(target=_serve_instant, args=(ports,), daemon=True)
    proc.start()
    try:
        target = url_target(f"http://127.0.0.1:{ports.get(timeout=30)}/v1")

        def one(plan: LoadPlan, tokens: int) -> tuple[dict[str, Any], LoadRun]:
            runs: list[LoadRun] = []
            result = sweep(target, _workload(tokens, plan.requests or 1), [plan], Slo(), load_runs=runs)
            return result["runs"][0], runs[0]

        closed, _ = one(LoadPlan(concurrency=8, requests=requests, warmup=2), 16)
        rate = REQUESTS_BUDGET
        _, run = one(LoadPlan(rate=rate, requests=max(20, requests // 4), warmup=2), 16)
        late = sorted((r.sent_s - r.scheduled_s) * 1000 for r in run.results)
        streamed, _ = one(LoadPlan(concurrency=4, requests=max(4, requests // 25), warmup=1), long_tokens)
    finally:
        proc.terminate()
        proc.join(10)
    sent, due = sorted(r.sent_s for r in run.results), sorted(r.scheduled_s for r in run.results)
    # (the rate the requests went out at, against the rate their drawn times asked for: a Poisson draw
    # of a few dozen arrivals is not exactly 50/s)
    sent_rate = (len(sent) - 1) / (sent[-1] - sent[0]) if sent[-1] > sent[0] else 0.0
    due_rate = (len(due) - 1) / (due[-1] - due[0]) if due[-1] > due[0] else 0.0
    out = {
        "requests_per_s": closed["requests_per_s"],
        "requests_failed": closed["failed"],
        "open_loop_rate": rate,
        "open_loop_scheduled_per_s": due_rate,
        "open_loop_sent_per_s": sent_rate,
        "open_loop_lateness_ms_p50": statistics.median(late),
        "open_loop_lateness_ms_p99": late[min(len(late) - 1, int(0.99 * len(late)))],
        "tokens_per_s": streamed["output_tokens_per_s"],
        "tokens_failed": streamed["failed"],
        "tokens_per_answer": long_tokens,
    }
    out["budget_met"] = (
        out["requests_per_s"] >= REQUESTS_BUDGET
        and out["tokens_per_s"] >= TOKENS_BUDGET
        and out["requests_failed"] == 0
        and out["open_loop_lateness_ms_p99"] < 10.0
        and out["tokens_failed"] == 0
    )
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a GGUF (default: the chat starter, SmolLM2 135M Q4_1)")
    ap.add_argument("--requests", type=int, default=12, help="requests per load against llama-server")
    ap.add_argument("--threads", type=int, default=1, help="llama-server's threads (the lab needs a core too)")
    ap.add_argument("--quick", action="store_true", help="a tiny run: 3 requests a load, fewer instant ones")
    ap.add_argument("--rows", action="store_true", help="keep every request's comparison in the JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.model is None:
        from ember_chat.engine.models.starter import STARTER_ALIAS, starter_model_path

        args.model = starter_model_path(Path(tempfile.mkdtemp(prefix="ember-bench-")), STARTER_ALIAS)
    requests = 3 if args.quick else args.requests
    measured = fidelity(args.model, requests, args.threads)
    if not args.rows:
        measured.pop("rows", None)
    result = {
        "fidelity": measured,
        "load_generator": overhead(40 if args.quick else 400, 500 if args.quick else 2000),
        "budgets": {"median_relative_difference": FIDELITY_BUDGET, "requests_per_s": REQUESTS_BUDGET,
                    "tokens_per_s": TOKENS_BUDGET},
    }  # fmt: skip
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
