"""`ember-chat` command line: launches the app, and runs the engine from a terminal.

Bad input (missing model, bad file, bad parameter) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from engine import __version__
from engine.errors import EmberError
from engine.inference.events import ContextTrimmed, Finished, Token
from engine.inference.params import LoadConfig, SamplingParams, default_threads
from engine.inference.prompting import ChatMessage
from engine.storage.paths import AppPaths
from engine.storage.settings import SettingsFile

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

    run = sub.add_parser("run", help="generate an answer in the terminal")
    run.add_argument("--model", required=True, help="path to a .gguf file, or 'starter'")
    run.add_argument("--prompt", required=True)
    run.add_argument("--system", default="", help="system prompt (chat mode)")
    run.add_argument("--mode", choices=("chat", "complete"), default="chat")
    run.add_argument("--max-tokens", type=int, default=256)
    run.add_argument("--temperature", type=float, default=0.7)
    run.add_argument("--top-k", type=int, default=40)
    run.add_argument("--top-p", type=float, default=0.95)
    run.add_argument("--min-p", type=float, default=0.05)
    run.add_argument("--repeat-penalty", type=float, default=1.0)
    run.add_argument("--seed", type=int, default=None)
    run.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    run.add_argument("--ctx", type=int, default=4096, help="context length in tokens")
    run.add_argument("--threads", type=int, default=default_threads())
    run.add_argument("--gpu-layers", type=int, default=0, help="layers to offload (-1: all)")
    run.add_argument("--flash-attn", action="store_true")
    run.add_argument("--template", default=None, help="chat template: a llama.cpp built-in name")
    run.add_argument("--json", action="store_true", help="print a JSON line of metrics at the end")
    run.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log")

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
    return parser


def resolve_model(spec: str, paths: AppPaths) -> Path:
    """'starter', a name from `models list`, or a path to a .gguf file."""
    from engine.models.library import ModelLibrary

    settings = SettingsFile(paths.settings_file).load()
    return ModelLibrary(settings.models_folder(paths.default_models_dir)).resolve(spec)


def _cmd_run(args: argparse.Namespace) -> int:
    from engine.inference.runtime import LocalRuntime  # imports llama.cpp: keep `--help` fast

    params = SamplingParams(
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        repeat_penalty=args.repeat_penalty,
        seed=args.seed,
        max_tokens=args.max_tokens,
        stop=tuple(args.stop),
    )
    config = LoadConfig(
        path=resolve_model(args.model, AppPaths.default()),
        n_ctx=args.ctx,
        threads=args.threads,
        gpu_layers=args.gpu_layers,
        flash_attn=args.flash_attn,
    )
    runtime = LocalRuntime()
    runtime.load(config)

    def on_sigint(_sig: int, _frame: FrameType | None) -> None:
        runtime.request_stop()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        if args.mode == "chat":
            messages = [ChatMessage("system", args.system)] if args.system else []
            messages.append(ChatMessage("user", args.prompt))
            events = runtime.chat(messages, params, template_override=args.template)
        else:
            events = runtime.complete(args.prompt, params)
        out = sys.stdout
        for event in events:
            if isinstance(event, Token):
                out.write(event.text)
                out.flush()
            elif isinstance(event, ContextTrimmed):
                print(f"[{event.dropped_messages} oldest messages left out to fit the context]", file=sys.stderr)
            elif isinstance(event, Finished):
                out.write("\n")
                if args.json:
                    out.write(json.dumps(event.metrics.to_dict()) + "\n")
                else:
                    print(event.metrics.summary_line(), file=sys.stderr)
        out.flush()
    finally:
        signal.signal(signal.SIGINT, previous)
        runtime.close()
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from engine.models.gguf_inspect import inspect_gguf

    print(json.dumps(inspect_gguf(args.path).summary(), indent=2))
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from engine.cli import models as models_cli

    return models_cli.run(args, AppPaths.default())


COMMANDS = ("run", "inspect", "models")


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
    commands = {"run": _cmd_run, "inspect": _cmd_inspect, "models": _cmd_models}
    try:
        return commands[args.command](args)
    except EmberError as exc:
        print(f"ember-chat: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
