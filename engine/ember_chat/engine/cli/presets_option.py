"""`--preset NAME` of `ember-chat run` and `serve`, and the model's default preset where none is named:
the preset library the window keeps (presets.json in the config folder), by the same model key."""

from __future__ import annotations

import argparse

from ember_chat.engine.cli.common import load_settings, report_problems
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.presets import REMOTE_PREFIX, Preset, PresetLibrary, model_key


def add_preset_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--preset",
        metavar="NAME",
        help=f"{what} with this preset of Ember's library (default: the model's own default preset, if it has one)",
    )


def cli_model_key(args: argparse.Namespace, paths: AppPaths) -> str:
    """The key the window keeps this model's default preset under (the picker's name)."""
    if getattr(args, "remote", None):
        return f"{REMOTE_PREFIX}{args.remote}/{args.model}"
    return model_key(args.model, load_settings(paths).models_folder(paths.default_models_dir))


def chosen_preset(args: argparse.Namespace, paths: AppPaths) -> tuple[PresetLibrary, Preset | None, str]:
    """(the library, the preset named by --preset or else the model's default one, how it was chosen).
    Raises PresetError for a name that is not there."""
    library = PresetLibrary(paths.config_dir)
    try:
        if args.preset:
            return library, library.find(args.preset), "--preset"
        return library, library.model_default(cli_model_key(args, paths)), "the model's default preset"
    finally:
        report_problems(library)
