"""A project's knowledge source as the indexer takes it (projects/indexer.py's `KnowledgeRoot`: an id and a path),
for tests that index folders without a chat database."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Root:
    id: int
    path: str
