"""The project knowledge an answer was given, kept with it in the chat database (schema 7,
`answer_knowledge`): recorded when the answer is saved, read when its chat is shown again. The rows go
with their answer (a foreign key's cascade): a message deleted (its undo puts them back,
storage/message_delete.py) or a chat deleted for good, then swept out of the file (storage/privacy.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ember_chat.engine.inference.events import CitedPassage
from ember_chat.engine.projects.citations import ProjectSource
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.rows import batches, transaction


class AnswerKnowledge:
    """The answers' knowledge sources of one chat store, on its connection and lock."""

    def __init__(self, store: ConversationStore) -> None:
        self._db, self._lock = store.shared_connection()

    def record(self, answer_id: int, sources: Sequence[CitedPassage]) -> None:
        """Keep the passages `answer_id` was given (replacing any it had: an answer written again)."""
        with transaction(self._db, self._lock):
            self._db.execute("DELETE FROM answer_knowledge WHERE answer_id = ?", (answer_id,))
            self._db.executemany(
                "INSERT INTO answer_knowledge (answer_id, n, file_path, page, seq, passage_id, text)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(answer_id, s.n, s.file_path, s.page, s.seq, s.passage_id, s.text) for s in sources],
            )

    def sources_of(self, answer_id: int) -> list[ProjectSource]:
        """The passages the answer was given, by their number ([] for an answer without knowledge)."""
        return self.sources_of_answers([answer_id]).get(answer_id, [])

    def sources_of_answers(self, answer_ids: Iterable[int]) -> dict[int, list[ProjectSource]]:
        """Those of the answers that have some, one query per batch (a long chat shown)."""
        out: dict[int, list[ProjectSource]] = {}
        for batch in batches(list(answer_ids)):
            marks = ",".join("?" * len(batch))
            with self._lock:
                rows = self._db.execute(
                    "SELECT answer_id, n, file_path, page, seq, text, passage_id FROM answer_knowledge"
                    f" WHERE answer_id IN ({marks}) ORDER BY answer_id, n",
                    batch,
                ).fetchall()
            for answer_id, *fields in rows:
                out.setdefault(answer_id, []).append(ProjectSource(*fields))
        return out


__all__ = ["AnswerKnowledge"]
