"""The names of `ember-chat`'s terminal commands, with no imports: the launcher reads them on every
start to choose between the command line and the window, so they must cost nothing to import."""

from __future__ import annotations

from collections.abc import Sequence

COMMANDS = ("run", "inspect", "models", "remote", "serve", "bench")
CLI_FLAGS = ("--version", "-h", "--help")


def is_cli(args: Sequence[str]) -> bool:
    """True when these arguments are a terminal command (or a flag of the command line itself)."""
    return bool(args) and (args[0] in COMMANDS or args[0] in CLI_FLAGS)
