"""Background work in the transcript, a slice of a few milliseconds at a time (the event loop runs
between slices): a finished answer's Markdown rendering first, then the older messages of a chat just
opened, written above the shown ones while what is on screen stays still.

`TranscriptSlices` is a part of TranscriptView (`view.slices`; it needs of it only the text browser
it is) and owns the slicer and the pending work, two iterators of steps that the view makes (it owns
the list of shown messages). Each step runs in its own edit block (`edit_block`), so the document
lays itself out once per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtGui import QTextCursor, QTextDocument
from PySide6.QtWidgets import QTextBrowser

from ember_chat.app.transcript.shown import Shown

if TYPE_CHECKING:
    from ember_chat.engine.storage.conversations import Message

SLICE_S = 0.010  # one slice of background work; the event loop runs between slices
EAGER_CHARS = 12_000  # opening a chat writes about this much (a few screenfuls) before showing it


def eager_start(messages: list[Message]) -> int:
    """Opening a chat: the index of the first message written at once (the newest few screenfuls); the
    ones before it are left to the background."""
    chars, split = 0, len(messages)
    while split > 0 and chars < EAGER_CHARS:
        split -= 1
        chars += len(messages[split].content) + 200
    return split


@contextmanager
def edit_block(document: QTextDocument) -> Iterator[None]:
    """One edit block: the document lays itself out once at its end, not after every insertion (an
    insertion above the text on screen costs a few ms of layout each)."""
    c = QTextCursor(document)
    c.beginEditBlock()
    try:
        yield
    finally:
        c.endEditBlock()


def top_of(document: QTextDocument, shown: Shown | None) -> float:
    """Where a shown message starts (document coordinates; 0 for none)."""
    if shown is None:
        return 0.0
    return document.documentLayout().blockBoundingRect(shown.start.block()).top()


class TranscriptSlices:
    """The transcript's background work: `final` (a finished answer's rendering) and `backfill` (the
    older messages), each an iterator of steps, run a slice at a time."""

    def __init__(self, view: QTextBrowser, first_shown: Callable[[], Shown | None]) -> None:
        self.view = view
        self._first_shown = first_shown  # the message the view keeps still while older ones are written
        self.final: Iterator[None] | None = None  # a finished answer's rendering, step by step
        self.backfill: Iterator[None] | None = None
        self._slicer = QTimer(view)
        self._slicer.setSingleShot(True)
        self._slicer.setInterval(0)
        self._slicer.timeout.connect(self._run_slice)

    def render(self, steps: Iterator[None]) -> None:
        """Run a finished answer's rendering in the background (before any backfill)."""
        self.final = steps
        self._slicer.start()

    def fill(self, steps: Iterator[None]) -> None:
        """Write the older messages in the background."""
        self.backfill = steps
        self._slicer.start()

    def drop(self) -> None:
        """Forget the pending work (the transcript was emptied, or the window closes: the chat store the
        steps read is closed after it)."""
        self.backfill = None
        self.final = None
        self._slicer.stop()

    def _step(self, steps: Iterator[None]) -> bool:
        """One step of background work in its own edit block; False when there was none left."""
        with edit_block(self.view.document()):
            return next(steps, StopIteration) is not StopIteration

    def _run_slice(self) -> None:
        """Background work for one slice: a finished answer's rendering first, then older messages."""
        deadline = time.perf_counter() + SLICE_S
        bar = self.view.verticalScrollBar()
        while time.perf_counter() < deadline:
            if self.final is not None:
                if not self._step(self.final):
                    self.final = None
                continue
            if self.backfill is None:
                break
            at_end = bar.value() >= bar.maximum() - 4
            anchor = self._first_shown()
            before = top_of(self.view.document(), anchor)
            done = not self._step(self.backfill)
            if done:
                self.backfill = None
            if at_end:
                bar.setValue(bar.maximum())
            elif anchor is not None:
                bar.setValue(bar.value() + round(top_of(self.view.document(), anchor) - before))
        if self.final is not None or self.backfill is not None:
            self._slicer.start()

    def finish(self, final_only: bool = False) -> None:
        """Complete the pending work now (only the answer's rendering with `final_only`)."""
        with edit_block(self.view.document()):
            while self.final is not None:
                if not self._step(self.final):
                    self.final = None
            while not final_only and self.backfill is not None:
                if not self._step(self.backfill):
                    self.backfill = None
