"""The benchmark lab's figures vs a bare llama-cpp-python loop on the same model, threads and tokens.

For each prompt length: the lab's measurement (Ember's runtime: `run_tokens`, as `ember-chat bench`
does it) and a bare loop (one `llama_decode` of the prompt, then greedy-sample and decode one token
at a time, end-of-generation included), alternating, the KV cache cleared before each; prefill tok/s
= prompt tokens / time to the first token, decode tok/s = (tokens − 1) / first-to-last token time.
Prints JSON with the medians and the lab / bare ratios (budget >= 0.97 for both).

    python -m bench.lab_vs_llama --model gemma-3-270m --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading

import llama_cpp

from bench.bare_llama import bare_loop
from ember_chat.engine.bench.lab import BenchPlan, machine_facts, prompt_seed, run_lab
from ember_chat.engine.bench.targets import LocalTarget, bench_tokens
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig, default_threads
from ember_chat.engine.inference.runtime import LocalRuntime
from ember_chat.engine.storage.paths import AppPaths


def bare(llm: llama_cpp.Llama, prompt: list[int], n: int) -> tuple[float, float]:
    """(prefill tok/s, decode tok/s) of the minimal loop."""
    t0, times = bare_loop(llm, prompt, n, stop_at_eog=False)
    return len(prompt) / ((times[0] - t0) / 1e9), (n - 1) / ((times[-1] - times[0]) / 1e9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma-3-270m")  # Gemma 3 270M: figures comparable across runs
    ap.add_argument("--prompt-lengths", default="128,512")
    ap.add_argument("--output", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    lengths = [int(x) for x in args.prompt_lengths.split(",")]
    path = resolve_model(args.model, AppPaths.default())
    n_ctx = max(lengths) + args.output + 8
    rt = LocalRuntime()
    rt.load(LoadConfig(path, n_ctx=n_ctx, threads=args.threads, n_batch=max(lengths)))
    llm = llama_cpp.Llama(
        str(path), n_ctx=n_ctx, n_batch=max(lengths), n_threads=args.threads, n_threads_batch=args.threads,
        verbose=False,
    )  # fmt: skip
    result: dict[str, object] = {"model": args.model, "machine": machine_facts(LocalTarget(rt)), "points": []}
    try:
        for n in lengths:
            tokens = bench_tokens(rt, n, prompt_seed(n, 0))  # the lab's own prompt (its repetition 0)
            lab_pp, lab_tg, bare_pp, bare_tg = [], [], [], []
            for _ in range(args.runs):
                point = run_lab(rt, BenchPlan((n,), args.output, 1), threading.Event()).points[0]
                lab_pp.append(point.prefill_tokens_per_s)
                lab_tg.append(point.decode_tokens_per_s)
                pp, tg = bare(llm, tokens, args.output)
                bare_pp.append(pp)
                bare_tg.append(tg)
            med = statistics.median
            result["points"].append(
                {
                    "prompt_tokens": n,
                    "lab_prefill_tokens_per_s": round(med(lab_pp), 1),
                    "bare_prefill_tokens_per_s": round(med(bare_pp), 1),
                    "prefill_ratio": round(med(lab_pp) / med(bare_pp), 4),
                    "lab_decode_tokens_per_s": round(med(lab_tg), 2),
                    "bare_decode_tokens_per_s": round(med(bare_tg), 2),
                    "decode_ratio": round(med(lab_tg) / med(bare_tg), 4),
                }
            )
    finally:
        rt.close()
        llm.close()
    if args.json:
        print(json.dumps(result))
    else:
        for p in result["points"]:
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
