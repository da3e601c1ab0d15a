"""The benchmark lab on one model file served four ways, measured the same way in one run: in Ember's
own runtime (local), through Ember's API server (`ember-chat serve`), and through llama-cpp-python's
server with its default settings and with `--logits_all false`. Each server runs in its own process
on 127.0.0.1 with the same threads and context; all are up at once and measured in turn, round after
round in rotating order (`--reps` rounds; per target and prompt length, the round with the median
decode speed, all its figures from that round), so the machine's slow spells fall on all of them
alike. Prints JSON: each target's points (prompt tokens as counted, TTFT, prefill and decode tok/s,
ITL p50) and its prefill/decode ratios to local.

    python -m bench.lab_remote --model gemma-3-270m --json

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

from ember_chat.engine.bench.lab import BenchPlan, BenchPoint, BenchRun, load_for_bench, machine_facts, run_lab
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig, default_threads
from ember_chat.engine.core.refs import Endpoint, ModelRef, RemoteModelRef
from ember_chat.engine.inference.backend import InferenceBackend
from ember_chat.engine.inference.remote.backend import check_connection
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.peer_servers import ember_server, llama_cpp_server

ALIAS = "model"


def served_id(url: str) -> str:
    return check_connection(Endpoint("ember", url)).models[0].id


def interleaved(backends: dict[str, InferenceBackend], plan: BenchPlan, reps: int) -> dict[str, list[BenchPoint]]:
    """`reps` rounds; in each, every target measured once (one repetition of the plan), in an order
    that rotates from round to round, so that a slow spell of the machine hits all of them alike.
    Per target and prompt length, the point of median decode speed."""
    names = list(backends)
    rounds: dict[str, list[BenchRun]] = {name: [] for name in names}
    for r in range(reps):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            rounds[name].append(run_lab(backends[name], plan))
    out = {}
    for name, runs in rounds.items():
        by_length = zip(*(run.points for run in runs), strict=True)
        out[name] = [sorted(ps, key=lambda p: p.decode_tokens_per_s)[len(ps) // 2] for ps in by_length]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma-3-270m")  # Gemma 3 270M: figures comparable across runs
    ap.add_argument("--prompt-lengths", default="128,512")
    ap.add_argument("--output", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    lengths = tuple(int(x) for x in args.prompt_lengths.split(","))
    plan = BenchPlan(lengths, args.output, 1)
    path = resolve_model(args.model, AppPaths.default())
    n_ctx = max(256, max(lengths) + args.output + 64)
    config = LoadConfig(path, n_ctx=n_ctx, threads=args.threads, n_batch=512)
    with ExitStack() as stack:
        backends: dict[str, InferenceBackend] = {}

        def connect(name: str, ref: ModelRef) -> None:
            backends[name] = load_for_bench(ref, plan)
            stack.callback(backends[name].close)

        connect("local", config)
        url = stack.enter_context(ember_server(path, args.threads, n_ctx))
        connect("ember_server", RemoteModelRef(Endpoint("ember", url), served_id(url)))
        for name, extra in (("llama_cpp_server", ()), ("llama_cpp_server_no_logits_all", ("--logits_all", "false"))):
            url = stack.enter_context(llama_cpp_server(path, args.threads, n_ctx, alias=ALIAS, extra=extra))
            connect(name, RemoteModelRef(Endpoint(name, url), ALIAS))
        points = interleaved(backends, plan, args.reps)

    def med(ps: list[BenchPoint], key: str) -> float:
        return statistics.median([getattr(p, key) or 0.0 for p in ps])

    def ratio(ps: list[BenchPoint], key: str) -> float:
        return round(med(ps, key) / med(points["local"], key), 3)

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
            "points": [point(p) for p in ps],
            "prefill_ratio_to_local": ratio(ps, "prefill_tokens_per_s"),
            "decode_ratio_to_local": ratio(ps, "decode_tokens_per_s"),
        }
        for name, ps in points.items()
    }
    result = {
        "model": args.model,
        "threads": args.threads,
        "plan": {**plan.__dict__, "rounds": args.reps},
        "cpu": machine_facts()["cpu"],
        "targets": targets,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
