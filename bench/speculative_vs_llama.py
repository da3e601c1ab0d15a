"""Ember's n-gram speculative decoding against llama.cpp's own: `llama-server --spec-type ngram-mod`
(built by bench.llama_tools from the pinned source), the same model, threads, context, prompts and answer
length, greedy, alternating one Ember answer and one llama-server answer per round.

Ember runs in this process (the runtime directly, its KV cache cleared before each answer); llama-server
answers `/completion` with `cache_prompt: false`, and its own `timings` give its decode tok/s and drafts.
Prints JSON, per task (bench.speculative's: a copied passage, a code edit, free prose): the median decode
tok/s of Ember with speculation off and with `ngram`, llama-server without and with ngram-mod, Ember
ngram / llama-server ngram-mod (`vs_llama_server`, budget >= 1.0 on the copying tasks), each side's
speedup over its own plain decoding, drafted/accepted counts and whether Ember's answers with and
without speculation were identical.

    python -m bench.llama_tools --build --json        # once (llama-server)
    python -m bench.speculative_vs_llama --model starter --json
"""

from __future__ import annotations

import json
import statistics
import sys
import urllib.request
from pathlib import Path

from bench.api import ServerProcess
from bench.llama_tools import LLAMA_SERVER_READY, find_tool, llama_server_command
from bench.speculative import parse_args
from ember_chat.engine.bench.speculation import TASKS, one_run
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.peer_servers import free_port


def llama_server(tool: Path, model: Path, threads: int, n_ctx: int, speculative: bool) -> ServerProcess:
    port = free_port()
    command = llama_server_command(tool, model, port, threads, n_ctx, parallel=1)
    if speculative:
        command += ["--spec-type", "ngram-mod"]
    return ServerProcess(command, LLAMA_SERVER_READY, port)


def llama_server_answer(server: ServerProcess, prompt: str, tokens: int) -> dict[str, float]:
    """One greedy answer from llama-server's native /completion: its decode tok/s and draft counts."""
    body = {"prompt": prompt, "n_predict": tokens, "temperature": 0.0, "ignore_eos": True, "cache_prompt": False}
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/completion",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        answer = json.load(response)
    timings = answer["timings"]
    return {
        "decode_tokens_per_s": float(timings["predicted_per_second"]),
        "drafted": float(timings.get("draft_n", 0)),
        "accepted": float(timings.get("draft_n_accepted", 0)),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0])
    tool = find_tool("llama-server")
    if tool is None:
        print("llama-server is not built: python -m bench.llama_tools --build", file=sys.stderr)
        return 2
    path = resolve_model(args.model, AppPaths.default())
    rt = LocalRuntime()
    rt.load(LoadConfig(path, n_ctx=args.ctx, threads=args.threads, parallel=1))
    servers = {
        "plain": llama_server(tool, path, args.threads, args.ctx, speculative=False),
        "ngram_mod": llama_server(tool, path, args.threads, args.ctx, speculative=True),
    }
    result: dict[str, object] = {}
    try:
        one_run(rt, TASKS["free"], 8, "off")  # warm-up (page in the weights, build the graphs)
        for server in servers.values():
            llama_server_answer(server, TASKS["free"], 8)
        for task, prompt in TASKS.items():
            rates: dict[str, list[float]] = {"off": [], "ngram": [], "plain": [], "ngram_mod": []}
            texts: dict[str, set[str]] = {"off": set(), "ngram": set()}
            counts = dict.fromkeys(("ember_drafted", "ember_accepted", "llama_drafted", "llama_accepted"), 0.0)
            for _ in range(args.rounds):
                for mode in ("off", "ngram"):  # (alternating: Ember, llama-server, Ember, llama-server)
                    text, m = one_run(rt, prompt, args.tokens, mode)
                    rates[mode].append(m.decode_tokens_per_s or 0.0)
                    texts[mode].add(text)
                    counts["ember_drafted"] += m.speculative_drafted or 0
                    counts["ember_accepted"] += m.speculative_accepted or 0
                    side = "plain" if mode == "off" else "ngram_mod"
                    answer = llama_server_answer(servers[side], prompt, args.tokens)
                    rates[side].append(answer["decode_tokens_per_s"])
                    counts["llama_drafted"] += answer["drafted"]
                    counts["llama_accepted"] += answer["accepted"]
            med = {k: statistics.median(v) for k, v in rates.items()}
            result[task] = {
                "ember_off_decode_tokens_per_s": round(med["off"], 2),
                "ember_ngram_decode_tokens_per_s": round(med["ngram"], 2),
                "llama_server_decode_tokens_per_s": round(med["plain"], 2),
                "llama_server_ngram_mod_decode_tokens_per_s": round(med["ngram_mod"], 2),
                "vs_llama_server": round(med["ngram"] / med["ngram_mod"], 3) if med["ngram_mod"] else None,
                "ember_speedup": round(med["ngram"] / med["off"], 3) if med["off"] else None,
                "llama_server_speedup": round(med["ngram_mod"] / med["plain"], 3) if med["plain"] else None,
                **{k: int(v) for k, v in counts.items()},
                "ember_identical": texts["off"] == texts["ngram"] and len(texts["off"]) == 1,
            }
    finally:
        for server in servers.values():
            server.close()
        rt.close()
    result.update(tokens=args.tokens, rounds=args.rounds, model=path.name, threads=args.threads)
    print(json.dumps(result) if args.json else "\n".join(f"{k:10} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
