"""The benchmark lab's figures vs llama.cpp's own `llama-bench` and vs a bare llama-cpp-python loop, on the
same model, threads, flash-attention setting and depths.

For each prompt length n, in rounds that alternate who goes first:
- the lab's measurement (Ember's runtime: `run_tokens`, as `ember-chat bench` does it): prefill tok/s =
  n / time to the first token, decode tok/s = (tokens − 1) / first-to-last token time, after that prompt;
- a bare loop (one `llama_decode` of the prompt, then greedy-sample and decode one token at a time);
- `llama-bench` (built by bench.llama_tools, the same llama.cpp): `-p n -n 0` (pp n) and
  `-p 0 -n <output> -d n` (tg at depth n), one repetition per round.
The KV cache is cleared before each. Prints the medians and the lab / bare and lab / llama-bench ratios
(budget ≥ 0.97 for each); `*_best`: the same ratio of the fastest rounds (on a shared machine the least
disturbed ones). `lab_llama_prefill_tokens_per_s` is llama.cpp's own prompt-eval counter inside
the lab's runs: where it is near llama-bench's and the lab's own figure is not, the time is lost outside
llama_decode.

    python -m bench.lab_vs_llama --model gemma-3-270m --json
    python -m bench.lab_vs_llama --quick --json      # a tiny run that checks the machinery
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_cpp

from bench.api import add_flash_attn_option, ratio
from bench.bare_llama import bare_loop
from bench.llama_tools import LlamaBenchResult, find_tool, llama_bench, llama_bench_command
from ember_chat.engine.bench.lab import BenchPlan, machine_facts, prompt_seed, run_lab
from ember_chat.engine.bench.targets import LocalTarget, bench_tokens
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig, default_threads
from ember_chat.engine.inference.llama.loader import plain_llama
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.storage.paths import AppPaths

SAMPLES = ("lab_pp", "lab_tg", "lab_llama_pp", "bare_pp", "bare_tg", "llama_bench_pp", "llama_bench_tg")


def bare(llm: llama_cpp.Llama, prompt: list[int], n: int) -> tuple[float, float]:
    """(prefill tok/s, decode tok/s) of the minimal loop."""
    t0, times = bare_loop(llm, prompt, n, stop_at_eog=False)
    return len(prompt) / ((times[0] - t0) / 1e9), (n - 1) / ((times[-1] - times[0]) / 1e9)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gemma-3-270m")  # Gemma 3 270M: figures comparable across runs
    ap.add_argument("--prompt-lengths", default="128,512")
    ap.add_argument("--output", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=default_threads())
    add_flash_attn_option(ap)
    ap.add_argument("--no-llama-bench", action="store_true", help="leave llama.cpp's llama-bench out")
    ap.add_argument("--quick", action="store_true", help="a tiny run: 32 prompt tokens, 8 generated, 1 round")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.prompt_lengths, args.output, args.runs = "32", 8, 1
    args.lengths = [int(x) for x in args.prompt_lengths.split(",")]
    return args


def llama_bench_round(tool: Path, model: Path, args: argparse.Namespace) -> dict[tuple[str, int], float]:
    """One repetition of pp n and tg<output> at depth n for every length: {("pp"|"tg", n): tok/s}."""
    common = {"repetitions": 1, "flash_attn": args.flash_attn}
    pp = llama_bench(llama_bench_command(tool, model, args.threads, prompts=args.lengths, gen=(0,), **common))
    tg = llama_bench(
        llama_bench_command(tool, model, args.threads, prompts=(0,), gen=(args.output,), depths=args.lengths, **common)
    )
    return by_test(pp + tg)


def by_test(results: Sequence[LlamaBenchResult]) -> dict[tuple[str, int], float]:
    """llama-bench's results keyed as the lab's points: ("pp", n) at depth 0, ("tg", depth)."""
    out: dict[tuple[str, int], float] = {}
    for r in results:
        if r.n_gen == 0 and r.n_depth == 0:
            out["pp", r.n_prompt] = r.avg_tokens_per_s
        elif r.n_prompt == 0:
            out["tg", r.n_depth] = r.avg_tokens_per_s
    return out


def point(n: int, samples: dict[str, list[float]]) -> dict[str, Any]:
    """One length's medians and ratios (llama-bench's None when it did not run)."""

    def med(key: str, digits: int) -> float | None:
        return round(statistics.median(samples[key]), digits) if samples.get(key) else None

    def best(key: str) -> float | None:
        return max(samples[key]) if samples.get(key) else None

    lab_pp, lab_tg = med("lab_pp", 1), med("lab_tg", 2)
    return {
        "prompt_tokens": n,
        "lab_prefill_tokens_per_s": lab_pp,
        "lab_llama_prefill_tokens_per_s": med("lab_llama_pp", 1),
        "bare_prefill_tokens_per_s": med("bare_pp", 1),
        "llama_bench_prefill_tokens_per_s": med("llama_bench_pp", 1),
        "prefill_ratio": ratio(lab_pp, med("bare_pp", 1)),
        "prefill_ratio_llama_bench": ratio(lab_pp, med("llama_bench_pp", 1)),
        "lab_decode_tokens_per_s": lab_tg,
        "bare_decode_tokens_per_s": med("bare_tg", 2),
        "llama_bench_decode_tokens_per_s": med("llama_bench_tg", 2),
        "decode_ratio": ratio(lab_tg, med("bare_tg", 2)),
        "decode_ratio_llama_bench": ratio(lab_tg, med("llama_bench_tg", 2)),
        # the fastest round of each (the least disturbed by other work on a shared machine)
        "prefill_ratio_llama_bench_best": ratio(best("lab_pp"), best("llama_bench_pp")),
        "decode_ratio_llama_bench_best": ratio(best("lab_tg"), best("llama_bench_tg")),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = resolve_model(args.model, AppPaths.default())
    tool = None if args.no_llama_bench else find_tool("llama-bench")
    n_ctx = max(256, max(args.lengths) + args.output + 8)
    rt = LocalRuntime()
    rt.load(LoadConfig(path, n_ctx=n_ctx, threads=args.threads, n_batch=max(args.lengths), flash_attn=args.flash_attn))
    llm = plain_llama(
        path, n_ctx=n_ctx, n_batch=max(args.lengths), n_threads=args.threads, n_threads_batch=args.threads,
        flash_attn=args.flash_attn, verbose=False,
    )  # fmt: skip
    samples: dict[int, dict[str, list[float]]] = {n: {k: [] for k in SAMPLES} for n in args.lengths}
    result: dict[str, Any] = {
        "model": args.model,
        "machine": machine_facts(LocalTarget(rt)),
        "runs": args.runs,
        "output_tokens": args.output,
        "flash_attn": args.flash_attn,
        "llama_bench": str(tool) if tool else None,
    }
    order = ["lab", "bare", "llama_bench"] if tool else ["lab", "bare"]
    try:
        for _ in range(args.runs):
            for who in order:
                if who == "llama_bench":
                    assert tool is not None
                    for (kind, n), tps in llama_bench_round(tool, path, args).items():
                        if n in samples:
                            samples[n][f"llama_bench_{kind}"].append(tps)
                    continue
                for n in args.lengths:
                    if who == "lab":
                        p = run_lab(rt, BenchPlan((n,), args.output, 1), threading.Event()).points[0]
                        samples[n]["lab_pp"].append(p.prefill_tokens_per_s or 0.0)
                        samples[n]["lab_tg"].append(p.decode_tokens_per_s)
                        if p.llama_prefill_tokens_per_s:
                            samples[n]["lab_llama_pp"].append(p.llama_prefill_tokens_per_s)
                    else:
                        pp, tg = bare(llm, bench_tokens(rt, n, prompt_seed(n, 0)), args.output)
                        samples[n]["bare_pp"].append(pp)
                        samples[n]["bare_tg"].append(tg)
            order = order[1:] + order[:1]  # alternate who goes first
    finally:
        rt.close()
        llm.close()
    result["points"] = [point(n, samples[n]) for n in args.lengths]
    if args.json:
        print(json.dumps(result))
    else:
        for p in result["points"]:
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
