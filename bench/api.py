"""API benchmark: Ember's OpenAI-compatible server against Ember's engine directly, against
llama-cpp-python's own server and against llama.cpp's own `llama-server` (when bench.llama_tools has
built it) — same model, threads, context, prompts and answer length, one client, alternating order.

    python -m bench.api --model gemma-3-270m --threads 2 --json
    python -m bench.api --quick --json            # a tiny run (seconds) that checks the machinery

Figures (medians over --runs):
- server_decode_ratio: decode tok/s through Ember's server (streaming, `openai` client, timed at the
  client) / the engine directly (timed where tokens are produced). Budget ≥ 0.97.
- server_ttft_overhead_ms: TTFT through the server minus direct. Budget ≤ 15 ms.
- vs_llama_cpp_python_server: Ember's server decode tok/s / llama-cpp-python's server decode tok/s,
  both timed the same way at the client. Budget ≥ 1.0. Plus both TTFTs.
- vs_llama_server_decode: Ember's server decode tok/s / llama-server's (budget ≥ 0.97);
  vs_llama_server_ttft: Ember's server TTFT / llama-server's (budget ≤ 1.0). None when it is not built.
- with --before CHECKOUT (another checkout of Ember, e.g. `git worktree add /tmp/before <rev>`): a
  second Ember server run from that checkout's code (same virtual environment, its engine/ and app/ put
  first on PYTHONPATH), in the same alternation: before_decode_ratio and before_ttft_overhead_ms as the
  server's figures, and move_decode_ratio (this checkout's server / that one's decode tok/s, budget
  >= 0.97) and move_ttft_ms (this one's TTFT minus that one's, budget <= +5 ms) — a change to the
  server measured on the same machine at the same time.
- remote_metrics_error_ms: |Ember's client-side TTFT − the server's own reported prefill time|,
  against llama-cpp-python's server (its llama.cpp perf print on stderr) and Ember's server (its
  `ember.ttft_s` extension field).

Every prompt is unique to its path and run (same length), so no path reuses another's KV cache. Ember's
server runs with a data and settings folder of its own (a temporary one): the user's presets and saved
caches play no part.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from bench.llama_tools import LLAMA_SERVER_READY, find_tool, llama_server_command
from ember_chat.engine.cli.common import load_blocking, resolve_model
from ember_chat.engine.core.params import SPECS, LoadConfig, SamplingParams, default_threads
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.peer_servers import free_port
from tests.helpers.sinks import RecordingSink

STORY = (
    "Once upon a time, in a small village between two rivers, there lived a clockmaker who repaired the "
    "clocks of everyone in the valley. Every morning she opened her shop, lit the stove and listened to "
    "the ticking of a hundred clocks. One winter day a stranger brought her a clock that had no hands. "
)
PATHS = ("direct", "ember", "peer", "llama_server", "ember_before")


def prompt(run: int, path: int) -> str:
    return f"Story {run % 10}{path}{path}: " + STORY * 2


def add_flash_attn_option(ap: argparse.ArgumentParser) -> None:
    """--flash-attn / --no-flash-attn for every side of a comparison; default: Ember's own (the load
    parameter table's), and each side is told explicitly (llama.cpp's programs default to 'auto')."""
    default = bool(SPECS["flash_attn"].default)
    ap.add_argument(
        "--flash-attn",
        action=argparse.BooleanOptionalAction,
        default=default,
        help=f"flash attention for every side (default: Ember's, {'on' if default else 'off'})",
    )


def ember_flash_attn_flag(on: bool) -> str:
    return "--flash-attn" if on else "--no-flash-attn"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ratio(numerator: float | None, denominator: float | None, digits: int = 4) -> float | None:
    """numerator / denominator rounded, or None when either is missing (a peer not measured) or 0."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, digits)


def run_direct(service: EngineService, text: str, max_tokens: int) -> dict[str, float]:
    sink = RecordingSink()
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, repeat_penalty=1.0)
    service.submit(GenerationRequest(params, sink, prompt=text, client="bench", batch_s=0, snapshot_s=float("inf")))
    sink.done.wait()
    m = sink.final
    assert m is not None and m.output_tokens == max_tokens, m
    assert m.ttft_s is not None and m.decode_tokens_per_s is not None
    return {"ttft_ms": m.ttft_s * 1000, "decode_tps": m.decode_tokens_per_s}


@dataclass
class Stream:
    """One streamed completion as the client saw it (perf_counter seconds)."""

    t0: float  # the request was sent
    times: list[float]  # each chunk with text arrived
    finish: str | None
    ember: dict[str, Any] | None  # Ember's extension field on the last chunk
    text: str


def stream_completion(
    client: openai.OpenAI,
    model: str,
    text: str,
    max_tokens: int,
    t0: float | None = None,
    extra: dict[str, Any] | None = None,
) -> Stream:
    """Stream a greedy completion with the official client; time text as it arrives. `t0`: the moment
    the request counts from (default: now); `extra`: more request fields (e.g. ignore_eos)."""
    t0 = time.perf_counter() if t0 is None else t0
    stream = client.completions.create(
        model=model, prompt=text, max_tokens=max_tokens, temperature=0.0, stream=True,
        extra_body={"repeat_penalty": 1.0, "top_k": 40, "min_p": 0.05, **(extra or {})},
    )  # fmt: skip
    times: list[float] = []
    parts: list[str] = []
    ember: dict[str, Any] | None = None
    finish = None
    with stream:
        for chunk in stream:
            now = time.perf_counter()
            if chunk.choices and chunk.choices[0].text:
                times.append(now)
                parts.append(chunk.choices[0].text)
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
                ember = (chunk.model_extra or {}).get("ember")
    return Stream(t0, times, finish, ember, "".join(parts))


def run_client(client: openai.OpenAI, model: str, text: str, max_tokens: int) -> dict[str, Any]:
    s = stream_completion(client, model, text, max_tokens)
    assert s.finish == "length" and s.times, (s.finish, len(s.times))
    # a finish by length means max_tokens tokens; a server may hold some back and send them together
    decode = (max_tokens - 1) / (s.times[-1] - s.times[0])
    return {"ttft_ms": (s.times[0] - s.t0) * 1000, "decode_tps": decode, "ember": s.ember}


class ServerProcess:
    """An OpenAI-compatible server in its own process (as a user runs it), ready when its log says so.
    llama-cpp-python's runs with llama.cpp's log on stderr, to read its own prefill timings (llama-server
    prints the same line)."""

    PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")

    def __init__(
        self, argv: list[str], ready_marker: str, port: int, isolated: bool = False, code: Path | None = None
    ) -> None:
        self.port = port
        self.ready_marker = re.compile(ready_marker)
        # Ember's own folders for this run: no user preset changes its sampling, no cache lands in the
        # user's data folder
        self.home = tempfile.TemporaryDirectory(prefix="ember-bench-") if isolated else None
        env = None
        if self.home is not None:
            env = dict(os.environ, EMBER_DATA_DIR=f"{self.home.name}/data", EMBER_CONFIG_DIR=f"{self.home.name}/config")
        if code is not None:  # another checkout's Ember (its packages found before the installed ones)
            env = dict(env or os.environ, PYTHONPATH=os.pathsep.join([str(code / "engine"), str(code / "app")]))
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.ready = threading.Event()
        self.started = False  # its ready line was seen (ready is also set when its log ends)
        self.prefill_ms: list[float] = []
        self.log: list[str] = []
        self.new_timing = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.ready.wait(180) or not self.started or self.proc.poll() is not None:
            log = "".join(self.log[-20:])
            self.close()
            raise RuntimeError(f"{Path(argv[0]).name} {argv[1:3]} did not start:\n{log}")

    @classmethod
    def llama_cpp_python(cls, model: Path, threads: int, n_ctx: int, flash_attn: bool = False) -> ServerProcess:
        port = free_port()
        return cls(
            [sys.executable, "-m", "tests.helpers.llama_cpp_server", "--model", str(model), "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
             "--n_threads_batch", str(threads), "--interrupt_requests", "false", "--verbose", "true",
             "--flash_attn", str(flash_attn).lower()],
            "Uvicorn running on", port,
        )  # fmt: skip

    @classmethod
    def ember(
        cls, model: Path, threads: int, n_ctx: int, extra: Sequence[str] = (), code: Path | None = None
    ) -> ServerProcess:
        """Ember's server; `code`: another checkout whose code it runs (--before)."""
        port = free_port()
        return cls(
            [sys.executable, "-m", "ember_chat.engine.cli.main", "serve", "--model", str(model), "--port", str(port),
             "--threads", str(threads), "--ctx", str(n_ctx), *extra],
            "Serving ", port, isolated=True, code=code,
        )  # fmt: skip

    @classmethod
    def llama_server(
        cls, tool: Path, model: Path, threads: int, n_ctx: int, parallel: int | None = None, flash_attn: bool = False
    ) -> ServerProcess:
        port = free_port()
        command = llama_server_command(tool, model, port, threads, n_ctx, parallel=parallel, flash_attn=flash_attn)
        return cls(command, LLAMA_SERVER_READY, port)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if self.ready_marker.search(line):
                self.started = True
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
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join()
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        if self.home is not None:
            self.home.cleanup()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gemma-3-270m")  # Gemma 3 270M: figures comparable across runs
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=2048)
    add_flash_attn_option(ap)
    ap.add_argument("--no-llama-server", action="store_true", help="leave llama.cpp's llama-server out")
    ap.add_argument("--before", type=Path, help="another checkout of Ember whose server is measured beside this one's")
    ap.add_argument("--quick", action="store_true", help="a tiny run: 1 round of 16 tokens (checks the machinery)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.max_tokens, args.ctx = 1, 16, 1024
    return args


def figures(
    args: argparse.Namespace, model: str, rows: dict[str, list[dict[str, Any]]], extra: dict[str, Any]
) -> dict[str, Any]:
    """The printed figures from each path's rows (a path not measured: its figures None)."""

    def med(name: str, key: str) -> float | None:
        return median([r[key] for r in rows[name]]) if rows.get(name) else None

    server_ttft, direct_ttft = med("ember", "ttft_ms"), med("direct", "ttft_ms")
    before_ttft = med("ember_before", "ttft_ms")
    return {
        "model": model,
        "threads": args.threads,
        "runs": args.runs,
        "max_tokens": args.max_tokens,
        "ctx": args.ctx,
        "flash_attn": args.flash_attn,
        "prompt_chars": len(prompt(0, 1)),
        "direct_decode_tps": med("direct", "decode_tps"),
        "server_decode_tps": med("ember", "decode_tps"),
        "llama_cpp_python_server_decode_tps": med("peer", "decode_tps"),
        "llama_server_decode_tps": med("llama_server", "decode_tps"),
        "server_decode_ratio": ratio(med("ember", "decode_tps"), med("direct", "decode_tps")),
        "direct_ttft_ms": direct_ttft,
        "server_ttft_ms": server_ttft,
        "llama_cpp_python_server_ttft_ms": med("peer", "ttft_ms"),
        "llama_server_ttft_ms": med("llama_server", "ttft_ms"),
        "server_ttft_overhead_ms": None if server_ttft is None or direct_ttft is None else server_ttft - direct_ttft,
        "vs_llama_cpp_python_server": ratio(med("ember", "decode_tps"), med("peer", "decode_tps")),
        "vs_llama_server_decode": ratio(med("ember", "decode_tps"), med("llama_server", "decode_tps")),
        "vs_llama_server_ttft": ratio(server_ttft, med("llama_server", "ttft_ms")),
        "before_decode_tps": med("ember_before", "decode_tps"),
        "before_decode_ratio": ratio(med("ember_before", "decode_tps"), med("direct", "decode_tps")),
        "before_ttft_ms": before_ttft,
        "before_ttft_overhead_ms": None if before_ttft is None or direct_ttft is None else before_ttft - direct_ttft,
        "move_decode_ratio": ratio(med("ember", "decode_tps"), med("ember_before", "decode_tps")),
        "move_ttft_ms": None if before_ttft is None or server_ttft is None else server_ttft - before_ttft,
        **extra,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = resolve_model(args.model, AppPaths.default())
    llama_server = None if args.no_llama_server else find_tool("llama-server")

    service = EngineService()
    load_blocking(service, LoadConfig(path, n_ctx=args.ctx, threads=args.threads, flash_attn=args.flash_attn), "ember")
    # Every server in its own process, as users run them (a client in the server's process would
    # compete with it for the GIL)
    fa = [ember_flash_attn_flag(args.flash_attn)]
    servers: dict[str, ServerProcess] = {}
    clients: dict[str, openai.OpenAI] = {}
    names = {"ember": path.name, "peer": str(path), "llama_server": path.name, "ember_before": path.name}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in PATHS}
    peer_prefill_errors: list[float] = []
    llama_prefill_errors: list[float] = []
    ember_ttft_errors: list[float] = []
    try:
        servers["ember"] = ServerProcess.ember(path, args.threads, args.ctx, fa)
        if args.before is not None:
            servers["ember_before"] = ServerProcess.ember(path, args.threads, args.ctx, fa, code=args.before)
        servers["peer"] = ServerProcess.llama_cpp_python(path, args.threads, args.ctx, args.flash_attn)
        if llama_server is not None:
            servers["llama_server"] = ServerProcess.llama_server(
                llama_server, path, args.threads, args.ctx, flash_attn=args.flash_attn
            )
        # one client per server, made before timing (as an application keeps its client)
        for name, server in servers.items():
            clients[name] = openai.OpenAI(base_url=server.url, api_key="bench", max_retries=0)
        # warm-up: the first request of each path pays one-off costs (page faults, first graph)
        run_direct(service, prompt(9, 7), 8)
        for k, name in enumerate(clients):
            run_client(clients[name], names[name], prompt(9, 8 + k), 8)
        order = ["direct", *clients]
        for i in range(args.runs):
            for name in order:
                text = prompt(i, PATHS.index(name) + 1)
                if name == "direct":
                    rows[name].append(run_direct(service, text, args.max_tokens))
                    continue
                server = servers[name]
                before = len(server.prefill_ms)
                r = run_client(clients[name], names[name], text, args.max_tokens)
                rows[name].append(r)
                if name in ("ember", "ember_before"):
                    if name == "ember" and r["ember"] and r["ember"]["ttft_s"] is not None:
                        ember_ttft_errors.append(abs(r["ttft_ms"] - r["ember"]["ttft_s"] * 1000))
                    continue
                reported = server.next_prefill_ms(before)
                if reported is not None:
                    errors = peer_prefill_errors if name == "peer" else llama_prefill_errors
                    errors.append(abs(r["ttft_ms"] - reported))
            order = order[1:] + order[:1]  # alternate who goes first
    finally:
        for client in clients.values():
            client.close()
        for server in servers.values():
            server.close()
        service.close()

    peer = servers["peer"]
    result = figures(
        args,
        path.name,
        rows,
        {
            "llama_server": str(llama_server) if llama_server else None,
            "remote_metrics_error_ms": median(peer_prefill_errors) if peer_prefill_errors else None,
            "llama_server_metrics_error_ms": median(llama_prefill_errors) if llama_prefill_errors else None,
            "llama_cpp_python_reported_prefill_ms": median(peer.prefill_ms[-args.runs :]) if peer.prefill_ms else None,
            "ember_server_ttft_error_ms": median(ember_ttft_errors) if ember_ttft_errors else None,
        },
    )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k:40} {v:.3f}" if isinstance(v, float) else f"{k:40} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
