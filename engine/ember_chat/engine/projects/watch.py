"""Watching a project's knowledge sources for new, changed and deleted files, by polling: every
`interval_s` seconds a stat-only walk (scan.py: no file opened) is compared with the last one, and
`on_change(changes)` is called when they differ, so the app or the CLI runs the indexer again
(indexer.py: incremental). No file-system notification library: polling works the same on every
system and on network and removable drives, and costs a `stat` per file.

A source that is not there for a while (a drive unplugged) or a folder that cannot be listed keeps its
last known files: its files are not reported deleted, nor added again when it comes back as it was; a
source's own path, or a folder in it, that can no longer be listed (`away`: not there, permission
denied) and that can be again (`back`) is reported, so the indexer is run again and says which cannot
be read (the Knowledge tab shows it), then walks it again. One thread, started by `start()` and
joined by `stop()`; an error in a poll or in `on_change` is logged and the watching goes on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember_chat.engine.attachments.kinds import DEFAULT_LIMITS, Limits
from ember_chat.engine.projects.indexer import KnowledgeRoot
from ember_chat.engine.projects.scan import FoundFile, scan, under

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 5.0

Snapshot = dict[str, tuple[int, int]]  # path -> (size, mtime_ns)


@dataclass(frozen=True)
class Changes:
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    away: tuple[str, ...] = ()  # sources' paths or folders that could not be listed since the last poll (files kept)
    back: tuple[str, ...] = ()  # ... listed again

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.away or self.back)


def snapshot(
    sources: Sequence[KnowledgeRoot], limits: Limits = DEFAULT_LIMITS, last: Snapshot | None = None
) -> tuple[Snapshot, frozenset[str]]:
    """Each file of the sources with its size and mtime_ns, and the paths that could not be listed (a
    source's own, not there; a folder in it, permission denied); what a source or folder that cannot be
    walked now held in `last` is carried over."""
    now: Snapshot = {}
    unlisted: list[str] = []
    away: set[str] = set()
    for source in sources:
        for item in scan(source.path, limits):
            if isinstance(item, FoundFile):
                now.setdefault(str(item.path), (item.size, item.mtime_ns))
            elif item.unlisted:
                unlisted.append(str(item.path))
                away.add(str(item.path))
    if last and unlisted:
        for path, stamp in last.items():
            if path not in now and under(path, unlisted):
                now[path] = stamp
    return now, frozenset(away)


def compare(
    before: Snapshot, after: Snapshot, away_before: frozenset[str] = frozenset(), away: frozenset[str] = frozenset()
) -> Changes:
    return Changes(
        added=tuple(sorted(p for p in after if p not in before)),
        changed=tuple(sorted(p for p, stamp in after.items() if p in before and before[p] != stamp)),
        removed=tuple(sorted(p for p in before if p not in after)),
        away=tuple(sorted(away - away_before)),
        back=tuple(sorted(away_before - away)),
    )


class KnowledgeWatcher:
    """Polls `sources()` (asked at each poll: a source added to the project is watched from the next
    one) and calls `on_change` on its own thread when files were added, changed or removed."""

    def __init__(
        self,
        sources: Callable[[], Sequence[KnowledgeRoot]],
        on_change: Callable[[Changes], None],
        interval_s: float = DEFAULT_INTERVAL_S,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._sources = sources
        self._on_change = on_change
        self.interval_s = interval_s
        self._limits = limits
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: Snapshot = {}
        self._away: frozenset[str] = frozenset()  # the paths not listed at the last poll
        self.ready = threading.Event()  # set once the first walk is taken: changes after it are reported

    def start(self) -> None:
        """The thread takes the first walk (files already there are not reported: the indexer is run
        at open anyway; `ready` is set then), and polls every `interval_s` from there."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._poll, name="ember-knowledge-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _poll(self) -> None:
        self._last, self._away = self._walk() or ({}, frozenset())
        self.ready.set()
        while not self._stop.wait(self.interval_s):
            walked = self._walk()
            if walked is None:
                continue
            now, away = walked
            changes = compare(self._last, now, self._away, away)
            self._last, self._away = now, away
            if changes:
                try:
                    self._on_change(changes)
                except Exception:  # (the app's handler: a bug there must not end the watching)
                    log.exception("The knowledge watcher's handler failed")

    def _walk(self) -> tuple[Snapshot, frozenset[str]] | None:
        try:
            return snapshot(self._sources(), self._limits, self._last)
        except Exception:  # (the project's store closed under it, a source list that cannot be read)
            log.exception("The project's knowledge sources could not be walked")
            return None
