"""A message as the transcript shows it: where it starts in the document and what it looked like when
written (the view keeps one per message shown, in order; its parts read them)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QTextCursor


@dataclass
class Shown:
    message_id: int
    role: str
    start: QTextCursor  # at the first character of the message's header; moves with edits above it
    key: tuple | None  # None while it streams or renders
    # an answer: right after its text, before what is written below it (tool cards, the Read line and
    # Sources, the metrics line): where a Continue streams in place
    body_end: QTextCursor | None = None
