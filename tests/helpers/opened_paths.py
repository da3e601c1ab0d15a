"""Which paths a piece of code opens or lists, seen through Python's audit hooks (PEP 578): for the tests of
hostile input, where a file must never make Ember read a path it names."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

_EVENTS = ("open", "os.listdir", "os.scandir")
_watching: list[tuple[frozenset[str], list[str]]] = []  # the events and lists of the `opened()` blocks running now
_installed = False


def _hook(event: str, args: tuple[object, ...]) -> None:
    if _watching and args and isinstance(args[0], str | bytes | os.PathLike):
        for events, seen in _watching:
            if event in events:
                seen.append(os.fsdecode(args[0]))


@contextlib.contextmanager
def opened(also: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """Within the block, every path opened or listed by this process, in order, and the first argument of
    the audit events `also` names (e.g. "sqlite3.connect": a database opened). An audit hook cannot be
    removed: it is installed once and records only while a block runs. (Python raises no audit event for
    os.stat: a path only looked at is not seen here.)"""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    seen: list[str] = []
    watch = (frozenset((*_EVENTS, *also)), seen)
    _watching.append(watch)
    try:
        yield seen
    finally:
        _watching.remove(watch)
