"""Which paths a piece of code opens or lists, seen through Python's audit hooks (PEP 578): for the tests of
hostile input, where a file must never make Ember read a path it names."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

_EVENTS = ("open", "os.listdir", "os.scandir")
_watching: list[list[str]] = []  # the lists of the `opened()` blocks running now (none: the hook does nothing)
_installed = False


def _hook(event: str, args: tuple[object, ...]) -> None:
    if _watching and event in _EVENTS and args and isinstance(args[0], str | bytes | os.PathLike):
        for seen in _watching:
            seen.append(os.fsdecode(args[0]))


@contextlib.contextmanager
def opened() -> Iterator[list[str]]:
    """Within the block, every path opened or listed by this process, in order (an audit hook cannot be
    removed: it is installed once and records only while a block runs)."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    seen: list[str] = []
    _watching.append(seen)
    try:
        yield seen
    finally:
        _watching.remove(seen)
