"""Many clients at once: 1, 2 and 4 concurrent streaming clients (the real `openai` client, one thread
and one connection each, all released together) against Ember's API server (`ember-chat serve --parallel
4`, its own process) and, when bench.llama_tools has built it, llama.cpp's `llama-server -np 4` on the
same model, threads, context and flash-attention setting — rounds alternating between the two servers,
medians over the rounds.

    python -m bench.concurrency --json
    python -m bench.concurrency --quick --json       # a tiny run that checks the machinery

Each client asks for exactly `--max-tokens` greedy tokens (`ignore_eos`) of a prompt of its own (unique to
the server, round, client count and client: no server reuses another request's cache). For N clients:
- aggregate_tokens_per_s_N: all clients' tokens / the time from the common start to the last token;
- worst_ttft_s_N: the slowest client's first token, from the common start;
- single_tokens_per_s: aggregate_tokens_per_s_1 (the same formula: one client's tokens / its whole time);
  single_decode_tokens_per_s: that client's first-to-last token rate.
`llama_server_*`: the same for llama-server; `ratio_*`: Ember / llama-server; `scaling_4` (and
`llama_server_scaling_4`): aggregate with 4 clients / single. Budgets (issue 20): scaling_4 ≥ 1.4,
ratio_aggregate_4 ≥ 0.95, ratio_worst_ttft_4 ≤ 2.
`identical` (and `llama_server_identical`): after the timed rounds, four prompts answered concurrently
and then each alone give the same text.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from bench.api import STORY, ServerProcess, add_flash_attn_option, ember_flash_attn_flag, ratio, stream_completion
from bench.llama_tools import find_tool
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import SPECULATIVE_MODES, default_threads
from ember_chat.engine.storage.paths import AppPaths

SERVERS = ("ember", "llama_server")


@dataclass(frozen=True)
class ClientResult:
    ttft_s: float  # from the common start
    end_s: float  # the last token, from the common start
    tokens: int
    decode_tokens_per_s: float | None
    text: str


def concurrent_prompts(server: str, round_: int, n: int) -> list[str]:
    """n prompts of the same length, unique to this server, round and client count."""
    s = SERVERS.index(server) if server in SERVERS else 9
    return [f"Tale {round_ % 10}{n}{k}{s}: " + STORY * 2 for k in range(n)]


def run_concurrently(
    clients: Sequence[openai.OpenAI], model: str, prompts: Sequence[str], max_tokens: int
) -> list[ClientResult]:
    """Every prompt streamed at the same moment, each on its own client and thread (joined)."""
    go = threading.Event()
    t0: list[float] = []
    results: list[ClientResult | BaseException | None] = [None] * len(prompts)

    def one(k: int) -> None:
        go.wait()
        try:
            s = stream_completion(clients[k], model, prompts[k], max_tokens, t0[0], {"ignore_eos": True})
            if s.finish != "length" or not s.times:
                raise RuntimeError(f"client {k} ended with {s.finish!r} after {len(s.times)} chunks")
            decode = (max_tokens - 1) / (s.times[-1] - s.times[0]) if s.times[-1] > s.times[0] else None
            results[k] = ClientResult(s.times[0] - s.t0, s.times[-1] - s.t0, max_tokens, decode, s.text)
        except BaseException as exc:  # (re-raised on the calling thread)
            results[k] = exc

    threads = [threading.Thread(target=one, args=(k,), name=f"bench-client-{k}") for k in range(len(prompts))]
    for t in threads:
        t.start()
    t0.append(time.perf_counter())
    go.set()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return [r for r in results if isinstance(r, ClientResult)]


def round_figures(results: Sequence[ClientResult]) -> dict[str, float]:
    """One round of N clients: aggregate tok/s, worst TTFT, and (one client) its decode rate."""
    figures = {
        "aggregate_tokens_per_s": sum(r.tokens for r in results) / max(r.end_s for r in results),
        "worst_ttft_s": max(r.ttft_s for r in results),
    }
    if len(results) == 1 and results[0].decode_tokens_per_s is not None:
        figures["decode_tokens_per_s"] = results[0].decode_tokens_per_s
    return figures


def summarize(
    rounds: dict[str, dict[int, list[dict[str, float]]]], counts: Sequence[int], identical: dict[str, bool | None]
) -> dict[str, Any]:
    """The printed keys from each server's rounds ({server: {clients: [round figures]}}); a server that
    was not measured gives None for its keys and ratios."""

    def med(server: str, n: int, key: str) -> float | None:
        values = [r[key] for r in rounds.get(server, {}).get(n, []) if key in r]
        return round(statistics.median(values), 4) if values else None

    out: dict[str, Any] = {}
    for server in SERVERS:
        prefix = "" if server == "ember" else "llama_server_"
        out[f"{prefix}single_tokens_per_s"] = med(server, 1, "aggregate_tokens_per_s")
        out[f"{prefix}single_decode_tokens_per_s"] = med(server, 1, "decode_tokens_per_s")
        for n in counts:
            if n > 1:
                out[f"{prefix}aggregate_tokens_per_s_{n}"] = med(server, n, "aggregate_tokens_per_s")
            out[f"{prefix}worst_ttft_s_{n}"] = med(server, n, "worst_ttft_s")
        if 4 in counts:
            single = out[f"{prefix}single_tokens_per_s"]
            out[f"{prefix}scaling_4"] = ratio(out[f"{prefix}aggregate_tokens_per_s_4"], single)
        out[f"{prefix}identical"] = identical.get(server)
    out["ratio_single"] = ratio(out["single_tokens_per_s"], out["llama_server_single_tokens_per_s"])
    for n in counts:
        if n > 1:
            out[f"ratio_aggregate_{n}"] = ratio(
                out[f"aggregate_tokens_per_s_{n}"], out[f"llama_server_aggregate_tokens_per_s_{n}"]
            )
        out[f"ratio_worst_ttft_{n}"] = ratio(out[f"worst_ttft_s_{n}"], out[f"llama_server_worst_ttft_s_{n}"])
    return out


def check_identical(clients: Sequence[openai.OpenAI], model: str, server: str, max_tokens: int) -> bool:
    """Four prompts answered together, then each alone: the same greedy text."""
    prompts = concurrent_prompts(server, 99, len(clients))
    together = [r.text for r in run_concurrently(clients, model, prompts, max_tokens)]
    alone = [run_concurrently(clients[:1], model, [p], max_tokens)[0].text for p in prompts]
    return together == alone


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gemma-3-270m")  # Gemma 3 270M: the figures
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--ctx", type=int, default=4096, help="context, shared by all sequences (both servers)")
    ap.add_argument("--parallel", type=int, default=4, help="Ember's --parallel and llama-server's -np")
    ap.add_argument("--clients", default="1,2,4", help="client counts, comma-separated")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5, help="rounds (each: every client count, both servers)")
    add_flash_attn_option(ap)
    ap.add_argument("--no-llama-server", action="store_true", help="leave llama.cpp's llama-server out")
    ap.add_argument(
        "--speculative", choices=SPECULATIVE_MODES, default=None, help="Ember's serve --speculative (default: its own)"
    )
    ap.add_argument("--quick", action="store_true", help="a tiny run: 1 round of 8 tokens (checks the machinery)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.max_tokens, args.ctx = 1, 8, 1024
    args.counts = sorted({int(x) for x in args.clients.split(",")})
    if not args.counts or min(args.counts) < 1:
        ap.error("--clients takes positive counts, e.g. 1,2,4")
    return args


def start_servers(args: argparse.Namespace, path: Path) -> dict[str, ServerProcess]:
    servers: dict[str, ServerProcess] = {}
    tool = None if args.no_llama_server else find_tool("llama-server")
    try:
        extra = ["--parallel", str(args.parallel), "--no-kv-snapshots", "--queue", "64"]
        extra.append(ember_flash_attn_flag(args.flash_attn))
        if args.speculative is not None:
            extra += ["--speculative", args.speculative]
        servers["ember"] = ServerProcess.ember(path, args.threads, args.ctx, extra)
        if tool is not None:
            servers["llama_server"] = ServerProcess.llama_server(
                tool, path, args.threads, args.ctx, parallel=args.parallel, flash_attn=args.flash_attn
            )
    except BaseException:
        for server in servers.values():
            server.close()
        raise
    return servers


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = resolve_model(args.model, AppPaths.default())
    most = max(args.counts)
    servers = start_servers(args, path)
    clients: dict[str, list[openai.OpenAI]] = {}
    rounds: dict[str, dict[int, list[dict[str, float]]]] = {name: {n: [] for n in args.counts} for name in servers}
    identical: dict[str, bool | None] = {}
    try:
        for name, server in servers.items():
            # one client (and connection) per concurrent user, made before timing
            clients[name] = [openai.OpenAI(base_url=server.url, api_key="bench", max_retries=0) for _ in range(most)]
            run_concurrently(clients[name], path.name, concurrent_prompts(name, 98, most), 4)  # warm-up
        order = list(servers)
        for i in range(args.runs):
            for name in order:
                for n in args.counts:
                    prompts = concurrent_prompts(name, i, n)
                    results = run_concurrently(clients[name][:n], path.name, prompts, args.max_tokens)
                    rounds[name][n].append(round_figures(results))
            order = order[1:] + order[:1]  # alternate who goes first
        for name in servers:
            identical[name] = check_identical(clients[name], path.name, name, args.max_tokens)
    finally:
        for group in clients.values():
            for client in group:
                client.close()
        for server in servers.values():
            server.close()
    result = {
        "model": path.name,
        "threads": args.threads,
        "ctx": args.ctx,
        "parallel": args.parallel,
        "max_tokens": args.max_tokens,
        "runs": args.runs,
        "flash_attn": args.flash_attn,
        "speculative": args.speculative,
        "llama_server": servers["llama_server"].proc.args[0] if "llama_server" in servers else None,
        **summarize(rounds, args.counts, identical),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k:40} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
