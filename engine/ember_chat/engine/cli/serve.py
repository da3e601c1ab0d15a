"""`ember-chat serve`: Ember's OpenAI-compatible API server without the window."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

from ember_chat.engine.attachments import Limits
from ember_chat.engine.cli.common import add_load_flags, load_blocking, model_ref_from_args
from ember_chat.engine.cli.presets_option import add_preset_option, chosen_preset, cli_model_key
from ember_chat.engine.cli.snapshots_option import add_snapshot_flag, close_snapshot_store, snapshot_store
from ember_chat.engine.core.instance import same_listener
from ember_chat.engine.core.refs import RemoteModelRef
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import DEFAULT_PORT, ServerConfig
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import SettingsFile


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="serve a model on an OpenAI-compatible API (no window)")
    serve.add_argument("--model", help="path to a .gguf file, 'starter', or a remote model id with --remote")
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
    add_load_flags(serve)
    add_snapshot_flag(serve)
    serve.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log")
    add_preset_option(serve, "answer every request")


def run(args: argparse.Namespace) -> int:
    if not args.model and not args.remote:
        raise EmberError("the following arguments are required: --model (or --remote NAME)")
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
        # a request's files: the size, time and memory limits set in settings.json, as in the window
        attachment_limits=Limits.from_settings(SettingsFile(paths.settings_file).load()),
    )
    config.check()
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
    # Asked at each request, so a preset edited in the window while this serves applies at once; what a
    # request says itself wins over it.
    fixed = named.id if args.preset and named is not None else None
    server = ApiServer(
        service, config, preset=lambda: library.get(fixed) if fixed is not None else library.model_default(key)
    )
    stop = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        model = load_blocking(service, ref, alias)
        server.start()
        with_preset = f" with the preset “{named.name}” ({how})" if named is not None else ""
        print(
            f"Serving {args.alias or alias} ({model.badge()}){with_preset} on {server.url} — Ctrl+C to stop",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        server.stop()
        service.close()
        close_snapshot_store(snapshots)
    return 0
