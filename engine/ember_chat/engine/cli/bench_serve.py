"""`ember-chat bench serve`: the serving lab from the terminal — how many users a served model keeps
within a latency objective (engine/bench/serving/)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ember_chat.engine.cli.common import add_load_flags
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.paths import AppPaths

if TYPE_CHECKING:  # (imported when it runs: its HTTP client is heavy for `ember-chat --help`)
    from ember_chat.engine.bench.serving.load import LoadPlan
    from ember_chat.engine.bench.serving.summary import Slo
    from ember_chat.engine.bench.serving.targets import ServingTarget
    from ember_chat.engine.bench.serving.workload import Workload
    from ember_chat.engine.core.params import LoadConfig


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve",
        help="load-test a served model: how many users it keeps within a latency objective",
        description="Load-test an OpenAI-compatible server (or a model here, local:MODEL) at fixed "
        "concurrencies (closed loop) or request rates (open loop, Poisson arrivals), and say how many "
        "users it serves within the objective.",
    )
    serve.add_argument("--target", help="a server's URL, a saved connection's name, or local:MODEL (loaded here)")
    serve.add_argument(
        "--find",
        action="store_true",
        help="list the servers answering on this machine's usual ports (127.0.0.1 only) and their models",
    )
    serve.add_argument("--ports", help="with --find: these ports instead of the usual ones, comma-separated")
    serve.add_argument("--model", dest="served_model", help="the model to name in requests (default: the first listed)")
    load = serve.add_mutually_exclusive_group()
    load.add_argument("--concurrency", default=None, help="users at once, comma-separated (default 1,2,4)")
    load.add_argument("--rate", default=None, help="requests per second, comma-separated (open loop)")
    serve.add_argument("--burstiness", type=float, default=1.0, help="arrival shape with --rate (1: Poisson)")
    serve.add_argument(
        "--workload",
        default="chat",
        help="chat, short, document, multiturn, tools, document-lands, or a ShareGPT JSON file",
    )
    ends = serve.add_mutually_exclusive_group()
    ends.add_argument("--requests", type=int, default=None, help="requests per load (default 16)")
    ends.add_argument("--duration", type=float, default=None, help="seconds per load")
    serve.add_argument("--warmup", type=int, default=1, help="requests sent first and not counted (default 1)")
    serve.add_argument("--slo", default="ttft=1s,tpot=100ms,e2el=60s", help="the latency objective")
    serve.add_argument("--seed", type=int, default=0, help="the workload's and the arrivals' seed")
    serve.add_argument(
        "--repeats", type=int, default=1, help="run each load this many times: medians and 95 %% intervals"
    )
    serve.add_argument("--json", action="store_true", help="print the result as one JSON object")
    serve.add_argument("--save-result", type=Path, help="also write the JSON result to this file")
    serve.add_argument(
        "--save-result-vllm",
        type=Path,
        help="also write each load run in the shape of `vllm bench serve --save-result` (one JSON, or a list)",
    )
    serve.add_argument("--csv", type=Path, help="also write one CSV row per load run (vLLM's keys)")
    serve.add_argument(
        "--report",
        type=Path,
        metavar="FILE",
        help="also write a report to share: HTML with plots for FILE.html or .htm (one file, offline), else Markdown",
    )
    serve.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("A.json", "B.json"),
        help="two results saved with --save-result side by side: each load's figures and the ratio B/A",
    )
    add_load_flags(serve)  # (for local:MODEL; --parallel: the users it answers at once)
    serve.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="with local:MODEL: load the model with each value of this load setting in turn (parallel, ctx, threads, "
        "threads_batch, batch_size, flash_attn=on,off, kv_cache_type…, or speculative=off,auto,ngram[,draft]: the "
        "server's default speculative decoding; several --sweep: every combination), run the same loads on each, and "
        "name the Pareto front and the winner",
    )
    serve.add_argument(
        "--apply",
        action="store_true",
        help="with --sweep: save the winner as the model's own load settings (the ⚙ dialog's; the others kept; "
        "speculative is a chat's setting: not saved)",
    )


def _numbers(text: str, what: str, kind: type[int] | type[float]) -> list[int] | list[float]:
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise EmberError(f"{what} takes numbers separated by commas, got {text!r}.") from None
    if not values:
        raise EmberError(f"{what} needs at least one value.")
    return values


def run(args: argparse.Namespace) -> int:
    from ember_chat.engine.bench.serving.export import csv_text, vllm_result
    from ember_chat.engine.bench.serving.load import LoadPlan, LoadRun
    from ember_chat.engine.bench.serving.report import report_markdown, server_words, sweep
    from ember_chat.engine.bench.serving.report_html import report_html
    from ember_chat.engine.bench.serving.summary import parse_slo
    from ember_chat.engine.bench.serving.workload import workload_for

    if args.find:
        return _find(args)
    if args.compare:
        return _compare(args)
    if args.target is None:
        raise EmberError("Say what to load: --target URL, a saved connection's name or local:MODEL (or --find).")
    slo = parse_slo(args.slo)
    if args.repeats < 1:
        raise EmberError("--repeats must be 1 or more.")
    requests = args.requests if args.requests is not None or args.duration is not None else 16
    common = {"requests": requests, "duration_s": args.duration, "warmup": args.warmup, "seed": args.seed}
    if args.rate is not None:
        rates = _numbers(args.rate, "--rate", float)
        plans = [LoadPlan(rate=r, burstiness=args.burstiness, **common) for r in rates]
    else:
        users = _numbers(args.concurrency or "1,2,4", "--concurrency", int)
        plans = [LoadPlan(concurrency=int(c), **common) for c in users]
    workload = workload_for(args.workload, count=max(64, (requests or 0) + args.warmup), seed=args.seed)
    if args.sweep or args.apply:
        return _knob_sweep(args, workload, plans, slo)
    target = _target(args)
    cancel = threading.Event()
    load_runs: list[LoadRun] = []
    try:
        result = _until_interrupted(
            lambda: sweep(
                target, workload, plans, slo, cancel, progress=_progress, load_runs=load_runs, repeats=args.repeats
            ),
            cancel,
        )
    finally:
        target.close()
    print(file=sys.stderr)
    text = json.dumps(result)
    if args.save_result is not None:
        args.save_result.write_text(text + "\n", encoding="utf-8")
    if args.report is not None:
        html = args.report.suffix.lower() in (".html", ".htm")
        args.report.write_text(report_html(result) if html else report_markdown(result), encoding="utf-8")
    if args.save_result_vllm is not None or args.csv is not None:
        shaped = [vllm_result(run, result["context"], slo) for run in load_runs]
        if args.save_result_vllm is not None:
            one = shaped[0] if len(shaped) == 1 else shaped
            args.save_result_vllm.write_text(json.dumps(one) + "\n", encoding="utf-8")
        if args.csv is not None:
            args.csv.write_text(csv_text(shaped), encoding="utf-8")
    if args.json:
        print(text)
        return CANCELLED if cancel.is_set() else 0
    print(result["answer"])
    print()
    print(
        f"{'load':<24} {'done':>5} {'fail':>5} {'TTFT p50/p95 ms':>17} {'TPOT p50/p95 ms':>17} {'tok/s':>8} {'SLO':>6}"
    )
    for r in result["runs"]:
        ttft = f"{_ms(r['ttft_ms']['p50'])}/{_ms(r['ttft_ms']['p95'])}"
        tpot = f"{_ms(r['tpot_ms']['p50'])}/{_ms(r['tpot_ms']['p95'])}"
        slo_share = "—" if r["slo_attainment"] is None else f"{r['slo_attainment']:.0%}"
        label = r["load"] if args.repeats == 1 else f"{r['load']} #{r['repeat']}"
        print(
            f"{label:<24} {r['completed']:>5} {r['failed']:>5} {ttft:>17} {tpot:>17} "
            f"{r['output_tokens_per_s']:>8.1f} {slo_share:>6}"
        )
        if said := server_words(r):
            print(f"    {said}")
        for reason, count in r["failures"].items():
            print(f"    {count} failed: {reason}")
        if r["saturated"]:
            print(f"    saturated: {r['saturated']}")
        if r["document"]:
            doc = r["document"]
            print(f"    document at {doc['sent_s']:.1f} s: the others' ITL p99 {_ms(doc['itl_p99_before_ms'])} ms "
                  f"before, {_ms(doc['itl_p99_during_ms'])} ms while it was read")  # fmt: skip
        if r["busy"]:
            print(f"    {r['busy']}")
    if args.repeats > 1:
        print()
        for load in result["loads"]:
            print(f"{load['load']}, median of {load['repeats']} repeats (95 % t-interval of the mean):")
            for name, (key, sub) in _REPEATED.items():
                value, bounds = load["median"][key], load["interval95"].get(key)
                value, bounds = (value[sub], (bounds or {}).get(sub)) if sub else (value, bounds)
                around = "" if bounds is None else f" ({bounds[0]:.1f}–{bounds[1]:.1f})"
                print(f"    {name:<18} {_ms(value) if sub else f'{value:.1f}'}{around}")
    return CANCELLED if cancel.is_set() else 0


CANCELLED = 130  # (the shell's code for a command ended by Ctrl+C: what ran was still written)
T = TypeVar("T")


def _until_interrupted(work: Callable[[], T], cancel: threading.Event) -> T:
    """`work` on a thread of its own; Ctrl+C sets `cancel` (the requests in flight end at their next bytes,
    nothing more is sent) and waits for it, so what ran is still printed and saved (a second Ctrl+C
    leaves at once)."""
    outcome: list[T] = []
    failed: list[BaseException] = []
    finished = threading.Event()  # (not Thread.join: a join Ctrl+C interrupted may return before the end)

    def run_it() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # (raised again on the main thread)
            failed.append(exc)
        finally:
            finished.set()

    threading.Thread(target=run_it, name="ember-bench-serve", daemon=True).start()
    try:
        while not finished.wait(0.2):
            pass
    except KeyboardInterrupt:
        cancel.set()
        print("\nCancelled: the requests in flight end, what ran is kept…", file=sys.stderr)
        finished.wait()
    if failed:
        raise failed[0]
    return outcome[0]


_REPEATED = {  # the figures said per load with --repeats: (key, sub-key of a distribution)
    "TTFT p95 ms": ("ttft_ms", "p95"),
    "TPOT p95 ms": ("tpot_ms", "p95"),
    "ITL p99 ms": ("itl_ms", "p99"),
    "output tok/s": ("output_tokens_per_s", None),
    "goodput req/s": ("goodput_requests_per_s", None),
}


def _knob_sweep(args: argparse.Namespace, workload: Workload, plans: list[LoadPlan], slo: Slo) -> int:
    from ember_chat.engine.bench.serving.knobs import apply_winner, knob_sweep, label_of, parse_knobs, saved_knobs
    from ember_chat.engine.cli.common import load_options_from_args, report_problems, resolve_model
    from ember_chat.engine.core.params import LoadConfig
    from ember_chat.engine.storage.model_settings import ModelSettingsStore

    if not args.sweep:
        raise EmberError("--apply saves the winner of a sweep: add --sweep NAME=V1,V2 (e.g. parallel=1,2,4).")
    if not args.target.startswith("local:"):
        raise EmberError("--sweep loads the model with each setting: it needs --target local:MODEL.")
    if args.save_result_vllm is not None or args.csv is not None or args.report is not None:
        raise EmberError(
            "--save-result-vllm, --csv and --report write one target's runs: with --sweep, use --save-result."
        )
    knobs = parse_knobs(args.sweep)
    name = args.target.removeprefix("local:")
    paths = AppPaths.default()
    base = LoadConfig(resolve_model(name, paths), **load_options_from_args(args))
    cancel = threading.Event()
    result = _until_interrupted(lambda: knob_sweep(
        lambda config, **server: local_target(config, name, **server), base, knobs, workload, plans, slo, cancel,
        progress=_progress, repeats=args.repeats,
    ), cancel)  # fmt: skip
    print(file=sys.stderr)
    if args.apply and result["winner_setting"] is not None and not cancel.is_set():  # (not a part of a sweep's)
        store = ModelSettingsStore(paths.model_settings_file)
        name = _library_name(name, base.path, paths)
        saved, not_saved = saved_knobs(result["winner_setting"])
        apply_winner(store, name, result["winner_setting"], base)
        report_problems(store)
        result["applied"] = {"model": name, "file": str(paths.model_settings_file), "setting": label_of(saved),
                             "not_saved": label_of(not_saved)}  # fmt: skip
    text = json.dumps(result)
    if args.save_result is not None:
        args.save_result.write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
    else:
        print(result["answer"])
        print()
        width = max([len("setting"), *(len(s["label"]) for s in result["settings"])])
        print(f"{'setting':<{width}} {'load':<18} {'goodput':>8} {'tok/s':>8} {'TTFT p95 ms':>12}")
        for s in result["settings"]:
            f = s["figures"]
            mark = " *" if s["label"] == result["winner"] else (" ·" if s["label"] in result["pareto"] else "")
            print(f"{s['label']:<{width}} {f['load']:<18} {f['goodput']:>8.2f} {f['tokens_per_s']:>8.1f} "
                  f"{_ms(f['ttft_p95_ms']):>12}{mark}")  # fmt: skip
        print("(* the winner, · on the Pareto front; each setting's best load)")
        if "applied" in result:
            applied = result["applied"]
            if applied["setting"]:
                print(f"Saved {applied['setting']} as {name}'s load settings ({paths.model_settings_file}).")
            if applied["not_saved"]:
                print(f"Not saved: {applied['not_saved']} (speculative decoding is a chat's setting, not the model's: "
                      "set it in the chat's parameters or with serve --speculative).")  # fmt: skip
    if cancel.is_set():
        if args.apply:
            print("Nothing was saved: the sweep was cancelled.", file=sys.stderr)
        return CANCELLED
    if args.apply and result["winner_setting"] is None:
        print("Nothing was saved: no setting kept the objective.", file=sys.stderr)
        return 1
    return 0


def _library_name(name: str, path: Path, paths: AppPaths) -> str:
    """The name the window knows the model `path` by (its settings are kept under it), when a path was
    given for an installed model; else `name` as given."""
    from ember_chat.engine.cli.common import load_settings
    from ember_chat.engine.models.library import ModelLibrary

    library = ModelLibrary(load_settings(paths).models_folder(paths.default_models_dir))
    same = Path(path).expanduser().resolve()
    return next((e.name for e in library.entries() if e.path is not None and e.path.resolve() == same), name)


def _compare(args: argparse.Namespace) -> int:
    from ember_chat.engine.bench.serving.compare import compare, read_result

    a_path, b_path = args.compare
    compared = compare(read_result(a_path), read_result(b_path))
    if args.json:
        print(json.dumps(compared))
        return 0
    for side, path in (("A", a_path), ("B", b_path)):
        c = compared[side.lower()]
        where = c.get("hardware") or c.get("target")
        print(f"{side}: {path} — {c.get('model')} on {where}, {c.get('engine')}, {c.get('workload')}, {c.get('date')}")
    if not compared["loads"]:
        print("No load ran in both.")
    for load in compared["loads"]:
        print()
        print(f"{load['load']:<24} {'A':>10} {'B':>10} {'B/A':>7}")
        for row in load["figures"]:
            ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}"
            print(f"  {row['figure']:<22} {_num(row['a']):>10} {_num(row['b']):>10} {ratio:>7}")
    for side in ("a", "b"):
        if compared[f"only_{side}"]:
            print(f"Only in {side.upper()}: {', '.join(compared[f'only_{side}'])}")
    return 0


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.0f}" if value.is_integer() or abs(value) >= 10 else f"{value:.2f}"


def _find(args: argparse.Namespace) -> int:
    from ember_chat.engine.bench.serving.targets import USUAL_PORTS, find_servers
    from ember_chat.engine.serve.config import DEFAULT_PORT

    if args.ports is not None:
        ports = {int(p): "" for p in _numbers(args.ports, "--ports", int)}
    else:
        ports = {**USUAL_PORTS, DEFAULT_PORT: "Ember"}
    found = find_servers(ports)
    if args.json:
        print(json.dumps([dataclasses.asdict(server) for server in found]))
        return 0
    tried = ", ".join(str(p) for p in ports)
    if not found:
        print(f"No server answers GET /v1/models on 127.0.0.1 at ports {tried}.")
        return 0
    print(f"Servers on this machine (127.0.0.1, ports {tried} tried):")
    for server in found:
        usually = f" (usually {server.usually})" if server.usually else ""
        engine = f", {server.engine}" if server.engine else ""
        if server.needs_key:
            served = "needs an API key to list its models"
        else:
            served = ", ".join(server.models) or "no model listed"
        print(f"  {server.base_url}{usually}{engine}: {served}")
    print("Load-test one with: ember-chat bench serve --target URL")
    return 0


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def _progress(label: str, done: int, total: int | None) -> None:
    of = f"/{total}" if total is not None else ""
    print(f"\r{label}: {done}{of} requests", end="", file=sys.stderr, flush=True)


def _target(args: argparse.Namespace) -> ServingTarget:
    from ember_chat.engine.bench.serving.targets import connection_target, url_target
    from ember_chat.engine.cli.common import load_options_from_args, resolve_model
    from ember_chat.engine.core.params import LoadConfig
    from ember_chat.engine.storage.connections import ConnectionStore

    spec: str = args.target
    if spec.startswith(("http://", "https://")):
        return url_target(spec, args.served_model)
    paths = AppPaths.default()
    if spec.startswith("local:"):
        name = spec.removeprefix("local:")
        path = resolve_model(name, paths)
        return local_target(LoadConfig(path, **load_options_from_args(args)), name)
    return connection_target(ConnectionStore(paths.connections_file), spec, args.served_model)


def local_target(ref: LoadConfig, label: str, data_dir: Path | None = None, speculative: str = "auto") -> ServingTarget:
    """`ref` loaded in Ember's engine here and served by Ember's API server on a free loopback port until
    the target is closed (`speculative`: the server's default speculative decoding, serve --speculative);
    its context names the file, its hash (kept in `data_dir`, the data folder by default, so it is read
    once), its quantisation and the load settings."""
    from ember_chat.engine.bench.serving.model_facts import local_facts
    from ember_chat.engine.bench.serving.targets import started_target
    from ember_chat.engine.cli.common import load_blocking
    from ember_chat.engine.inference.service.engine import EngineService
    from ember_chat.engine.serve.config import ServerConfig
    from ember_chat.engine.serve.server import ApiServer

    service = EngineService()
    try:
        description = load_blocking(service, ref)
        folder = data_dir if data_dir is not None else AppPaths.default().data_dir
        settings = {**ref.options(), "speculative": speculative}  # (the server's default: the run's context says it)
        facts = local_facts(ref.path, description.quantization, folder, description.threads, settings)
        server = ApiServer(service, ServerConfig(port=0, speculative=speculative))
        server.start()
    except BaseException:
        service.close()
        raise

    def close() -> None:
        server.stop()
        service.close()

    threads = f", {description.threads} threads" if description.threads else ""
    engine = f"Ember (in process), {description.backend}{threads}"
    return started_target(f"local:{label}", server.url, None, engine, close, facts)
