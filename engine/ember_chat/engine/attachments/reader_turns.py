"""Who reads a file next (attachments/isolated.py runs each read in a child process): at most `MAX_READERS`
children at once in a process, in order of arrival, and API requests, someone else's files, never more
than `MAX_READERS - 1` of them, so the window's attachments, imports and the CLI always find one free."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from ember_chat.engine.errors import ReaderFailed

_RECHECK_S = 0.05  # how often a waiting read checks give_up() and its deadline
MAX_READERS = max(2, min(4, os.cpu_count() or 2))


class Requester(StrEnum):
    """Whose file a read is, for its share of the readers (`Turns`)."""

    API = "api"  # a request to the API server: another program's file
    LOCAL = "local"  # the user's own: an attachment in the window, an import, `ember-chat run --attach`


@dataclass(eq=False)  # (each one in line is itself: found by identity)
class _InLine:
    requester: Requester


class Turns:
    """Who reads next: at most `total` children at once, each requester at most its share of them, in
    order of arrival. One that cannot go yet (its requester's share is taken) does not hold up those
    behind it that can: an API request waiting for the API's share never delays the window's file."""

    def __init__(self, total: int, shares: Mapping[Requester, int]) -> None:
        self.total = total
        self.shares = dict(shares)
        self._reading: Counter[Requester] = Counter()
        self._line: list[_InLine] = []
        self._changed = threading.Condition()

    def take(self, requester: Requester, give_up: Callable[[], bool], deadline: float | None = None) -> bool:
        """Wait for a turn; False when `give_up()` turned true or `deadline` (time.monotonic) passed
        first. A turn taken is given back with `give_back`."""
        me = _InLine(requester)
        with self._changed:
            self._line.append(me)
        try:
            while True:
                with self._changed:
                    if self._next_up(me):
                        self._reading[requester] += 1
                        return True
                    self._changed.wait(_RECHECK_S)  # (woken by a turn given back, or polls give_up)
                if give_up() or (deadline is not None and time.monotonic() >= deadline):
                    return False
        finally:
            with self._changed:
                self._line.remove(me)
                self._changed.notify_all()  # (leaving the line may let the next one through)

    def give_back(self, requester: Requester) -> None:
        with self._changed:
            self._reading[requester] -= 1
            self._changed.notify_all()

    def count(self, requester: Requester) -> tuple[int, int]:
        """How many of `requester`'s files are being read, and how many wait in line."""
        with self._changed:
            return self._reading[requester], sum(1 for w in self._line if w.requester is requester)

    def _next_up(self, me: _InLine) -> bool:
        """Whether `me` goes now: a reader is free for it once those ahead that can go have gone."""
        reading = Counter(self._reading)
        free = self.total - sum(reading.values())
        for waiting in self._line:
            if free <= 0:
                return False
            if reading[waiting.requester] >= self.shares.get(waiting.requester, self.total):
                if waiting is me:
                    return False
                continue  # (its requester's share is taken: it does not hold up those behind it)
            if waiting is me:
                return True
            reading[waiting.requester] += 1
            free -= 1
        return False


# the API at most one reader fewer than there are: a client sending slow files cannot take them all
turns = Turns(MAX_READERS, {Requester.API: MAX_READERS - 1, Requester.LOCAL: MAX_READERS})


class ReadersBusy(ReaderFailed):
    """No turn came within a read's `turn_wait_s`: every reader its requester may use stayed busy."""


def busy_sentence(name: str, requester: Requester, waited: float) -> str:
    share = turns.shares.get(requester, turns.total)
    files = f"{share} file{'s' if share != 1 else ''}"
    return (
        f"{name} was not read: Ember reads at most {files} at once for API requests, and other files kept "
        f"{'it' if share == 1 else 'them'} busy for {waited:g} second{'s' if waited != 1 else ''}."
    )
