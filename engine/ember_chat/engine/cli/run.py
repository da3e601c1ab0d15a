"""`ember-chat run`: one answer in the terminal, from a local model or a connection's (`--remote`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ember_chat.engine.attachments.store import temporary_store
from ember_chat.engine.cli.attach import read_files, report, user_message
from ember_chat.engine.cli.common import (
    CLI_DEFAULTS,
    PrintSink,
    add_draft_flag,
    add_load_flags,
    add_sampling_flags,
    generate_blocking,
    load_blocking,
    model_ref_from_args,
)
from ember_chat.engine.cli.presets_option import add_preset_option, chosen_preset
from ember_chat.engine.cli.project_option import knowledge_report, open_project
from ember_chat.engine.cli.snapshots_option import add_snapshot_flag, close_snapshot_store, snapshot_store
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SAMPLING_SPECS, SPECULATIVE_MODES, SamplingParams
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.errors import EmberError, InvalidParameter
from ember_chat.engine.inference.grammar.structured import json_format, parse_schema_text
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from ember_chat.engine.projects.turn import project_system
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.presets import Preset

_UNSET = object()  # a flag not given: the preset's value, else the CLI's default


def add_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="generate an answer in the terminal")
    run.add_argument("--model", help="path to a .gguf file, 'starter', or a remote model id with --remote")
    run.add_argument("--remote", metavar="NAME", help="use a model of this connection (see `ember-chat remote`)")
    run.add_argument("--prompt", required=True)
    run.add_argument("--system", default="", help="system prompt (chat mode)")
    run.add_argument(
        "--project",
        metavar="NAME",
        help="answer in this project (see `ember-chat projects`): its instructions before the system prompt, "
        "and the passages of its knowledge that best match the prompt (--json lists them as `sources`)",
    )
    run.add_argument("--mode", choices=("chat", "complete"), default="chat")
    run.add_argument(
        "--attach", metavar="FILE", action="append", default=[], help="attach a file to the prompt (repeatable)"
    )
    add_sampling_flags(run)
    add_load_flags(run)
    add_draft_flag(run)
    add_snapshot_flag(run)
    run.add_argument("--template", default=None, help="chat template: a llama.cpp built-in name")
    as_json = run.add_mutually_exclusive_group()
    as_json.add_argument(
        "--json-schema", metavar="FILE", help="answer in JSON that matches this JSON schema (grammar-constrained)"
    )
    as_json.add_argument("--json-object", action="store_true", help="answer with a JSON object (grammar-constrained)")
    run.add_argument("--json", action="store_true", help="print a JSON line of metrics at the end")
    run.add_argument(
        "--speculative",
        choices=SPECULATIVE_MODES,
        default="auto",
        help="ngram: draft tokens from the prompt and verify them several at a time (at --temperature 0 the same "
        "answer, sampled the same distribution; faster when it copies the prompt); draft: drafts from --draft-model "
        "(n-grams without one); auto (the default): the same (the draft model's drafts with one), stopped for "
        "an answer where it does not pay; off",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log")
    add_preset_option(run, "answer")
    run.set_defaults(system=_UNSET, **{spec.name: _UNSET for spec in SAMPLING_SPECS})


def _given(args: argparse.Namespace, name: str) -> bool:
    return getattr(args, name) is not _UNSET


def params_with_preset(args: argparse.Namespace, preset: Preset | None) -> tuple[SamplingParams, str]:
    """The sampling parameters and system prompt: the flags given, over the preset, over the CLI's
    defaults."""
    values = {spec.name: CLI_DEFAULTS.get(spec.name, spec.default) for spec in SAMPLING_SPECS}
    base = SamplingParams(**values, stop=tuple(args.stop))
    if preset is not None:
        base = preset.sampling(base)
    given = {spec.name: getattr(args, spec.name) for spec in SAMPLING_SPECS if _given(args, spec.name)}
    system = args.system if _given(args, "system") else (preset.system_prompt if preset is not None else "")
    return replace(base, **given), system


def _json_format(schema_file: str | None) -> dict[str, Any]:
    """The response_format of --json-object / --json-schema FILE (the schema checked now, before a load)."""
    if schema_file is None:
        return json_format(None)
    try:
        text = Path(schema_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EmberError(f"Cannot read the JSON schema {schema_file}: {exc.strerror or exc}.") from exc
    try:
        return json_format(parse_schema_text(text))
    except InvalidParameter as exc:
        raise EmberError(f"{schema_file}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    if not args.model and not args.remote:
        raise EmberError("the following arguments are required: --model (or --remote NAME)")
    paths = AppPaths.default()
    _, preset, how = chosen_preset(args, paths)
    params, system = params_with_preset(args, preset)
    if preset is not None:
        print(f"[preset “{preset.name}”: {how}; the flags given go over it]", file=sys.stderr)
    if args.json_schema or args.json_object:
        params = replace(params, response_format=_json_format(args.json_schema))
    params = replace(params, speculative=args.speculative)
    if args.attach and args.mode != "chat":
        raise EmberError("--attach needs --mode chat.")
    files = read_files(args.attach, paths) if args.attach else []  # before the model loads: a bad file is quick
    knowledge = None
    if args.project is not None:
        if args.mode != "chat":
            raise EmberError("--project needs --mode chat.")
        knowledge = open_project(paths, args.project)  # (before the model loads: an unknown name is quick)
        system = project_system(knowledge.project.instructions, system)
    ref, alias = model_ref_from_args(args, paths)
    service = EngineService()
    snapshots = service.snapshot_store = snapshot_store(args, paths)
    with contextlib.ExitStack() as stack:
        if knowledge is not None:
            stack.callback(knowledge.close)
        stack.callback(close_snapshot_store, snapshots)  # after the service (callbacks run last first)
        stack.callback(service.close)
        load_blocking(service, ref, alias)
        sink = PrintSink(sys.stdout)
        if args.mode == "chat":
            messages = [ChatMessage("system", system)] if system else []
            store = stack.enter_context(temporary_store("ember-attach-")) if files else None
            messages.append(user_message(args.prompt, files, store) if store else ChatMessage("user", args.prompt))
            request = GenerationRequest(
                params,
                sink,
                messages=messages,
                template=args.template,
                client="cli",
                batch_s=0,
                attachment_store=store,
                knowledge=knowledge,
            )
        else:
            request = GenerationRequest(params, sink, prompt=args.prompt, client="cli", batch_s=0)
        request.snapshot_s = float("inf")
        generate_blocking(service, request, sink)
    if sink.reason == StopReason.ERROR:
        raise EmberError(sink.error or "The answer failed.")
    out = sys.stdout
    out.write("\n")
    if sink.metrics is not None:
        if args.json:
            line = sink.metrics.to_dict()
            if files:
                line["attachments"] = report(files, sink.planned)
            if knowledge is not None:
                line.update(knowledge_report(knowledge.name, sink.knowledge, sink.text, args.prompt))
            out.write(json.dumps(line) + "\n")
        else:
            print(sink.metrics.summary_line(), file=sys.stderr)
    out.flush()
    if sink.error:  # interrupted: what arrived was printed; say what happened
        print(f"ember-chat: {sink.error}", file=sys.stderr)
        return 2
    return 0
