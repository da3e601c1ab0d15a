"""n-gram speculative decoding vs none: decode tokens/s on copying tasks and on free prose, greedy.

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

import llama_cpp

from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig, SamplingParams, default_threads
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.storage.paths import AppPaths

PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, lit the great lamp, and wrote "
    "the weather, the ships he saw and the state of the sea in a leather-bound log. In winter the storms "
    "came from the north and the waves broke over the rocks below the tower; in summer the fishing boats "
    "passed close to the shore and their crews waved to him. He had kept the light for thirty years, and "
    "in all that time not one ship had been lost on the reef he watched over."
)
CODE = """def total_price(items, tax_rate):
    subtotal = 0.0
    for item in items:
        subtotal += item.price * item.quantity
    tax = subtotal * tax_rate
    return round(subtotal + tax, 2)


def cheapest(items):
    best = None
    for item in items:
        if best is None or item.price < best.price:
            best = item
    return best


def describe(items, tax_rate):
    lines = [f"{item.name}: {item.quantity} x {item.price:.2f}" for item in items]
    lines.append(f"total: {total_price(items, tax_rate):.2f}")
    return "\\n".join(lines)
"""
RENAMED = CODE.replace("total_price", "order_total")
MODES = ("off", "auto", "ngram")
TASKS = {
    # an answer that copies its input: where prompt lookup pays
    "copy": f"Text: {PASSAGE}\nThe same text, repeated word for word:\nText:",
    # a code edit: the file again with one name changed
    "code_edit": f"# before\n{CODE}\n# after: total_price renamed to order_total\n{RENAMED[:60]}",
    # free prose: little to copy, the drafts mostly rejected
    "free": "Once upon a time, in a small village by the sea, there lived an old fisherman who",
}


def one_run(rt: LocalRuntime, prompt: str, tokens: int, mode: str) -> tuple[str, GenerationMetrics]:
    rt.reset_cache()
    fin = None
    params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True, speculative=mode)
    for ev in rt.complete(prompt, params):
        if isinstance(ev, Finished):
            fin = ev
    assert fin is not None
    return fin.text, fin.metrics


def parse_args(argv: list[str] | None, description: str) -> argparse.Namespace:
    """The options of this benchmark and of bench.speculative_vs_llama (the same tasks, model and answers)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--model", default="starter")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--ctx", type=int, default=2048)
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
                    text, m = one_run(rt, prompt, args.tokens, mode)
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
