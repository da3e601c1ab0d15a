"""n-gram speculative decoding vs none: decode tokens/s on copying tasks and on free prose, greedy
(or sampled: --temperature, seed 7).

One runtime, the KV cache cleared before every run, off, auto and ngram alternating each round; prints
JSON: per task the median decode tok/s of each mode, their ratios to off, the tokens drafted and accepted,
the speedup each answer reported (its own estimate: speculative_speedup), how many auto answers stopped
drafting, and whether the answers were identical (they must be: byte-identical is the design).

    python -m bench.speculative --model starter --tokens 128 --rounds 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable

import llama_cpp

from ember_chat.engine.bench.speculation import TASKS, one_run
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig, default_threads
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.storage.paths import AppPaths

MODES = ("off", "auto", "ngram")


def parse_args(
    argv: list[str] | None, description: str, more: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """The options of this benchmark and of bench.speculative_vs_llama (the same tasks, model and answers;
    `more` adds that one's own)."""
    ap = argparse.ArgumentParser(description=description)
    if more is not None:
        more(ap)
    ap.add_argument("--model", default="starter")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--temperature", type=float, default=0.0, help="sample at this temperature (seed 7)")
    ap.add_argument("--json", action="store_true")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0])

    path = resolve_model(args.model, AppPaths.default())
    rt = LocalRuntime()
    rt.load(LoadConfig(path, n_ctx=args.ctx, threads=args.threads))
    result: dict[str, object] = {}
    try:
        one_run(rt, TASKS["free"], 8, "off")  # warm-up (page in the weights, build the graphs)
        for task, prompt in TASKS.items():
            tps: dict[str, list[float]] = {mode: [] for mode in MODES}
            texts: dict[str, set[str]] = {mode: set() for mode in MODES}
            speedups: dict[str, list[float]] = {mode: [] for mode in MODES}
            drafted = dict.fromkeys(MODES, 0)
            accepted = dict.fromkeys(MODES, 0)
            stopped = 0
            for _ in range(args.rounds):
                for mode in MODES:
                    text, m = one_run(rt, prompt, args.tokens, mode, args.temperature)
                    tps[mode].append(m.decode_tokens_per_s or 0.0)
                    texts[mode].add(text)
                    drafted[mode] += m.speculative_drafted or 0
                    accepted[mode] += m.speculative_accepted or 0
                    if m.speculative_speedup is not None:
                        speedups[mode].append(m.speculative_speedup)
                    stopped += bool(m.speculative_stopped)
            off = statistics.median(tps["off"])
            row: dict[str, object] = {}
            for mode in MODES:
                rate = statistics.median(tps[mode])
                row[f"{mode}_decode_tokens_per_s"] = round(rate, 2)
                if mode != "off":
                    row[f"{mode}_ratio"] = round(rate / off, 3) if off else None
                    row[f"{mode}_drafted"], row[f"{mode}_accepted"] = drafted[mode], accepted[mode]
                    row[f"{mode}_reported_speedup"] = (
                        round(statistics.median(speedups[mode]), 2) if speedups[mode] else None
                    )
            row["auto_stopped"] = f"{stopped} of {args.rounds}"
            row["identical"] = all(texts[mode] == texts["off"] for mode in MODES) and len(texts["off"]) == 1
            result[task] = row
    finally:
        rt.close()
    result.update(
        tokens=args.tokens,
        temperature=args.temperature,
        rounds=args.rounds,
        model=path.name,
        threads=args.threads,
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        llama_cpp_python=llama_cpp.__version__,
    )
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:10} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
