"""API benchmark: Ember's OpenAI-compatible server against Ember's engine directly and against
llama-cpp-python's own server — same model, threads, prompts and answer length, alternating order.

    python -m bench.api --model gemma-3-270m --threads 2 --json

Figures (medians over --runs):
- server_decode_ratio: decode tok/s through Ember's server (streaming, `openai` client, timed at the
  client) / the engine directly (timed where tokens are produced). Budget ≥ 0.97.
- server_ttft_overhead_ms: TTFT through the server minus direct. Budget ≤ 15 ms.
- vs_llama_cpp_python_server: Ember's server decode tok/s / llama-cpp-python's server decode tok/s,
  both timed the same way at the client. Budget ≥ 1.0. Plus both TTFTs.
- remote_metrics_error_ms: |Ember's client-side TTFT − the server's own reported prefill time|,
  against llama-cpp-python's server (its llama.cpp perf print on stderr) and Ember's server (its
  `ember.ttft_s` extension field).

Every prompt is unique to its path and run (same length), so no path reuses another's KV cache.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import openai

from ember_chat.engine.cli.common import load_blocking, resolve_model
from ember_chat.engine.core.params import LoadConfig, SamplingParams, default_threads
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service import EngineService, GenerationRequest, GenerationSink
from ember_chat.engine.storage.paths import AppPaths
from tests.peer_servers import free_port

STORY = (
    "Once upon a time, in a small village between two rivers, there lived a clockmaker who repaired the "
    "clocks of everyone in the valley. Every morning she opened her shop, lit the stove and listened to "
    "the ticking of a hundred clocks. One winter day a stranger brought her a clock that had no hands. "
)


def prompt(run: int, path: int) -> str:
    return f"Story {run % 10}{path}{path}: " + STORY * 2


class _Done(GenerationSink):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.metrics: GenerationMetrics | None = None

    def finished(self, reason: str, text: str, metrics: GenerationMetrics | None, itl_ms: list[float]) -> None:
        self.metrics = metrics
        self.done.set()


def run_direct(service: EngineService, text: str, max_tokens: int) -> dict[str, float]:
    sink = _Done()
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, repeat_penalty=1.0)
    service.submit(GenerationRequest(params, sink, prompt=text, client="bench", batch_s=0, snapshot_s=float("inf")))
    sink.done.wait()
    m = sink.metrics
    assert m is not None and m.output_tokens == max_tokens, m
    assert m.ttft_s is not None and m.decode_tokens_per_s is not None
    return {"ttft_ms": m.ttft_s * 1000, "decode_tps": m.decode_tokens_per_s}


def run_client(client: openai.OpenAI, model: str, text: str, max_tokens: int) -> dict[str, Any]:
    """Stream a completion with the official client; time tokens as they arrive."""
    t0 = time.perf_counter()
    stream = client.completions.create(
        model=model, prompt=text, max_tokens=max_tokens, temperature=0.0, stream=True,
        extra_body={"repeat_penalty": 1.0, "top_k": 40, "min_p": 0.05},
    )  # fmt: skip
    times: list[float] = []
    ember: dict[str, Any] | None = None
    finish = None
    with stream:
        for chunk in stream:
            now = time.perf_counter()
            if chunk.choices and chunk.choices[0].text:
                times.append(now)
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
                ember = (chunk.model_extra or {}).get("ember")
    assert finish == "length" and times, (finish, len(times))
    # a finish by length means max_tokens tokens; a server may hold some back and send them together
    decode = (max_tokens - 1) / (times[-1] - times[0])
    return {"ttft_ms": (times[0] - t0) * 1000, "decode_tps": decode, "ember": ember}


class ServerProcess:
    """An OpenAI-compatible server in its own process (as a user runs it), ready when its log says so.
    llama-cpp-python's runs with llama.cpp's log on stderr, to read its own prefill timings."""

    PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")

    def __init__(self, argv: list[str], ready_marker: str, port: int) -> None:
        self.port = port
        self.ready_marker = ready_marker
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.ready = threading.Event()
        self.prefill_ms: list[float] = []
        self.log: list[str] = []
        self.new_timing = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.ready.wait(180) or self.proc.poll() is not None:
            raise RuntimeError("server did not start:\n" + "".join(self.log[-20:]))

    @classmethod
    def llama_cpp_python(cls, model: Path, threads: int, n_ctx: int) -> ServerProcess:
        port = free_port()
        return cls(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
             "--n_threads_batch", str(threads), "--interrupt_requests", "false", "--verbose", "true"],
            "Uvicorn running on", port,
        )  # fmt: skip

    @classmethod
    def ember(cls, model: Path, threads: int, n_ctx: int) -> ServerProcess:
        port = free_port()
        return cls(
            [sys.executable, "-m", "ember_chat.engine.cli.main", "serve", "--model", str(model), "--port", str(port),
             "--threads", str(threads), "--ctx", str(n_ctx)],
            "Serving ", port,
        )  # fmt: skip

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if self.ready_marker in line:
                self.ready.set()
            m = self.PROMPT_EVAL.search(line)
            if m:
                with self.new_timing:
                    self.prefill_ms.append(float(m.group(1)))
                    self.new_timing.notify_all()
        self.ready.set()

    def next_prefill_ms(self, count_before: int) -> float | None:
        with self.new_timing:
            self.new_timing.wait_for(lambda: len(self.prefill_ms) > count_before, timeout=5)
            return self.prefill_ms[-1] if len(self.prefill_ms) > count_before else None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.reader.join()
        assert self.proc.stderr is not None
        self.proc.stderr.close()


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gemma-3-270m")  # Gemma 3 270M: figures comparable across runs
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    path = resolve_model(args.model, AppPaths.default())

    service = EngineService()
    load_blocking(service, LoadConfig(path, n_ctx=args.ctx, threads=args.threads), "ember")
    # Both servers in their own process, as users run them (a client in the server's process would
    # compete with it for the GIL)
    ember = ServerProcess.ember(path, args.threads, args.ctx)
    peer = ServerProcess.llama_cpp_python(path, args.threads, args.ctx)
    ember_model = path.name
    peer_model = str(path)
    rows: dict[str, list[dict[str, Any]]] = {"direct": [], "ember": [], "peer": []}
    peer_prefill_errors: list[float] = []
    ember_ttft_errors: list[float] = []
    # one client per server, made before timing (as an application keeps its client)
    ember_client = openai.OpenAI(base_url=ember.url, api_key="bench", max_retries=0)
    peer_client = openai.OpenAI(base_url=peer.url, api_key="bench", max_retries=0)
    try:
        # warm-up: the first request of each path pays one-off costs (page faults, first graph)
        run_direct(service, prompt(9, 7), 8)
        run_client(ember_client, ember_model, prompt(9, 8), 8)
        run_client(peer_client, peer_model, prompt(9, 9), 8)
        order = ["direct", "ember", "peer"]
        for i in range(args.runs):
            for k, name in enumerate(order):
                text = prompt(i, k + 1)
                if name == "direct":
                    rows[name].append(run_direct(service, text, args.max_tokens))
                elif name == "ember":
                    r = run_client(ember_client, ember_model, text, args.max_tokens)
                    rows[name].append(r)
                    if r["ember"] and r["ember"]["ttft_s"] is not None:
                        ember_ttft_errors.append(abs(r["ttft_ms"] - r["ember"]["ttft_s"] * 1000))
                else:
                    before = len(peer.prefill_ms)
                    r = run_client(peer_client, peer_model, text, args.max_tokens)
                    rows[name].append(r)
                    reported = peer.next_prefill_ms(before)
                    if reported is not None:
                        peer_prefill_errors.append(abs(r["ttft_ms"] - reported))
            order = order[1:] + order[:1]  # alternate who goes first
    finally:
        ember_client.close()
        peer_client.close()
        peer.close()
        ember.close()
        service.close()

    def med(name: str, key: str) -> float:
        return median([r[key] for r in rows[name]])

    figures = {
        "model": path.name,
        "threads": args.threads,
        "runs": args.runs,
        "max_tokens": args.max_tokens,
        "prompt_chars": len(prompt(0, 1)),
        "direct_decode_tps": med("direct", "decode_tps"),
        "server_decode_tps": med("ember", "decode_tps"),
        "llama_cpp_python_server_decode_tps": med("peer", "decode_tps"),
        "server_decode_ratio": med("ember", "decode_tps") / med("direct", "decode_tps"),
        "direct_ttft_ms": med("direct", "ttft_ms"),
        "server_ttft_ms": med("ember", "ttft_ms"),
        "llama_cpp_python_server_ttft_ms": med("peer", "ttft_ms"),
        "server_ttft_overhead_ms": med("ember", "ttft_ms") - med("direct", "ttft_ms"),
        "vs_llama_cpp_python_server": med("ember", "decode_tps") / med("peer", "decode_tps"),
        "remote_metrics_error_ms": median(peer_prefill_errors) if peer_prefill_errors else None,
        "llama_cpp_python_reported_prefill_ms": median(peer.prefill_ms[-args.runs :]) if peer.prefill_ms else None,
        "ember_server_ttft_error_ms": median(ember_ttft_errors) if ember_ttft_errors else None,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for k, v in figures.items():
            print(f"{k:40} {v:.3f}" if isinstance(v, float) else f"{k:40} {v}")


if __name__ == "__main__":
    main()
