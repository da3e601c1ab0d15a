"""Comparisons kept with their chat (schema 5): one prompt answered by 2–4 models side by side.

`comparisons` holds the chat, the prompt (the user message the models answered) and the settings the
run used (JSON: seed, sampling params, system prompt); `comparison_answers` one row per model, in
column order: its text, its metrics (JSON), the error that ended it, and the message it became when the
user kept it ("Keep this one" adds a sibling assistant message; deleting that message unkeeps it)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ember_chat.engine.errors import StoreError
from ember_chat.engine.storage.records import json_object

MIN_MODELS = 2
MAX_MODELS = 4


@dataclass(frozen=True)
class ComparisonAnswer:
    """One model's answer in a comparison (its column)."""

    id: int
    position: int
    model: str
    content: str
    metrics: dict[str, Any] | None
    error: str | None
    kept_message_id: int | None


@dataclass(frozen=True)
class Comparison:
    """A prompt answered by several models with the same settings."""

    id: int
    conversation_id: int
    prompt_id: int | None
    settings: dict[str, Any]
    created_at: float
    answers: tuple[ComparisonAnswer, ...]


class Comparisons:
    """The comparison tables of the chat database, on the store's connection and lock."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, clock: Callable[[], float]) -> None:
        self._db = db
        self._lock = lock
        self._clock = clock

    def create(
        self, conversation_id: int, prompt_id: int | None, models: Sequence[str], settings: dict[str, Any]
    ) -> Comparison:
        """A new comparison with one empty answer per model, in the given order."""
        if not MIN_MODELS <= len(models) <= MAX_MODELS:
            raise StoreError(f"A comparison runs two to four models; {len(models)} were given.")
        with self._lock:
            self._db.execute("BEGIN")
            try:
                cur = self._db.execute(
                    "INSERT INTO comparisons (conversation_id, prompt_id, settings, created_at) VALUES (?, ?, ?, ?)",
                    (conversation_id, prompt_id, json.dumps(settings, ensure_ascii=False), self._clock()),
                )
                comparison_id = int(cur.lastrowid or 0)
                self._db.executemany(
                    "INSERT INTO comparison_answers (comparison_id, position, model) VALUES (?, ?, ?)",
                    [(comparison_id, i, str(m)) for i, m in enumerate(models)],
                )
                self._db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                self._db.execute("ROLLBACK")
                raise StoreError(f"The comparison could not be saved: {exc}.") from exc
            return self.get(comparison_id)

    def set_answer(
        self, answer_id: int, content: str, metrics: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        """A model's answer as it ended (its text, its metrics, or the error that stopped it)."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE comparison_answers SET content = ?, metrics = ?, error = ? WHERE id = ?",
                (content, None if metrics is None else json.dumps(metrics, ensure_ascii=False), error, answer_id),
            )
        if cur.rowcount == 0:
            raise StoreError(f"Comparison answer {answer_id} does not exist.")

    def keep(self, answer_id: int, message_id: int) -> None:
        """The answer was kept in the chat as `message_id`."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE comparison_answers SET kept_message_id = ? WHERE id = ?", (message_id, answer_id)
            )
        if cur.rowcount == 0:
            raise StoreError(f"Comparison answer {answer_id} does not exist.")

    def get(self, comparison_id: int) -> Comparison:
        found = self._read("c.id = ?", (comparison_id,))
        if not found:
            raise StoreError(f"Comparison {comparison_id} does not exist.")
        return found[0]

    def of_conversation(self, conversation_id: int) -> list[Comparison]:
        """The chat's comparisons, oldest first."""
        return self._read("c.conversation_id = ?", (conversation_id,))

    def of_prompt(self, prompt_id: int) -> list[Comparison]:
        """The comparisons run on one prompt (a user message), oldest first."""
        return self._read("c.prompt_id = ?", (prompt_id,))

    def _read(self, where: str, args: tuple[Any, ...]) -> list[Comparison]:
        with self._lock:
            heads = self._db.execute(
                f"SELECT id, conversation_id, prompt_id, settings, created_at FROM comparisons c WHERE {where}"
                " ORDER BY c.created_at, c.id",
                args,
            ).fetchall()
            rows = self._db.execute(
                "SELECT a.* FROM comparison_answers a JOIN comparisons c ON c.id = a.comparison_id"
                f" WHERE {where} ORDER BY a.comparison_id, a.position, a.id",
                args,
            ).fetchall()
        answers: dict[int, list[ComparisonAnswer]] = {}
        for r in rows:
            answers.setdefault(r["comparison_id"], []).append(
                ComparisonAnswer(
                    r["id"],
                    r["position"],
                    r["model"],
                    r["content"] or "",
                    json_object(r["metrics"]),
                    r["error"],
                    r["kept_message_id"],
                )
            )
        return [
            Comparison(
                h["id"],
                h["conversation_id"],
                h["prompt_id"],
                json_object(h["settings"]) or {},
                h["created_at"],
                tuple(answers.get(h["id"], ())),
            )
            for h in heads
        ]
