"""Embeddings throughput: Ember's `/v1/embeddings` against llama.cpp's own `llama-server --embeddings` (built
by bench.llama_tools from the source the pinned llama-cpp-python ships) on the same model, inputs, threads
and batch size — each server in its own process, one `openai` client each, rounds alternating who goes
first.

    python -m bench.embeddings --model starter --threads 2 --json   # SmolLM2 135M
    python -m bench.embeddings --quick --json      # a tiny run that checks the machinery

A chat model embeds by the mean of its tokens (llama-server: `--pooling mean`; Ember: the model's own
pooling, mean for a chat model). Figures:
- ember_inputs_per_s, llama_server_inputs_per_s: inputs embedded per second at the client, median over
  the rounds (each round: every input once, `--batch` inputs a request).
- throughput_ratio: Ember / llama-server, the median of the rounds' ratios (budget >= 0.95); every round
  listed.
- min_cosine, median_cosine: the two servers' vectors for the same input (both unit length): they embed
  the same tokens the same way when these are ~1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import openai

from bench.api import ServerProcess
from bench.llama_tools import LLAMA_SERVER_READY, find_tool, llama_server_command
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import default_threads
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.peer_servers import free_port

STORY = (
    "the clockmaker opened her shop at dawn and listened to a hundred clocks ticking while snow fell on the "
    "valley between two rivers where a stranger carried a clock without hands across the old stone bridge"
)
WORDS = STORY.split(" ")


def inputs(count: int, min_words: int, max_words: int) -> list[str]:
    """`count` distinct sentences of `min_words`..`max_words` words (deterministic)."""
    out = []
    for i in range(count):
        n = min_words + (i * 7) % (max_words - min_words + 1)
        out.append(f"{i}: " + " ".join(WORDS[(i + k * 3) % len(WORDS)] for k in range(n)))
    return out


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = (sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5
    return dot / norm if norm else 0.0


def embed_all(client: openai.OpenAI, model: str, texts: list[str], batch: int) -> tuple[float, list[list[float]]]:
    """Seconds to embed every text, `batch` a request, and the vectors in order."""
    vectors: list[list[float]] = []
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        response = client.embeddings.create(model=model, input=texts[i : i + batch], encoding_format="float")
        vectors += [d.embedding for d in sorted(response.data, key=lambda d: d.index)]
    return time.perf_counter() - start, vectors


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="starter")  # SmolLM2 135M Instruct
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--inputs", type=int, default=128, help="inputs a round")
    ap.add_argument("--batch", type=int, default=32, help="inputs a request")
    ap.add_argument("--min-words", type=int, default=16)
    ap.add_argument("--max-words", type=int, default=48)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--quick", action="store_true", help="one round of 16 short inputs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.inputs, args.batch, args.min_words, args.max_words = 1, 16, 8, 4, 12
    return args


def figures(
    args: argparse.Namespace, model: str, rounds: list[dict[str, float]], cosines: list[float]
) -> dict[str, Any]:
    ember = statistics.median(r["ember_inputs_per_s"] for r in rounds)
    llama = statistics.median(r["llama_server_inputs_per_s"] for r in rounds)
    return {
        "model": model,
        "threads": args.threads,
        "rounds": args.rounds,
        "inputs": args.inputs,
        "batch": args.batch,
        "words": [args.min_words, args.max_words],
        "ember_inputs_per_s": round(ember, 2),
        "llama_server_inputs_per_s": round(llama, 2),
        "throughput_ratio": round(statistics.median(r["ratio"] for r in rounds), 4),
        "round_ratios": [r["ratio"] for r in rounds],
        "min_cosine": round(min(cosines), 6),
        "median_cosine": round(statistics.median(cosines), 6),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = resolve_model(args.model, AppPaths.default())
    tool = find_tool("llama-server")
    if tool is None:
        print("llama-server is not built: python -m bench.llama_tools --build", file=sys.stderr)
        return 2
    texts = inputs(args.inputs, args.min_words, args.max_words)
    servers: dict[str, ServerProcess] = {}
    clients: dict[str, openai.OpenAI] = {}
    rounds: list[dict[str, float]] = []
    cosines: list[float] = []
    try:
        servers["ember"] = ServerProcess.ember(path, args.threads, args.ctx)
        port = free_port()
        command = llama_server_command(tool, path, port, args.threads, args.ctx)
        command += ["--embeddings", "--pooling", "mean"]
        servers["llama_server"] = ServerProcess(command, LLAMA_SERVER_READY, port)
        for name, server in servers.items():
            clients[name] = openai.OpenAI(base_url=server.url, api_key="bench", max_retries=0, timeout=600)
            embed_all(clients[name], path.name, texts[: args.batch], args.batch)  # warm-up
        order = list(clients)
        for _ in range(args.rounds):
            seconds: dict[str, float] = {}
            vectors: dict[str, list[list[float]]] = {}
            for name in order:
                seconds[name], vectors[name] = embed_all(clients[name], path.name, texts, args.batch)
            cosines += [cosine(a, b) for a, b in zip(vectors["ember"], vectors["llama_server"], strict=True)]
            rate = {name: len(texts) / s for name, s in seconds.items()}
            rounds.append({
                "ember_inputs_per_s": rate["ember"],
                "llama_server_inputs_per_s": rate["llama_server"],
                "ratio": round(rate["ember"] / rate["llama_server"], 4),
            })  # fmt: skip
            order.reverse()  # alternate who goes first
    finally:
        for client in clients.values():
            client.close()
        for server in servers.values():
            server.close()
    result = figures(args, path.name, rounds, cosines)
    print(json.dumps(result, indent=2) if args.json else "\n".join(f"{k:28} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
