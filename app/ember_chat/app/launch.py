"""The `ember-chat` entry point: a terminal command (`run`, `chats`, … `--version`, `--help`) goes to
the engine's CLI; anything else opens the desktop app."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ember_chat.engine.cli.commands import is_cli


def main(argv: Sequence[str] | None = None) -> int:
    if getattr(sys, "frozen", False):  # the bundle: a child process reading a big attachment starts here
        import multiprocessing

        multiprocessing.freeze_support()
    args = list(sys.argv[1:] if argv is None else argv)
    if is_cli(args):
        from ember_chat.engine.cli.main import main as cli_main

        return cli_main(args)
    from ember_chat.app.main import main as gui_main

    return gui_main(args)


if __name__ == "__main__":
    sys.exit(main())
