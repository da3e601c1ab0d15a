"""What the CLI's commands share: parameter flags derived from the parameter table, model
references from flags, and blocking helpers over the engine service (the CLI is one of its clients)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from ember_chat.engine.core.params import LOAD_SPECS, SAMPLING_SPECS, LoadConfig, ParamSpec, SamplingParams
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.events import AttachmentsPlanned, KnowledgeUsed, Retrying
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest, GenerationSink, ServiceListener
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import Settings, SettingsFile

# CLI defaults that differ from the table's (a terminal answer is shorter than a chat's).
CLI_DEFAULTS = {"max_tokens": 256}
# Load flags named otherwise than the table's names (llama.cpp's names); the others are `spec.flag`.
LOAD_FLAGS = {"n_ctx": "--ctx", "n_batch": "--batch-size"}


def _add_spec(parser: argparse.ArgumentParser, spec: ParamSpec, flag: str | None = None) -> None:
    default = CLI_DEFAULTS.get(spec.name, spec.default)
    flag = flag or spec.flag
    if spec.kind is bool:  # --flash-attn / --no-flash-attn
        state = "on" if default else "off"
        help_text = f"{spec.description.rstrip('.')} (default {state})"
        parser.add_argument(
            flag, dest=spec.name, action=argparse.BooleanOptionalAction, default=default, help=help_text
        )
        return
    if spec.choices:
        help_text = f"{spec.description.rstrip('.')} (default {default})"
        parser.add_argument(flag, dest=spec.name, choices=spec.choices, default=default, help=help_text)
        return
    rng = f"{spec.low:g}–{spec.high:g}" if spec.kind is float else f"{int(spec.low):,}–{int(spec.high):,}"
    parser.add_argument(
        flag,
        dest=spec.name,
        type=spec.kind,
        default=default,
        help=f"{spec.description.rstrip('.')} ({rng}; default {default if default is not None else 'none'})",
    )


def add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    for spec in SAMPLING_SPECS:
        _add_spec(parser, spec)
    parser.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")


def add_load_flags(parser: argparse.ArgumentParser) -> None:
    """One flag for each load parameter of the table."""
    for spec in LOAD_SPECS:
        _add_spec(parser, spec, LOAD_FLAGS.get(spec.name))
    parser.add_argument(
        "--mmproj",
        type=Path,
        default=None,
        help="the model's projector file, to send it images (default: the mmproj-*.gguf beside the model)",
    )


def add_draft_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--draft-model",
        metavar="FILE",
        type=Path,
        default=None,
        help="a smaller model with the same vocabulary (same family) that drafts tokens for --speculative draft "
        "or auto (the model's own answer, greedy or sampled); one that cannot be used is refused with the reason "
        "and the model runs without it",
    )


def load_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The load parameters the flags of `add_load_flags` set, by name (LoadConfig's keywords)."""
    return {spec.name: getattr(args, spec.name) for spec in LOAD_SPECS}


def sampling_from_args(args: argparse.Namespace) -> SamplingParams:
    values: dict[str, Any] = {s.name: getattr(args, s.name) for s in SAMPLING_SPECS}
    return SamplingParams(**values, stop=tuple(args.stop))


def resolve_model(spec: str, paths: AppPaths) -> Path:
    """'starter', a name from `models list`, or a path to a .gguf file."""
    from ember_chat.engine.models.library import ModelLibrary

    return ModelLibrary(load_settings(paths).models_folder(paths.default_models_dir)).resolve(spec)


def write_export(target: Path, text: str) -> None:
    """`text` written to `target` whole or not at all (a .part file renamed), its folder made; an error
    names the file and asks for another place."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        raise EmberError(f"{target} cannot be written ({exc.strerror or exc}); choose another place.") from None


def load_settings(paths: AppPaths) -> Settings:
    """The settings; what was wrong with a damaged file goes to stderr, one line each."""
    settings_file = SettingsFile(paths.settings_file)
    settings = settings_file.load()
    report_problems(settings_file)
    return settings


def report_problems(store: Any) -> None:
    """What a store found wrong with its file (set aside, or entries kept aside), one line each on stderr."""
    for problem in store.take_problems():
        print(f"ember-chat: {problem}", file=sys.stderr)


def model_ref_from_args(args: argparse.Namespace, paths: AppPaths) -> tuple[ModelRef, str]:
    """(reference, alias): a connection's model with --remote, or named as the window names it
    (remote:<connection>/<model id>); else a local model."""
    from ember_chat.engine.storage.connections import ConnectionStore, parse_remote_model_name

    remote = parse_remote_model_name(args.model or "")
    if getattr(args, "remote", None) or remote:
        connection, model_id = remote or (args.remote, args.model)
        store = ConnectionStore(paths.connections_file)
        try:
            ref = store.model_ref(connection, model_id)
        finally:
            report_problems(store)
        return ref, ref.model_id
    mmproj, draft = getattr(args, "mmproj", None), getattr(args, "draft_model", None)
    config = LoadConfig(
        resolve_model(args.model, paths), mmproj=mmproj, draft_model=draft, **load_options_from_args(args)
    )
    alias = Path(args.model).name if args.model.endswith(".gguf") else args.model  # a file: its name
    return config, alias


class _LoadWaiter(ServiceListener):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.model: ModelDescription | None = None
        self.error: str | None = None

    def loaded(self, model: ModelDescription) -> None:
        self.model = model
        self.done.set()

    def load_failed(self, message: str) -> None:
        self.error = message
        self.done.set()


def load_blocking(service: EngineService, ref: ModelRef, alias: str | None = None) -> ModelDescription:
    waiter = _LoadWaiter()
    service.add_listener(waiter)
    try:
        service.load(ref, alias)
        while not waiter.done.wait(0.1):  # short waits: Ctrl+C stays responsive
            pass
    except KeyboardInterrupt:
        service.cancel_load()
        waiter.done.wait()
        raise
    finally:
        service.remove_listener(waiter)
    if waiter.model is None:
        raise EmberError(waiter.error or "The model could not be loaded.")
    if waiter.model.draft_refused:  # (the model loaded and runs without its draft model: said, not failed)
        print(f"ember-chat: {waiter.model.draft_refused}", file=sys.stderr, flush=True)
    return waiter.model


class PrintSink(GenerationSink):
    """Streams the answer to a terminal; keeps the outcome for the exit status."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.done = threading.Event()
        self.error: str | None = None
        self.reason = ""
        self.metrics: GenerationMetrics | None = None
        self.planned: AttachmentsPlanned | None = None
        self.knowledge: KnowledgeUsed | None = None
        self.text = ""  # the whole answer, once finished

    def tokens(self, text: str, output_tokens: int) -> None:
        self.out.write(text)
        self.out.flush()

    def attachments_planned(self, event: AttachmentsPlanned) -> None:
        self.planned = event
        from ember_chat.engine.cli.attach import describe

        for line in describe(event):
            print(line, file=sys.stderr)

    def knowledge_used(self, event: KnowledgeUsed) -> None:
        self.knowledge = event
        print(f"[{event.summary()}]", file=sys.stderr)

    def trimmed(self, dropped_messages: int) -> None:
        print(f"[{dropped_messages} oldest messages left out to fit the context]", file=sys.stderr)

    def notice(self, message: str) -> None:
        print(f"[{message}]", file=sys.stderr)

    def retrying(self, event: Retrying) -> None:
        print(f"[{event.reason} Retrying in {event.delay_s:g} s ({event.attempt}/{event.attempts})]", file=sys.stderr)

    def failed(self, message: str, kind: str = "") -> None:
        self.error = message

    def finished(self, reason: str, text: str, metrics: GenerationMetrics | None, itl_ms: list[float]) -> None:
        self.reason, self.metrics, self.text = reason, metrics, text
        self.done.set()


@contextmanager
def stop_on_sigint(service: EngineService, request_id: int) -> Iterator[None]:
    def on_sigint(_sig: int, _frame: FrameType | None) -> None:
        service.cancel(request_id)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def generate_blocking(service: EngineService, request: GenerationRequest, sink: PrintSink) -> None:
    rid = service.submit(request)
    with stop_on_sigint(service, rid):
        while not sink.done.wait(0.1):
            pass
