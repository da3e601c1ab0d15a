"""The benchmark lab on one model file served four ways, measured the same way in one run: in Ember's
own runtime (local), through Ember's API server, and through llama-cpp-python's server with its
default settings and with `--logits_all false`. Every server runs on 127.0.0.1 with the same threads
and context; only the one being measured is busy. Prints JSON: each target's points (prompt tokens
as counted, TTFT, prefill and decode tok/s, ITL p50) and its prefill/decode ratios to local.

    python bench/lab_remote.py --model starter --json

What it shows: a server's TTFT includes the HTTP round trip and its own prompt handling (llama-cpp-
python's server computes logits for every prompt token by default, which costs prefill speed on a
large vocabulary); decode speed is the engine's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ember_chat.engine.bench.lab import BenchPlan, BenchPoint, BenchRun, load_for_bench, run_lab
from ember_chat.engine.cli.common import load_blocking, resolve_model
from ember_chat.engine.inference.backend import Endpoint, ModelRef, RemoteModelRef
from ember_chat.engine.inference.params import LoadConfig, default_threads
from ember_chat.engine.inference.service import EngineService
from ember_chat.engine.serve.server import ApiServer, ServerConfig
from ember_chat.engine.storage.paths import AppPaths
from tests.peer_servers import llama_cpp_server

ALIAS = "model"


def measure(ref: ModelRef, plan: BenchPlan) -> BenchRun:
    backend = load_for_bench(ref, plan)
    try:
        return run_lab(backend, plan)
    finally:
        backend.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="starter")
    ap.add_argument("--prompt-lengths", default="128,512")
    ap.add_argument("--output", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    lengths = tuple(int(x) for x in args.prompt_lengths.split(","))
    plan = BenchPlan(lengths, args.output, args.reps)
    path = resolve_model(args.model, AppPaths.default())
    n_ctx = max(256, max(lengths) + args.output + 64)
    config = LoadConfig(path, n_ctx=n_ctx, threads=args.threads, n_batch=512)
    runs: dict[str, BenchRun] = {"local": measure(config, plan)}
    with ExitStack() as stack:
        service = EngineService()
        stack.callback(service.close)
        load_blocking(service, config, ALIAS)
        server = ApiServer(service, ServerConfig(port=0))
        server.start()
        stack.callback(server.stop)
        runs["ember_server"] = measure(RemoteModelRef(Endpoint("ember", server.url), ALIAS), plan)
    for name, extra in (("llama_cpp_server", ()), ("llama_cpp_server_no_logits_all", ("--logits_all", "false"))):
        with llama_cpp_server(path, args.threads, n_ctx, alias=ALIAS, extra=extra) as url:
            runs[name] = measure(RemoteModelRef(Endpoint(name, url), ALIAS), plan)

    def med(run: BenchRun, key: str) -> float:
        return statistics.median([getattr(p, key) or 0.0 for p in run.points])

    def ratio(run: BenchRun, key: str) -> float:
        return round(med(run, key) / med(runs["local"], key), 3)

    def point(p: BenchPoint) -> dict[str, float]:
        return {
            "prompt_tokens": p.prompt_tokens,
            "ttft_s": round(p.ttft_s, 3),
            "prefill_tokens_per_s": round(p.prefill_tokens_per_s or 0, 1),
            "decode_tokens_per_s": round(p.decode_tokens_per_s, 1),
            "output_tokens": p.output_tokens,
            "itl_p50_ms": round(p.itl_p50_ms, 1),
        }

    targets = {
        name: {
            "points": [point(p) for p in run.points],
            "prefill_ratio_to_local": ratio(run, "prefill_tokens_per_s"),
            "decode_ratio_to_local": ratio(run, "decode_tokens_per_s"),
        }
        for name, run in runs.items()
    }
    result = {
        "model": args.model,
        "threads": args.threads,
        "plan": plan.__dict__,
        "cpu": runs["local"].machine["cpu"],
        "targets": targets,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
