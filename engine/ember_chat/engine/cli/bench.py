"""`ember-chat bench`: the benchmark lab without the window — prefill and decode speed of one or more
models, local ones on this machine or remote connections' (`--model remote:<connection>/<model id>`),
as llama-bench measures them (see engine/bench/lab.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ember_chat.engine.cli import bench_serve
from ember_chat.engine.cli.common import add_load_flags, model_ref_from_args
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.paths import AppPaths


def add_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="measure prefill and decode speed of models (local or remote)")
    bench.add_argument("--model", action="append", help="a model, or remote:<connection>/<id> (repeat for several)")
    bench.add_argument("--prompt-lengths", default="128,512", help="prompt tokens, comma-separated")
    bench.add_argument("--output", type=int, default=64, help="tokens generated after each prompt")
    bench.add_argument("--reps", type=int, default=2, help="repetitions (the median is kept)")
    bench.add_argument("--csv", type=Path, help="also write the figures to this CSV file")
    bench.add_argument("--no-save", action="store_true", help="do not keep the run in the data folder")
    bench.add_argument("--json", action="store_true", help="one JSON object per model on stdout")
    add_load_flags(bench)
    bench_serve.add_parser(bench.add_subparsers(dest="bench_command", metavar="{serve}"))


def run(args: argparse.Namespace) -> int:
    from ember_chat.engine.bench.lab import BenchPlan, measure_model, points_csv, save_run

    if getattr(args, "bench_command", None) == "serve":
        return bench_serve.run(args)
    if not args.model:
        raise EmberError("the following arguments are required: --model (or `bench serve --target …`)")

    paths = AppPaths.default()
    try:
        lengths = tuple(int(x) for x in args.prompt_lengths.split(",") if x.strip())
    except ValueError as exc:
        raise EmberError(f"--prompt-lengths must be numbers separated by commas, got {args.prompt_lengths!r}") from exc
    plan = BenchPlan(lengths, args.output, args.reps)
    rows = []
    for model in args.model:
        args.model = model
        ref, alias = model_ref_from_args(args, paths)
        result = measure_model(ref, plan, progress=lambda d, t, what: print(f"[{d}/{t}] {what}", file=sys.stderr))
        if not args.no_save:
            print(f"saved: {save_run(result, paths.data_dir / 'benchmarks')}", file=sys.stderr)
        rows.append(result)
        if args.json:
            print(json.dumps(result.to_dict()), flush=True)
        else:
            m = result.machine
            where = f"served by {m['server']}" if m.get("server") else f"{m['cpu']}, {m.get('threads')} threads"
            print(f"{alias}  ({where})")
            print(f"{'prompt':>8} {'TTFT s':>8} {'prefill t/s':>12} {'decode t/s':>11} {'ITL p50/p95/p99 ms':>20}")
            for p in result.points:
                itl = f"{p.itl_p50_ms:.1f}/{p.itl_p95_ms:.1f}/{p.itl_p99_ms:.1f}"
                prefill = "—" if p.prefill_tokens_per_s is None else f"{p.prefill_tokens_per_s:.1f}"
                print(f"{p.prompt_tokens:>8} {p.ttft_s:>8.3f} {prefill:>12} {p.decode_tokens_per_s:>11.1f} {itl:>20}")
    if args.csv:
        args.csv.write_text(points_csv([p for r in rows for p in r.points]))
    return 0
