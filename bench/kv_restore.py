"""Returning to a long conversation: the time to the first token of its next answer with Ember's KV snapshots
against evaluating the whole conversation again.

    python -m bench.kv_restore --json
    python -m bench.kv_restore --quick --json     # a tiny run (one 384-token conversation) for the machinery

For each conversation length (512, 2,048 and 8,192 tokens of alternating user and assistant messages, on
the chat starter SmolLM2 135M, a context that holds it, `--parallel` sequences), `--runs` times with a
conversation of its own, three engine services answer it, then three follow-ups:
- `stored` has a snapshot store (a fresh folder). Its follow-ups come (a) right after the previous answer
  (the sequence still holds it); (b) after switching away: `--parallel` other chats answered, then
  every sequence's cells given up (see `switch_away`): the conversation's cells live in the store only;
  (c) after a restart: the service and the store closed (written to disk), a new service and a new store
  on the same folder opened, the model loaded and warmed up by another chat.
- `held` has no store and never switches: the conversation's own cells (the reference for identity).
- `recomputed` has no store and switches away before each follow-up: the whole prompt evaluated, as
  Ember did before snapshots.
Who goes first alternates. `<scenario>_ratio_<n>` = stored TTFT / recomputed TTFT (budget at 2,048 tokens
and beyond: switch and restart ≤ 0.15; keys `switch_ratio_2048`, `restart_ratio_2048`, …);
`identical`: every greedy answer of `stored` equals `held`'s; `bytes_per_token`: the store's files on
disk after the restart / the tokens they hold; `<scenario>_restored_tokens_<n>`: the
tokens the engine says came from a snapshot.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember_chat.engine.bench.targets import words_text
from ember_chat.engine.cli.common import load_blocking, resolve_model
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams, default_threads
from ember_chat.engine.inference.kv.snapshot_files import scan_folder
from ember_chat.engine.inference.kv.snapshots import SnapshotStore
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.sinks import RecordingSink

MESSAGE_WORDS = 150
TEMPLATE_TOKENS = 5  # a ChatML message's markers around its content
SCENARIOS = ("right_after", "switch", "restart")
SERVICES = ("stored", "held", "recomputed")
FOLLOW_UPS = (
    "Sum up what we said so far in two sentences.",
    "Which point above matters most, and why?",
    "Give one question we have not asked yet.",
)


@dataclass(frozen=True)
class Answer:
    text: str
    ttft_s: float
    prompt_tokens: int
    reused: int
    restored: int
    output_tokens: int


def ask(service: EngineService, messages: Sequence[ChatMessage], max_tokens: int) -> Answer:
    """One greedy answer through the engine service (the window's and the API's way)."""
    sink = RecordingSink()
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, repeat_penalty=1.0, seed=0)
    service.submit(
        GenerationRequest(params, sink, messages=list(messages), client="bench", batch_s=0, snapshot_s=float("inf"))
    )
    sink.done.wait()
    m = sink.final
    if sink.failures or m is None or m.ttft_s is None:
        raise RuntimeError(f"the answer failed: {(sink.failure_messages or [sink.reason])[-1]}")
    if sink.trimmed_messages:
        raise RuntimeError(f"the conversation did not fit the context ({sink.trimmed_messages[-1]} messages left out)")
    return Answer(
        sink.finished_text, m.ttft_s, m.prompt_tokens, m.prompt_tokens_reused, m.prompt_tokens_restored, m.output_tokens
    )


def conversation(service: EngineService, tokens: int, seed: int) -> list[ChatMessage]:
    """Alternating user and assistant messages of pseudo-random common words, about `tokens` tokens in
    all (counted with the model's tokenizer, each message cut to what is left), ending with a user
    message."""

    def size(text: str) -> int:
        return len(service.tokenize(text) or []) + TEMPLATE_TOKENS

    messages: list[ChatMessage] = []
    total = 0
    while True:
        role = "user" if len(messages) % 2 == 0 else "assistant"
        words = words_text(MESSAGE_WORDS, seed * 1000 + len(messages)).split()
        room = tokens - total - (0 if role == "user" else 16)  # (room left for a last user message)
        text = " ".join(words)
        if size(text) > room:
            text = " ".join(words[: max(4, len(words) * room // size(text))])
        messages.append(ChatMessage(role, text))
        total += size(text)
        if total >= tokens - 16:
            if role == "assistant":
                messages.append(ChatMessage("user", "Go on."))
            return messages


def others(count: int, seed: int) -> list[list[ChatMessage]]:
    """Short unrelated chats to switch through."""
    return [[ChatMessage("user", f"Note {seed}-{k}: " + words_text(40, seed * 100 + k))] for k in range(count)]


def switch_away(service: EngineService, count: int, seed: int) -> None:
    """`count` other chats at once, then every sequence's cells given up, as when other conversations
    need the context's cells (the runtime's `reset_cache`: the batch decoder's eviction, which puts each
    sequence's conversation in the snapshot store where there is one). Without that the conversation
    would stay in its sequence (the other chats take other sequences) and come back as "right after"."""
    sinks = []
    for chat in others(count, seed):
        sink = RecordingSink()
        params = SamplingParams(temperature=0.0, max_tokens=4, repeat_penalty=1.0, seed=0)
        service.submit(
            GenerationRequest(params, sink, messages=chat, client="bench", batch_s=0, snapshot_s=float("inf"))
        )
        sinks.append(sink)
    for sink in sinks:
        sink.done.wait()
        if sink.failures:
            raise RuntimeError(f"another chat failed: {sink.failure_messages[-1]}")
    give_up_cells(service)


def give_up_cells(service: EngineService) -> None:
    """Every sequence's cells freed (conversations of 256 tokens or more put in the store first)."""
    backend = service._backend  # (the engine thread's own: run there, between generations)
    assert backend is not None
    service.run_exclusive(backend.reset_cache, "evict").result()


def open_service(config: LoadConfig, store: SnapshotStore | None) -> EngineService:
    service = EngineService()
    service.snapshot_store = store
    try:
        load_blocking(service, config, "kv-restore")
    except BaseException:
        service.close()
        raise
    return service


def measure_length(config: LoadConfig, length: int, rep: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One conversation's three scenarios on three services: `stored` (with the store: switched away and
    restarted), `held` (no store, never switched: what the conversation's own cells give — the reference
    for identity) and `recomputed` (no store, switched away before each answer: the whole prompt
    evaluated)."""
    seed = length * 10 + rep
    cap = 64 * 2**30
    store = SnapshotStore(folder, cap)
    services: dict[str, EngineService] = {}
    figures: dict[str, Any] = {}
    try:
        services["stored"] = open_service(config, store)
        services["held"] = open_service(config, None)
        services["recomputed"] = open_service(config, None)
        chat = conversation(services["stored"], length, seed)
        first = {name: ask(services[name], chat, args.max_tokens) for name in ("stored", "held")}
        figures["first_identical"] = first["stored"].text == first["held"].text
        chat.append(ChatMessage("assistant", first["stored"].text))
        for i, scenario in enumerate(SCENARIOS):
            chat.append(ChatMessage("user", FOLLOW_UPS[i]))
            if scenario == "switch":
                switch_away(services["stored"], args.parallel, seed + 1)
            elif scenario == "restart":
                services.pop("stored").close()
                store.close()  # (written to disk)
                store = SnapshotStore(folder, cap)
                services["stored"] = open_service(config, store)
                ask(services["stored"], others(1, seed + 2)[0], 4)  # warm-up: the first graph is not the restore
                give_up_cells(services["stored"])  # (its cells gone: the conversation comes back where it was)
            switch_away(services["recomputed"], args.parallel, seed + 3 + i)
            k = (i + rep) % len(SERVICES)
            order = SERVICES[k:] + SERVICES[:k]  # who goes first alternates
            figures[scenario] = {name: ask(services[name], chat, args.max_tokens) for name in order}
            chat.append(ChatMessage("assistant", figures[scenario]["stored"].text))
    finally:
        for service in services.values():
            service.close()
        store.close()
    files, _problems = scan_folder(folder)  # (each file's head: its tokens)
    figures["disk_bytes"] = sum(f.size for f in files)
    figures["files"] = len(files)
    tokens = sum(len(f.tokens) for f in files)
    figures["bytes_per_token"] = figures["disk_bytes"] / tokens if tokens else None
    return figures


def summarize(lengths: Sequence[int], results: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """The printed keys: per length the medians over the runs; `identical` (every answer with the store
    equals the held conversation's, at every length), `identical_recomputed` (and equals the recomputed
    one's: informational — cells a model generated and cells evaluated from the same text can differ in
    the last bits) and `bytes_per_token` (the median over all runs)."""

    def med(values: list[float]) -> float | None:
        return round(statistics.median(values), 4) if values else None

    out: dict[str, Any] = {}
    identical = recomputed_identical = True
    per_token: list[float] = []
    for n in lengths:
        runs = results[n]
        for scenario in SCENARIOS:
            answers = [r[scenario] for r in runs]
            out[f"{scenario}_ttft_s_{n}"] = med([a["stored"].ttft_s for a in answers])
            out[f"{scenario}_recomputed_ttft_s_{n}"] = med([a["recomputed"].ttft_s for a in answers])
            out[f"{scenario}_held_ttft_s_{n}"] = med([a["held"].ttft_s for a in answers])
            out[f"{scenario}_ratio_{n}"] = med([a["stored"].ttft_s / a["recomputed"].ttft_s for a in answers])
            out[f"{scenario}_restored_tokens_{n}"] = med([a["stored"].restored for a in answers])
            out[f"{scenario}_recomputed_reused_tokens_{n}"] = med([a["recomputed"].reused for a in answers])
        out[f"prompt_tokens_{n}"] = med([r["restart"]["stored"].prompt_tokens for r in runs])
        # after the restart the answers' text is tokenized again; the held service keeps the tokens it
        # generated: where they differ, so do the prompts (and the snapshot is shared up to there)
        out[f"restart_retokenized_{n}"] = any(
            r["restart"]["stored"].prompt_tokens != r["restart"]["held"].prompt_tokens for r in runs
        )
        for s in SCENARIOS:
            out[f"{s}_identical_{n}"] = all(r[s]["stored"].text == r[s]["held"].text for r in runs)
        same = all(r["first_identical"] for r in runs) and all(out[f"{s}_identical_{n}"] for s in SCENARIOS)
        out[f"identical_{n}"] = same
        identical = identical and same
        recomputed_identical = recomputed_identical and all(
            r[s]["stored"].text == r[s]["recomputed"].text for r in runs for s in SCENARIOS
        )
        sizes = [r["bytes_per_token"] for r in runs if r["bytes_per_token"]]
        per_token += sizes
        out[f"bytes_per_token_{n}"] = med(sizes)
        out[f"snapshot_files_{n}"] = max((r["files"] for r in runs), default=0)
    out["identical"] = identical
    out["identical_recomputed"] = recomputed_identical
    out["bytes_per_token"] = round(statistics.median(per_token), 1) if per_token else None
    return out


def context_for(length: int, parallel: int, max_tokens: int) -> int:
    """A context that holds the conversation, its follow-ups and the other chats' cells, in 256s."""
    need = length + 3 * (max_tokens + 40) + (parallel + 1) * 96 + 256
    return -(-need // 256) * 256


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="starter", help="a chat model (default: the chat starter, SmolLM2 135M)")
    ap.add_argument("--lengths", default="512,2048,8192", help="conversation lengths in tokens")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--parallel", type=int, default=4, help="the load parameter 'parallel' of both services")
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--quick", action="store_true", help="a tiny run: one 384-token conversation, 8 tokens")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.lengths, args.runs, args.max_tokens, args.parallel = "384", 1, 8, 2
    args.length_list = [int(x) for x in args.lengths.split(",")]
    if min(args.length_list) < SnapshotStore.MIN_TOKENS:
        ap.error(f"conversations shorter than {SnapshotStore.MIN_TOKENS} tokens are never snapshotted")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = resolve_model(args.model, AppPaths.default())
    results: dict[int, list[dict[str, Any]]] = {n: [] for n in args.length_list}
    with tempfile.TemporaryDirectory(prefix="ember-kv-restore-") as tmp:
        for n in args.length_list:
            config = LoadConfig(
                path, n_ctx=context_for(n, args.parallel, args.max_tokens), threads=args.threads, parallel=args.parallel
            )
            for rep in range(args.runs):
                folder = Path(tmp) / f"{n}-{rep}"
                results[n].append(measure_length(config, n, rep, folder, args))
    result = {
        "model": path.name,
        "threads": args.threads,
        "parallel": args.parallel,
        "runs": args.runs,
        "max_tokens": args.max_tokens,
        **summarize(args.length_list, results),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k:40} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
