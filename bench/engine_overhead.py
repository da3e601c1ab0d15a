"""Ember's runtime vs a bare llama-cpp-python token loop: same model, threads, prompt, greedy.

Runs both in one process, alternating, with the KV cache cleared before every run, and prints JSON:
decode_ratio = Ember decode tok/s / bare decode tok/s (budget >= 0.97) and ttft_overhead_ms = Ember
TTFT - bare TTFT (budget <= 10 ms), medians over the runs.

    python -m bench.engine_overhead --model gemma-3-270m --tokens 128 --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys

import llama_cpp

from bench.bare_llama import bare_loop
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig, SamplingParams, default_threads
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.llama.loader import plain_llama
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.storage.paths import AppPaths

PROMPT = "Once upon a time, in a small village by the sea, there lived an old fisherman who"


def bare_run(llm: llama_cpp.Llama, prompt: list[int], n: int) -> dict[str, float]:
    t0, times = bare_loop(llm, prompt, n)
    return {
        "ttft_ms": (times[0] - t0) / 1e6,
        "decode_tps": (len(times) - 1) / ((times[-1] - times[0]) / 1e9),
        "tokens": len(times),
    }


def ember_run(rt: LocalRuntime, n: int) -> dict[str, float]:
    rt.reset_cache()
    fin = None
    for ev in rt.complete(PROMPT, SamplingParams(temperature=0.0, max_tokens=n)):
        if isinstance(ev, Finished):
            fin = ev
    assert fin is not None
    m = fin.metrics
    return {
        "ttft_ms": m.ttft_s * 1e3,
        "decode_tps": m.decode_tokens_per_s,
        "tokens": m.output_tokens,
        "llama_prefill_ms": m.llama_prefill_ms,
    }


def followup_turns(rt: LocalRuntime, turns: int = 10) -> dict[str, float]:
    """A growing chat with same-length messages: each follow-up should prefill only its new tokens,
    so its TTFT stays close to the first turn's."""
    from ember_chat.engine.core.messages import ChatMessage

    rt.reset_cache()
    msgs: list[ChatMessage] = []
    ttft, prefill = [], []
    for t in range(turns):
        msgs.append(ChatMessage("user", f"Turn {t}: tell me one more fact about the sea, please."))
        fin = None
        for ev in rt.chat(msgs, SamplingParams(temperature=0.0, max_tokens=32)):
            if isinstance(ev, Finished):
                fin = ev
        assert fin is not None
        ttft.append(fin.metrics.ttft_s * 1e3)
        prefill.append(fin.metrics.prompt_tokens - fin.metrics.prompt_tokens_reused)
        msgs.append(ChatMessage("assistant", fin.text))
    return {
        "followup_ttft_ratio_median": round(statistics.median(ttft[1:]) / ttft[0], 3),
        "followup_ttft_ratio_max": round(max(ttft[1:]) / ttft[0], 3),
        "first_turn_ttft_ms": round(ttft[0], 2),
        "followup_prefill_tokens": prefill[1:],
        "turns": turns,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma-3-270m")  # Gemma 3 270M: figures comparable across runs
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    path = resolve_model(args.model, AppPaths.default())
    config = LoadConfig(path, n_ctx=args.ctx, threads=args.threads)
    rt = LocalRuntime()
    rt.load(config)
    bare = plain_llama(path, n_ctx=args.ctx, n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    prompt_tokens = rt.tokenize(PROMPT, add_bos=True)
    bare_runs, ember_runs = [], []
    try:
        bare_run(bare, prompt_tokens, 8)  # warm-up both (page in weights, build graphs)
        ember_run(rt, 8)
        for _ in range(args.runs):
            bare_runs.append(bare_run(bare, prompt_tokens, args.tokens))
            ember_runs.append(ember_run(rt, args.tokens))
        followup = followup_turns(rt)
    finally:
        bare.close()
        rt.close()

    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    result = {
        "decode_ratio": round(med(ember_runs, "decode_tps") / med(bare_runs, "decode_tps"), 4),
        "ttft_overhead_ms": round(med(ember_runs, "ttft_ms") - med(bare_runs, "ttft_ms"), 3),
        "ember_decode_tokens_per_s": round(med(ember_runs, "decode_tps"), 2),
        "bare_decode_tokens_per_s": round(med(bare_runs, "decode_tps"), 2),
        "ember_ttft_ms": round(med(ember_runs, "ttft_ms"), 3),
        "bare_ttft_ms": round(med(bare_runs, "ttft_ms"), 3),
        "ember_ttft_over_llama_prefill_ms": round(med(ember_runs, "ttft_ms") - med(ember_runs, "llama_prefill_ms"), 3),
        **followup,
        "prompt_tokens": len(prompt_tokens),
        "output_tokens": int(med(ember_runs, "tokens")),
        "runs": args.runs,
        "model": path.name,
        "threads": args.threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "llama_cpp_python": llama_cpp.__version__,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:34} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
