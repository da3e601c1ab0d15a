"""Ember's speculative decoding against llama.cpp's own (built by bench.llama_tools from the pinned source),
the same model, threads, context, flash attention (Ember's: on by default; llama-server ran without it
before), prompts and answer length, greedy, alternating one answer of each side per round.

N-gram drafts (the default): Ember's `ngram` against `llama-server --spec-type ngram-mod` and
`llama-lookup` (prompt lookup decoding). With `--draft-model FILE|NAME`: Ember's `draft` (the model's
drafts, `--draft-model` as run/serve load it) against `llama-speculative-simple -md` and
`llama-server -md` (`--spec-type draft-simple`), on the same target/draft pair. llama.cpp's programs
draft at most `--llama-draft-max` tokens a step (default: their own, 3; ngram-mod keeps its own);
Ember's drafts adapt from 1 to 16.

Ember runs in this process (the runtime directly, its KV cache cleared before each answer); llama-server
answers `/completion` with `cache_prompt: false`, and its own `timings` give its decode tok/s and drafts;
llama-lookup and llama-speculative-simple run once per answer (a new process: the weights stay in the
page cache) and their decode tok/s (drafting included) and counts are read from their log. Prints JSON,
per task (bench.speculative's: a copied passage, a code edit, free prose): the median decode tok/s of
each, Ember over each llama.cpp program (`vs_*`), each side's speedup over its own plain decoding
(llama-server without speculation for llama.cpp), drafted/accepted counts and whether Ember's answers
with and without speculation were identical.

    python -m bench.llama_tools --build --json        # once (llama-server, llama-lookup, llama-speculative-simple)
    python -m bench.speculative_vs_llama --model gemma-3-270m --json
    python -m bench.speculative_vs_llama --model gemma-3-270m --draft-model gemma-3-270m --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

from bench.api import ServerProcess
from bench.llama_tools import (
    LLAMA_SERVER_READY,
    find_tool,
    llama_server_command,
    llama_speculation,
    llama_speculation_command,
)
from bench.speculative import parse_args
from ember_chat.engine.bench.speculation import TASKS, one_run
from ember_chat.engine.cli.common import resolve_model
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.peer_servers import free_port


def llama_server(
    tool: Path,
    model: Path,
    threads: int,
    n_ctx: int,
    speculative: bool,
    draft_model: Path | None = None,
    draft_max: int | None = None,
    flash_attn: bool = False,
) -> ServerProcess:
    """llama-server without speculation, with ngram-mod (`speculative`), or drafting with `draft_model`."""
    port = free_port()
    command = llama_server_command(tool, model, port, threads, n_ctx, parallel=1, flash_attn=flash_attn)
    if draft_model is not None:
        command += ["-md", str(draft_model), "--spec-type", "draft-simple", "-td", str(threads)]
        command += ["-tbd", str(threads), *(["--spec-draft-n-max", str(draft_max)] if draft_max else [])]
    elif speculative:
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


def _options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--draft-model",
        default=None,
        help="compare drafts from this model (a name from `models list`, 'starter' or a .gguf; the same "
        "vocabulary as --model) instead of n-gram drafts",
    )
    ap.add_argument(
        "--llama-draft-max",
        type=int,
        default=None,
        help="the most tokens llama-lookup, llama-speculative-simple and llama-server -md draft a step "
        "(default: their own, 3)",
    )


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


class _Task:
    """One task's answers over the rounds: each side's decode rates, draft counts and Ember's texts."""

    def __init__(self) -> None:
        self.rates: dict[str, list[float]] = {}
        self.counts: dict[str, int] = {}
        self.texts: dict[str, set[str]] = {}

    def add(self, side: str, rate: float, drafted: float = 0, accepted: float = 0) -> None:
        self.rates.setdefault(side, []).append(rate)
        self.counts[f"{side}_drafted"] = self.counts.get(f"{side}_drafted", 0) + int(drafted)
        self.counts[f"{side}_accepted"] = self.counts.get(f"{side}_accepted", 0) + int(accepted)

    def ember(self, rt: LocalRuntime, prompt: str, tokens: int, mode: str) -> None:
        text, m = one_run(rt, prompt, tokens, mode)
        self.texts.setdefault(mode, set()).add(text)
        self.add(f"ember_{mode}", m.decode_tokens_per_s or 0.0, m.speculative_drafted or 0, m.speculative_accepted or 0)

    def median(self, side: str) -> float:
        return statistics.median(self.rates[side])

    def identical(self, mode: str) -> bool:
        return self.texts[mode] == self.texts["off"] and len(self.texts["off"]) == 1


def comparison(
    rt: LocalRuntime,
    plain: ServerProcess,
    speculating: ServerProcess,
    own: Callable[[str, int], list[str]],
    mode: str,
    tokens: int,
    rounds: int,
) -> dict[str, object]:
    """Per task: Ember off and `mode` ("ngram" or "draft"), llama-server without and with speculation
    (ngram-mod, or -md), and llama.cpp's own example program (llama-lookup, or llama-speculative-simple)."""
    server_side = "llama_server_ngram_mod" if mode == "ngram" else "llama_server_draft"
    own_side = "llama_lookup" if mode == "ngram" else "llama_speculative_simple"
    result: dict[str, object] = {}
    for task, prompt in TASKS.items():
        t = _Task()
        for _ in range(rounds):  # (alternating: Ember, llama-server, Ember, llama-server, the example program)
            t.ember(rt, prompt, tokens, "off")
            t.add("llama_server", llama_server_answer(plain, prompt, tokens)["decode_tokens_per_s"])
            t.ember(rt, prompt, tokens, mode)
            answer = llama_server_answer(speculating, prompt, tokens)
            t.add(server_side, answer["decode_tokens_per_s"], answer["drafted"], answer["accepted"])
            figures = llama_speculation(own(prompt, tokens))
            t.add(own_side, figures.decode_tokens_per_s, figures.drafted, figures.accepted)
        med = {side: t.median(side) for side in t.rates}
        ember = med[f"ember_{mode}"]
        row: dict[str, object] = {f"{side}_decode_tokens_per_s": round(rate, 2) for side, rate in med.items()}
        row["vs_llama_server"] = _ratio(ember, med[server_side])
        row[f"vs_{own_side}"] = _ratio(ember, med[own_side])
        row["ember_speedup"] = _ratio(ember, med["ember_off"])
        row["llama_server_speedup"] = _ratio(med[server_side], med["llama_server"])
        row[f"{own_side}_speedup"] = _ratio(med[own_side], med["llama_server"])  # (over llama-server's plain)
        for name, side in (("ember", f"ember_{mode}"), ("llama_server", server_side), (own_side, own_side)):
            row[f"{name}_drafted"], row[f"{name}_accepted"] = t.counts[f"{side}_drafted"], t.counts[f"{side}_accepted"]
        row["ember_identical"] = t.identical(mode)
        result[task] = row
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], _options)
    paths = AppPaths.default()
    path = resolve_model(args.model, paths)
    draft = resolve_model(args.draft_model, paths) if args.draft_model else None
    own = "llama-lookup" if draft is None else "llama-speculative-simple"
    tools = {name: find_tool(name) for name in ("llama-server", own)}
    missing = [name for name, tool in tools.items() if tool is None]
    if missing:
        print(f"{', '.join(missing)} not built: python -m bench.llama_tools --build", file=sys.stderr)
        return 2
    server_tool, own_tool = tools["llama-server"], tools[own]
    assert server_tool is not None and own_tool is not None

    config = LoadConfig(path, n_ctx=args.ctx, threads=args.threads, parallel=1, draft_model=draft)
    # (llama.cpp's side with Ember's flash attention: on by default, where llama-server was run without it)
    flash, draft_max = config.flash_attn, args.llama_draft_max

    def own_command(prompt: str, tokens: int) -> list[str]:
        return llama_speculation_command(
            own_tool, path, prompt, tokens, args.threads, args.ctx, draft_model=draft, draft_max=draft_max,
            flash_attn=flash,
        )  # fmt: skip

    rt = LocalRuntime()
    rt.load(config)
    description = rt.description
    if draft is not None and description is not None and description.draft_refused:
        rt.close()
        print(f"the draft model was refused: {description.draft_refused}", file=sys.stderr)
        return 2
    servers: dict[str, ServerProcess] = {}
    try:
        servers["plain"] = llama_server(server_tool, path, args.threads, args.ctx, False, flash_attn=flash)
        if draft is None:
            servers["ngram_mod"] = llama_server(server_tool, path, args.threads, args.ctx, True, flash_attn=flash)
        else:
            servers["draft"] = llama_server(
                server_tool, path, args.threads, args.ctx, True, draft, draft_max, flash_attn=flash
            )
        one_run(rt, TASKS["free"], 8, "off")  # warm-up (page in the weights, build the graphs)
        for server in servers.values():
            llama_server_answer(server, TASKS["free"], 8)
        mode, speculating = ("ngram", servers["ngram_mod"]) if draft is None else ("draft", servers["draft"])
        result = comparison(rt, servers["plain"], speculating, own_command, mode, args.tokens, args.rounds)
    finally:
        for server in servers.values():
            server.close()
        rt.close()
    result.update(tokens=args.tokens, rounds=args.rounds, model=path.name, threads=args.threads)
    # (llama_draft_max None: llama.cpp's programs drafted at most their own default, 3)
    result.update(draft_model=draft.name if draft else None, llama_draft_max=args.llama_draft_max)
    print(json.dumps(result) if args.json else "\n".join(f"{k:10} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
