"""What a turn's plan for its attachments is (the values): each file's mode (whole or retrieval), the
tokens it takes, the passages used of how many, and the sources an answer was given. The store keeps
them with an answer; planning.py decides them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WHOLE = "whole"
RETRIEVAL = "retrieval"


@dataclass(frozen=True)
class PlannedAttachment:
    name: str
    kind: str
    tokens: int  # what it takes in the prompt this turn
    mode: str  # "whole" or "retrieval"
    used: int  # passages in the prompt
    total: int  # passages in the file
    attachment_id: int = 0
    whole_tokens: int = 0  # what it would take whole (0: not known, a plan recorded before this was kept)

    @property
    def crowded_out(self) -> bool:
        """Retrieved because the other files and the conversation left no room, not because it is too
        long: a short file with none of its passages in the prompt."""
        return self.mode == RETRIEVAL and self.used == 0

    def describe(self) -> str:
        if self.mode == WHOLE:
            return f"read whole ({self.tokens:,} tokens)"
        if self.crowded_out and self.total == 1:
            return "no room left in the context: not used"
        if self.crowded_out:
            return f"no room left in the context: none of its {self.total:,} passages used"
        return f"too long to read whole: {self.used:,} of {self.total:,} passages used"


@dataclass(frozen=True)
class Source:
    """A passage an answer was given: which file, which PDF page, which chunk (0-based), its text."""

    attachment_id: int
    name: str
    page: int | None
    chunk: int
    text: str


@dataclass
class TurnPlan:
    items: list[PlannedAttachment]
    sources: list[Source]
    prompt_text: str
    blocks: dict[int, str] = field(default_factory=dict)  # attachment id → its block in the prompt

    @property
    def retrieval(self) -> bool:
        return any(item.mode == RETRIEVAL for item in self.items)

    def report(self) -> list[dict[str, Any]]:
        """Per attachment: name, kind, tokens, mode; for retrieval passages used of total and the sources
        (file, page, chunk). What the CLI's --json and the API's `ember.attachments` say."""
        out: list[dict[str, Any]] = []
        for item in self.items:
            entry: dict[str, Any] = {"name": item.name, "kind": item.kind, "tokens": item.tokens, "mode": item.mode}
            if item.mode == RETRIEVAL:
                entry["used"], entry["total"] = item.used, item.total
                entry["sources"] = [
                    {"file": s.name, "page": s.page, "chunk": s.chunk}
                    for s in self.sources
                    if s.attachment_id == item.attachment_id
                ]
            out.append(entry)
        return out
