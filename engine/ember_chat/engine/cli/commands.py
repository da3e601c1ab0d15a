"""Which arguments are for `ember-chat`'s command line rather than the window, with no imports: the
launcher asks on every start, so this must cost nothing to import.

The window takes options only (`--model`, `--send`, …), never a word of its own, so any first argument
that is a word is a terminal command, and the command line's own parser (engine/cli/main.py) is the one
place that knows which words exist: a new command works from the launcher without a second list to
keep in step, and a mistyped one gets the parser's "invalid choice" with the real commands listed."""

from __future__ import annotations

from collections.abc import Sequence

CLI_FLAGS = ("--version", "-h", "--help")


def is_cli(args: Sequence[str]) -> bool:
    """True when these arguments are a terminal command (or a flag of the command line itself)."""
    return bool(args) and (not args[0].startswith("-") or args[0] in CLI_FLAGS)
