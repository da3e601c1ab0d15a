"""Many models on demand (issue 30): `ember-chat serve` in its own process, with a data folder of its own
where two real models are installed (A: Gemma 3 270M, B: SmolLM2, the starter, by default), timed with
the real `openai` client: short streamed chats (the same prompt, `--max-tokens` greedy tokens,
`ignore_eos`), TTFT at the client. The models' files are read once first: every load reads them from
the page cache.

    python -m bench.models_pool --json
    python -m bench.models_pool --quick --json      # a tiny run that checks the machinery

Two servers, one after the other:
- switching: `serve --model B` (the default budget); A is loaded by the first request naming it, then
  rounds of A, A, B, B: the first request of each pair follows one to the other model. switch_ratio
  (per model, median of the rounds, every round listed): its TTFT after the other model / its warm TTFT
  (the pair's second request). Budget ≤ 1.1 (no reload).
- eviction: `serve --model` a tiny model (pinned), `--memory-budget` 1.5× the larger model's footprint
  (ember_chat.engine.inference.pool.memory.footprint), lowered where needed so that the pinned model and
  both others never fit together: B, B, then rounds of A, B — each load evicts the other. Peak RSS: the
  serve process's VmHWM (/proc/PID/status) at the end; peak_over_budget: peak / budget (budget ≤ 1.1:
  "within the budget + 10 %"); start_rss_bytes: its RSS once serving (the pinned model loaded: about
  the process's own, which no budget counts); peak_less_start_over_budget: (peak − start) / budget.
- jit_load_s: seconds from a request to its first token, less the warm TTFT of the same request asked
  again at once: A's on the switching server (B is loaded), B's as the eviction server's first request
  for another model than its own (only the tiny pinned model is loaded). Each server answers one request
  of its own model first (a first request's own costs are no load's).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai

from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig, default_threads
from ember_chat.engine.inference.pool.memory import footprint
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.peer_servers import ember_server

PROMPT = "Name three colours of the rainbow."
PINNED = "pinned-tiny.gguf"


def ttft(client: openai.OpenAI, model: str, max_tokens: int) -> float:
    """Seconds from sending a streamed chat to its first text (it must then run to max_tokens)."""
    t0 = time.perf_counter()
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=max_tokens, temperature=0,
        stream=True, extra_body={"ignore_eos": True},
    )  # fmt: skip
    first: float | None = None
    finish = None
    with stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content and first is None:
                first = time.perf_counter()
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
    if first is None or finish != "length":
        raise RuntimeError(f"{model} answered no text or stopped early ({finish!r})")
    return first - t0


def jit_load(client: openai.OpenAI, model: str, max_tokens: int) -> dict[str, float]:
    """The first request for a model not loaded, then the same request again: their TTFTs and the load's
    share of the first (the difference)."""
    cold = ttft(client, model, max_tokens)
    warm = ttft(client, model, max_tokens)
    return {"cold_ttft_s": round(cold, 4), "warm_ttft_s": round(warm, 4), "load_s": round(cold - warm, 4)}


def switching_rounds(
    client: openai.OpenAI, models: Sequence[str], rounds: int, max_tokens: int
) -> list[dict[str, Any]]:
    """Each round asks each model twice in a row, in turn: the first after the other model, the second warm."""
    out: list[dict[str, Any]] = []
    for i in range(rounds):
        for model in models:
            after_other = ttft(client, model, max_tokens)
            warm = ttft(client, model, max_tokens)
            out.append({
                "round": i, "model": model, "switch_ttft_s": round(after_other, 4), "warm_ttft_s": round(warm, 4),
                "ratio": round(after_other / warm, 4),
            })  # fmt: skip
    return out


def switch_ratios(rounds: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each model's median switch / warm ratio over the rounds."""
    models = dict.fromkeys(r["model"] for r in rounds)
    return {m: round(statistics.median(r["ratio"] for r in rounds if r["model"] == m), 4) for m in models}


def eviction_budget(pinned: int, a: int, b: int) -> int:
    """1.5× the larger model's footprint, lowered where needed so that the pinned model and both others
    never fit together (each load then evicts the other); always room for the pinned and the larger."""
    larger, smaller = max(a, b), min(a, b)
    return int(min(1.5 * larger, pinned + larger + smaller * 0.9))


def status_bytes(pid: int, field: str) -> int:
    """A memory line of /proc/PID/status (VmHWM: the peak resident set, VmRSS: now), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024  # (always in kB)
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def read_once(paths: Sequence[Path]) -> None:
    """Read each file once, so every load finds it in the page cache (no load pays for the disk)."""
    for path in paths:
        with path.open("rb") as f:
            while f.read(8 << 20):
                pass


def install(models: Sequence[Path], home: Path) -> list[Path]:
    """A data and config folder of its own under `home`, the models linked into its models folder (copied
    where links are not allowed), and a tiny model to pin; the installed paths (the tiny one last)."""
    folder = home / "data" / "models"
    folder.mkdir(parents=True)
    (home / "config").mkdir()
    installed = []
    for model in models:
        target = folder / model.name
        try:
            target.symlink_to(model.resolve())
        except OSError:
            target.write_bytes(model.read_bytes())
        installed.append(target)
    installed.append(write_tiny_model(folder / PINNED, TinySpec(name="pinned")))
    return installed


@contextmanager
def serving(home: Path, model: Path, args: argparse.Namespace, extra: Sequence[str] = ()) -> Iterator[
    tuple[openai.OpenAI, int, list[str]]
]:  # fmt: skip
    """`ember-chat serve --model model` on `home`'s folders: (a client, its process id, its log)."""
    env = {**os.environ, "EMBER_DATA_DIR": str(home / "data"), "EMBER_CONFIG_DIR": str(home / "config")}
    log: list[str] = []
    pid: list[int] = []
    with ember_server(model, args.threads, args.ctx, 300, tuple(extra), env=env, log=log, pid=pid) as url:
        client = openai.OpenAI(base_url=url, api_key="bench", max_retries=0, timeout=300)
        try:
            yield client, pid[0], log
        finally:
            client.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-a", default="gemma-3-270m", help="loaded on demand on the switching server")
    ap.add_argument("--model-b", default="starter", help="the switching server's --model")
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5, help="switching rounds (A, A, B, B) and eviction rounds (A, B)")
    ap.add_argument("--quick", action="store_true", help="one round of each (checks the machinery)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds = 1
    if args.rounds < 1:
        ap.error("--rounds must be 1 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    paths = AppPaths.default()
    sources = [resolve_model(args.model_a, paths), resolve_model(args.model_b, paths)]
    read_once(sources)
    with tempfile.TemporaryDirectory(prefix="ember-bench-pool-") as tmp:
        a_path, b_path, pinned_path = install(sources, Path(tmp))
        a, b, pinned = a_path.name, b_path.name, pinned_path.name
        sizes = {p.name: footprint(LoadConfig(p, n_ctx=args.ctx)).total for p in (a_path, b_path, pinned_path)}
        budget = eviction_budget(sizes[pinned], sizes[a], sizes[b])

        with serving(Path(tmp), b_path, args) as (client, _pid, _log):
            ttft(client, b, args.max_tokens)  # (a server's first request's own costs are no load's)
            jit = {a: jit_load(client, a, args.max_tokens)}
            rounds = switching_rounds(client, [b, a], args.rounds, args.max_tokens)

        with serving(Path(tmp), pinned_path, args, ["--memory-budget", f"{budget / 1e6:.3f}MB"]) as (client, pid, log):
            ttft(client, pinned, args.max_tokens)
            start_rss = status_bytes(pid, "VmRSS")
            jit[b] = jit_load(client, b, args.max_tokens)
            requests = [{"model": b, "ttft_s": jit[b]["cold_ttft_s"]}, {"model": b, "ttft_s": jit[b]["warm_ttft_s"]}]
            for _ in range(args.rounds):
                for model in (a, b):
                    requests.append({"model": model, "ttft_s": round(ttft(client, model, args.max_tokens), 4)})
            peak = status_bytes(pid, "VmHWM")
            evictions = sum("to make room for" in line for line in log)

    ratios = switch_ratios(rounds)
    result = {
        "model_a": a,
        "model_b": b,
        "threads": args.threads,
        "ctx": args.ctx,
        "max_tokens": args.max_tokens,
        "rounds": args.rounds,
        "jit_load_s": {m: jit[m]["load_s"] for m in (a, b)},
        "jit": jit,
        "switch_ratio": ratios,
        "switch_ratio_worst": max(ratios.values()),
        "switch_rounds": rounds,
        "eviction": {
            "pinned": pinned,
            "footprint_bytes": sizes,
            "budget_bytes": budget,
            "budget_x_larger": round(budget / max(sizes[a], sizes[b]), 4),
            "start_rss_bytes": start_rss,
            "peak_rss_bytes": peak,
            "peak_over_budget": round(peak / budget, 4),
            "peak_less_start_over_budget": round((peak - start_rss) / budget, 4),
            "evictions": evictions,
            "requests": requests,
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k:20} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
