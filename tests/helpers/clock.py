"""The one ticking clock of the store tests: each reading one second after the last, from `start`, so
rows made one after another have distinct times in the order they were made."""

from __future__ import annotations


class Clock:
    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now
