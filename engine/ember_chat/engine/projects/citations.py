"""A project answer's knowledge and its citations: the block of numbered passages added to the question
(`knowledge_block`), the [n] markers an answer used (`cited`), and the sources an answer carries
(`ProjectSource`: recorded with the answer, the API's `ember.sources`, the CLI's JSON `sources`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import PurePath
from typing import Protocol

from ember_chat.engine.inference.events import FilePassage

CITE_INSTRUCTION = (
    "Answer from these passages where they hold the answer, and cite each passage you use with its "
    "number in square brackets, like [1]."
)
_MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")  # [2] and [1, 3]; not [1.5] or [12345]


class Retrieved(FilePassage, Protocol):
    """What a source is made from: a retrieval hit (projects/retrieval.py `Hit`), a passage with its id."""

    @property
    def passage_id(self) -> int: ...


@dataclass(frozen=True)
class ProjectSource:
    """Passage `n` of an answer's knowledge block: where it comes from and what it says."""

    n: int  # its number in the block, the [n] an answer cites it with
    file_path: str
    page: int | None  # 1-based PDF page, None for a file without pages
    seq: int  # the passage's position in its file
    text: str
    passage_id: int

    @property
    def file_name(self) -> str:
        return PurePath(self.file_path).name

    def label(self) -> str:
        """'report.pdf, p. 3' or 'notes.md'."""
        return f"{self.file_name}, p. {self.page}" if self.page is not None else self.file_name

    def as_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ProjectSource:
        page = data.get("page")
        return cls(
            int(str(data["n"])), str(data["file_path"]), None if page is None else int(str(page)),
            int(str(data["seq"])), str(data["text"]), int(str(data["passage_id"])),
        )  # fmt: skip


def sources(hits: Sequence[Retrieved]) -> list[ProjectSource]:
    """The hits as numbered sources, 1 first, in their order."""
    return [ProjectSource(n, h.file_path, h.page, h.seq, h.text, h.passage_id) for n, h in enumerate(hits, start=1)]


def knowledge_block(hits: Sequence[Retrieved]) -> str:
    """The passages numbered for the prompt ("[1] report.pdf, p. 3: …"), then the line asking for [n]
    citations; "" when there are none."""
    if not hits:
        return ""
    lines = ["Passages from the project's files:"]
    for source in sources(hits):
        text = " ".join(source.text.split())  # (one line each: a passage's own [n] or blank lines stay inside it)
        lines.append(f"[{source.n}] {source.label()}: {text}")
    lines.append(CITE_INSTRUCTION)
    return "\n\n".join(lines)


def cited(answer_text: str, count: int | None = None) -> set[int]:
    """The passage numbers an answer cites with [n] (or [n, m]) markers; with `count` (the block's
    passages), only 1..count."""
    numbers = {int(n) for group in _MARKER.findall(answer_text) for n in group.split(",")}
    return {n for n in numbers if n >= 1 and (count is None or n <= count)}


__all__ = ["CITE_INSTRUCTION", "ProjectSource", "cited", "knowledge_block", "sources"]
