"""An assistant message saved while it streams, and what to say when a write fails."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from ember_chat.engine.storage.conversations import ConversationStore, Message


class StreamingMessage:
    """An assistant message saved while it streams: appended text is written at most once per
    `interval_s` (and at `finish`), so a crash loses at most that much."""

    def __init__(
        self,
        store: ConversationStore,
        conversation_id: int,
        parent_id: int | None,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        resume: Message | None = None,
    ) -> None:
        """`resume`: continue that (interrupted) message instead of starting a new one."""
        self._store = store
        self._clock = clock
        self._interval = interval_s
        self._parts: list[str] = [resume.content] if resume is not None else []
        self._dirty = False
        self.save_error: str | None = None  # why the last write failed; None once writes work again
        if resume is not None:
            self.message = resume
        else:
            self.message = store.add_message(conversation_id, "assistant", "", parent_id, complete=False)
        self._last_write = clock()

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def append(self, delta: str) -> None:
        if not delta:
            return
        self._parts.append(delta)
        self._dirty = True
        if self._clock() - self._last_write >= self._interval:
            self.flush()

    def flush(self) -> None:
        """Write what arrived. A write that fails (disk full, read-only folder) is not an error for the
        stream: the text stays here, `save_error` says why, and the next flush tries again."""
        if self._dirty:
            try:
                self._store.update_message(self.message.id, self.text)
            except (sqlite3.Error, OSError) as exc:
                self.save_error = describe_write_error(exc)
            else:
                self._dirty = False
                self.save_error = None
        self._last_write = self._clock()

    def finish(self, metrics: dict[str, Any] | None) -> bool:
        """Mark the answer complete with its metrics; False (and `save_error`) when it cannot be written
        yet — call it again later, nothing is lost meanwhile."""
        try:
            self._store.update_message(self.message.id, self.text, metrics=metrics, complete=True)
        except (sqlite3.Error, OSError) as exc:
            self.save_error = describe_write_error(exc)
            return False
        self._dirty = False
        self.save_error = None
        return True


def describe_write_error(exc: Exception) -> str:
    what = str(exc).lower()
    if "full" in what or getattr(exc, "errno", None) == 28:
        return "the disk is full"
    if "readonly" in what or "read-only" in what or "permission" in what:
        return "the data folder cannot be written"
    return str(exc)
