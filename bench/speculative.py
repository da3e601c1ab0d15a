"""n-gram speculative decoding vs none: decode tokens/s on a copy task and on free prose, greedy.

One runtime, the KV cache cleared before every run, off and ngram alternating each round; prints JSON:
per task the median decode tok/s of each, their ratio (ngram / off), the tokens drafted and accepted,
and whether the two answers were identical (they must be: byte-identical is the design).

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
TASKS = {
    # an answer that copies its input: where prompt lookup pays
    "copy": f"Text: {PASSAGE}\nThe same text, repeated word for word:\nText:",
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="starter")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    path = resolve_model(args.model, AppPaths.default())
    rt = LocalRuntime()
    rt.load(LoadConfig(path, n_ctx=args.ctx, threads=args.threads))
    result: dict[str, object] = {}
    try:
        one_run(rt, TASKS["free"], 8, "off")  # warm-up (page in the weights, build the graphs)
        for task, prompt in TASKS.items():
            tps: dict[str, list[float]] = {"off": [], "ngram": []}
            texts: dict[str, set[str]] = {"off": set(), "ngram": set()}
            drafted = accepted = 0
            for _ in range(args.rounds):
                for mode in ("off", "ngram"):
                    text, m = one_run(rt, prompt, args.tokens, mode)
                    tps[mode].append(m.decode_tokens_per_s or 0.0)
                    texts[mode].add(text)
                    if mode == "ngram":
                        drafted += m.speculative_drafted or 0
                        accepted += m.speculative_accepted or 0
            off, ngram = statistics.median(tps["off"]), statistics.median(tps["ngram"])
            result[task] = {
                "off_decode_tokens_per_s": round(off, 2),
                "ngram_decode_tokens_per_s": round(ngram, 2),
                "ratio": round(ngram / off, 3) if off else None,
                "drafted": drafted,
                "accepted": accepted,
                "identical": texts["off"] == texts["ngram"] and len(texts["off"]) == 1,
            }
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
