"""`ember-chat` command line: launches the app, and runs the engine from a terminal.

Only what parsing needs is imported here; a command's own module (and llama.cpp, the Hub client,
psutil) is imported when that command runs, so `--version` and `--help` start light.

Bad input (missing model, bad file, bad parameter) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from ember_chat.engine import __version__
from ember_chat.engine.cli import bench as bench_cli
from ember_chat.engine.cli import chats as chats_cli
from ember_chat.engine.cli import models_ps
from ember_chat.engine.cli import projects as projects_cli
from ember_chat.engine.cli import remote as remote_cli
from ember_chat.engine.cli import run as run_cli
from ember_chat.engine.cli import serve as serve_cli
from ember_chat.engine.cli import transcribe as transcribe_cli
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.paths import AppPaths

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ember-chat: {message}\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ember-chat",
        description="Ember: private AI chat with local models.",
        epilog="Without a command, ember-chat opens the desktop app: ember-chat [--model NAME].",
    )
    parser.add_argument("--version", action="version", version=f"ember-chat {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    run_cli.add_parser(sub)

    info = sub.add_parser("inspect", help="describe a .gguf file without loading it")
    info.add_argument("path")

    models = sub.add_parser("models", help="find, download and organise models")
    msub = models.add_subparsers(dest="models_command", parser_class=_Parser, required=True)
    ls = msub.add_parser("list", help="installed models")
    ls.add_argument("--json", action="store_true")
    se = msub.add_parser("search", help="search the Hub for GGUF models")
    se.add_argument("query")
    se.add_argument("--limit", type=int, default=20)
    se.add_argument("--json", action="store_true")
    fi = msub.add_parser("files", help="a repo's GGUF files by quantization, with a fit estimate")
    fi.add_argument("repo")
    fi.add_argument("--ctx", type=int, default=4096, help="context length for the fit estimate")
    fi.add_argument("--json", action="store_true")
    dl = msub.add_parser("download", help="download a file (run again to resume)")
    dl.add_argument("repo")
    dl.add_argument("file")
    dl.add_argument("--revision", default="main")
    im = msub.add_parser("import", help="add a local .gguf file")
    im.add_argument("path")
    im.add_argument("--in-place", action="store_true", help="use the file where it is instead of copying it")
    rm = msub.add_parser("rm", help="delete an installed model")
    rm.add_argument("name")
    tk = msub.add_parser("token", help="store a Hugging Face token in the OS keychain (read from stdin)")
    tk.add_argument("--clear", action="store_true")
    models_ps.add_parser(msub)
    remote_cli.add_parser(sub, _Parser)
    chats_cli.add_parser(sub, _Parser)
    projects_cli.add_parser(sub, _Parser)
    serve_cli.add_parser(sub)
    transcribe_cli.add_parser(sub)
    bench_cli.add_parser(sub)
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    return run_cli.run(args)


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ember_chat.engine.models.gguf_inspect import inspect_gguf

    print(json.dumps(inspect_gguf(args.path).summary(), indent=2))
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from ember_chat.engine.cli import models as models_cli

    return models_cli.run(args, AppPaths.default())


def _cmd_remote(args: argparse.Namespace) -> int:
    return remote_cli.run(args, AppPaths.default())


def _cmd_serve(args: argparse.Namespace) -> int:
    return serve_cli.run(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    return bench_cli.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.ERROR,
        format="%(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return 0
    commands = {
        "run": _cmd_run,
        "inspect": _cmd_inspect,
        "models": _cmd_models,
        "remote": _cmd_remote,
        "chats": lambda a: chats_cli.run(a, AppPaths.default()),
        "projects": lambda a: projects_cli.run(a, AppPaths.default()),
        "serve": _cmd_serve,
        "bench": _cmd_bench,
        "transcribe": transcribe_cli.run,
    }
    try:
        return commands[args.command](args)
    except EmberError as exc:
        print(f"ember-chat: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
