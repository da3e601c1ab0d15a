"""`ember-chat remote add|list|rm|test`: named connections to OpenAI-compatible servers. API keys go
to the OS keychain (read from an environment variable or stdin, never from the command line, where
other users could see them)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ember_chat.engine.cli.common import report_problems
from ember_chat.engine.core.refs import crosses_network_in_clear
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.connections import Connection, ConnectionStore
from ember_chat.engine.storage.paths import AppPaths


def add_parser(sub: argparse._SubParsersAction, parser_class: type) -> None:
    remote = sub.add_parser("remote", help="connections to remote OpenAI-compatible servers")
    rsub = remote.add_subparsers(dest="remote_command", parser_class=parser_class, required=True)
    add = rsub.add_parser("add", help="add or update a connection")
    add.add_argument("name")
    add.add_argument("url", help="base URL, e.g. http://127.0.0.1:8000/v1")
    add.add_argument("--model", default="", help="default model id")
    key = add.add_mutually_exclusive_group()
    key.add_argument("--api-key-env", metavar="VAR", help="read the API key from this environment variable")
    key.add_argument("--api-key-stdin", action="store_true", help="read the API key from stdin")
    add.add_argument("--insecure", action="store_true", help="do not verify the TLS certificate (lab servers)")
    add.add_argument("--read-timeout", type=float, default=60.0, help="seconds of silence before giving up")
    ls = rsub.add_parser("list", help="list connections")
    ls.add_argument("--json", action="store_true")
    rm = rsub.add_parser("rm", help="remove a connection and its key")
    rm.add_argument("name")
    test = rsub.add_parser("test", help="list a connection's models and its round-trip time")
    test.add_argument("name")
    test.add_argument("--json", action="store_true")


def run(args: argparse.Namespace, paths: AppPaths) -> int:
    store = ConnectionStore(paths.connections_file)
    try:
        return _run(args, store)
    finally:
        report_problems(store)


def _run(args: argparse.Namespace, store: ConnectionStore) -> int:
    cmd = args.remote_command
    if cmd == "add":
        api_key = None
        if args.api_key_env:
            api_key = os.environ.get(args.api_key_env)
            if not api_key:
                raise EmberError(f"The environment variable {args.api_key_env} is not set.")
        elif args.api_key_stdin:
            api_key = sys.stdin.readline().strip()
        conn = Connection(args.name, args.url, args.model, not args.insecure, args.read_timeout)
        store.save(conn, api_key=api_key)
        print(f"Saved connection {conn.name!r}: {conn.base_url}" + (" (TLS checks off)" if args.insecure else ""))
        if crosses_network_in_clear(conn.base_url):
            what = "the API key and your chats" if api_key or store.has_key(conn.name) else "your chats"
            print(f"warning: {conn.base_url} is plain http:// on another machine: {what} cross the network "
                  "unencrypted. Use https:// if the server offers it.", file=sys.stderr)  # fmt: skip
        return 0
    if cmd == "list":
        rows = [
            {"name": c.name, "base_url": c.base_url, "default_model": c.default_model, "verify_tls": c.verify_tls,
             "read_timeout_s": c.read_timeout_s, "api_key": store.has_key(c.name)}
            for c in store.list()
        ]  # fmt: skip
        if args.json:
            print(json.dumps(rows, indent=2))
        elif not rows:
            print("No connections. Add one: ember-chat remote add NAME URL [--model ID]")
        for r in rows if not args.json else []:
            key = "key in keychain" if r["api_key"] else "no key"
            print(f"{r['name']}\t{r['base_url']}\t{r['default_model'] or '-'}\t{key}")
        return 0
    if cmd == "rm":
        store.remove(args.name)
        print(f"Removed connection {args.name!r}.")
        return 0
    from ember_chat.engine.inference.remote.backend import check_connection  # the HTTP stack only when needed

    check = check_connection(store.endpoint(args.name))
    store.save(
        Connection(**{**store.get(args.name).__dict__, "models": tuple(m.id for m in check.models)}), api_key=None
    )
    if args.json:
        print(json.dumps({"round_trip_ms": check.round_trip_s * 1000, "models": [m.__dict__ for m in check.models]}))
    else:
        print(f"OK: round trip {check.round_trip_s * 1000:.0f} ms, {len(check.models)} model(s)")
        for m in check.models:
            print(f"  {m.id}" + (f"  ({m.n_ctx:,} ctx)" if m.n_ctx else ""))
    return 0
