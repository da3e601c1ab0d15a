"""`ember-chat serve`: Ember's OpenAI-compatible API server without the window."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
import time
from types import FrameType

from ember_chat.engine.attachments import Limits
from ember_chat.engine.cli.common import (
    add_draft_flag,
    add_load_flags,
    load_blocking,
    load_options_from_args,
    load_settings,
    model_ref_from_args,
)
from ember_chat.engine.cli.presets_option import add_preset_option, chosen_preset, cli_model_key
from ember_chat.engine.cli.snapshots_option import add_snapshot_flag, close_snapshot_store, snapshot_store
from ember_chat.engine.core.instance import same_listener
from ember_chat.engine.core.params import SPECULATIVE_MODES, LoadOptions
from ember_chat.engine.core.refs import ModelRef, RemoteModelRef
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.pool.catalog import library_catalog
from ember_chat.engine.inference.pool.memory import MemoryBudget
from ember_chat.engine.inference.pool.pool import DEFAULT_TTL_S, ModelPool
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.serve.config import DEFAULT_PORT, ServerConfig
from ember_chat.engine.serve.projects_option import ServedProjects
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.connections import ConnectionStore
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.presets import Preset
from ember_chat.engine.storage.settings import SettingsFile


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="serve a model on an OpenAI-compatible API (no window)")
    serve.add_argument(
        "--model",
        help="the model loaded at start: a .gguf file, 'starter', or a remote model id with --remote "
        "(without it, each request's model is loaded when it is named)",
    )
    serve.add_argument("--remote", metavar="NAME", help="serve a model of this connection")
    serve.add_argument("--host", default="127.0.0.1", help="interface (another than loopback needs an API key)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT)
    serve.add_argument("--api-key-env", metavar="VAR", help="require the API key in this environment variable")
    serve.add_argument("--allow-origin", action="append", default=[], help="browser origin allowed (CORS)")
    serve.add_argument("--queue", type=int, default=8, help="requests that may wait before 429")
    serve.add_argument("--alias", metavar="NAME", help="the model's name on the API (for clients that hard-code one)")
    serve.add_argument(
        "--allow-unknown-fields",
        action="store_true",
        help="ignore request fields Ember does not know (default: a 400 naming them)",
    )
    serve.add_argument(
        "--speculative",
        choices=SPECULATIVE_MODES,
        default="auto",
        help="speculative decoding for a request whose ember.speculative does not say: ngram drafts tokens from "
        "the prompt and verifies them several at a time (greedy: the same answer, sampled: the same distribution; "
        "faster when it copies "
        "the prompt); draft: drafts from --draft-model (n-grams without one); auto (the default): the same (the "
        "draft model's drafts with one), stopped for an answer where it does not pay; off",
    )
    serve.add_argument(
        "--memory-budget",
        metavar="SIZE",
        type=parse_size,
        help="memory the models loaded on demand may take together, e.g. 8GB (default: 3/4 of the free memory)",
    )
    serve.add_argument("--models-max", metavar="N", type=int, help="models loaded at once, at most")
    serve.add_argument(
        "--ttl",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_TTL_S,
        help="how long a model loaded for a request stays loaded once idle (default: %(default)g; a request's "
        "ttl or keep_alive wins)",
    )
    serve.add_argument(
        "--no-jit", action="store_true", help="serve only --model: a request naming another model is a 404"
    )
    add_load_flags(serve)
    add_draft_flag(serve)  # (for --model: the models loaded on demand have none)
    add_snapshot_flag(serve)
    serve.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log")
    add_preset_option(serve, "answer every request")


def parse_size(text: str) -> int:
    """ "8GB", "512 MB", "1.5G", "2048" (MB) → bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 8GB or 512MB")
    unit = match.group(2).upper() or "M"
    return int(float(match.group(1)) * 1000 ** "KMGT".index(unit) * 1000)


def run(args: argparse.Namespace) -> int:
    if not args.model and not args.remote and args.no_jit:
        raise EmberError("the following arguments are required: --model (or --remote NAME), with --no-jit")
    if args.models_max is not None and args.models_max < 1:
        raise EmberError("--models-max must be 1 or more.")
    if args.draft_model is not None and not args.model:
        raise EmberError("--draft-model drafts for --model: name the model it drafts for.")
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise EmberError(f"The environment variable {args.api_key_env} is not set.")
    paths = AppPaths.default()
    config = ServerConfig(
        args.host,
        args.port,
        api_key,
        tuple(args.allow_origin),
        allow_unknown_fields=args.allow_unknown_fields,
        alias=args.alias,
        speculative=args.speculative,
        # a request's files: the size, time and memory limits set in settings.json, as in the window
        attachment_limits=Limits.from_settings(SettingsFile(paths.settings_file).load()),
    )
    config.check()
    named, how = None, ""
    if args.model:
        library, named, how = chosen_preset(args, paths)  # (a wrong --preset: said before the model loads)
        key = cli_model_key(args, paths)
        ref, alias = model_ref_from_args(args, paths)
        if isinstance(ref, RemoteModelRef) and same_listener(ref.endpoint.base_url, args.host, args.port):
            raise EmberError(
                f"The connection {ref.endpoint.name} ({ref.endpoint.base_url}) points at {args.host}:{args.port}, "
                "where this server is to listen: it would serve itself and every request would wait for itself. "
                "Use another port, or a connection to another server."
            )
    service = EngineService(queue_limit=args.queue)
    snapshots = service.snapshot_store = snapshot_store(args, paths)
    pool = None if args.no_jit else _pool(args, paths, service.server_id)
    preset = None
    if args.model:
        # Asked at each request, so a preset edited in the window while this serves applies at once; what a
        # request says itself wins over it.
        fixed = named.id if args.preset and named is not None else None

        def preset() -> Preset | None:
            return library.get(fixed) if fixed is not None else library.model_default(key)

    projects = ServedProjects(paths)  # (a request's `"ember": {"project": NAME}`: the window's projects)
    server = ApiServer(service, config, preset=preset, pool=pool, projects=projects)
    stop = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if args.model:
            model = load_blocking(service, ref, alias)
            if pool is not None:
                pool.pin(alias, service, "serve")  # (under its library name: --alias is the server's own)
        server.start()
        if args.model:
            with_preset = f" with the preset “{named.name}” ({how})" if named is not None else ""
            what = f"{args.alias or alias} ({model.badge()}){with_preset}"
            others = " and the other installed models on demand" if pool is not None else ""
        else:
            what, others = "the installed models", " (each loaded when a request names it)"
        print(f"Serving {what}{others} on {server.url} — Ctrl+C to stop", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pool is not None:  # first: a request waiting for a model's load is answered at once, not after it
            pool.close()
        server.stop()
        service.close()
        projects.close()
        close_snapshot_store(snapshots)
    return 0


def _pool(args: argparse.Namespace, paths: AppPaths, server_id: str) -> ModelPool:
    """The installed models, each loaded with this command's load flags when a request names it, and the
    configured connections' models (`remote:<connection>/<model id>`); what it loads and unloads, and a
    connection that stops answering, is said on stderr, one line each."""
    settings = load_settings(paths)
    library = ModelLibrary(settings.models_folder(paths.default_models_dir))
    options = LoadOptions(**load_options_from_args(args))

    def said(what: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)

    budget = MemoryBudget(ram_bytes=args.memory_budget, models_max=args.models_max)
    ttl = None if args.ttl < 0 else args.ttl
    local = library_catalog(library, lambda _entry: options)
    # (here, not at the top: its HTTP client is heavy, and `ember-chat --help` imports this module)
    from ember_chat.engine.inference.pool.remote_catalog import RemoteCatalog

    remote = RemoteCatalog(ConnectionStore(paths.connections_file), said=said, own_server_id=server_id)

    def catalog() -> dict[str, ModelRef]:
        return {**remote(), **local()}  # (remote names start with "remote:": none hides a local one)

    return ModelPool(catalog, budget, ttl, on_change=said, lookup=remote.lookup)
