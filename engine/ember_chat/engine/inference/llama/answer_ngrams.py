"""The n-grams of one loaded model's recent answers, a second place for the n-gram drafter to look
(speculative.py): llama.cpp's ngram-cache idea, kept small.

An answer often repeats an earlier one that is not in its own prompt: a regenerated answer (the same
prompt, at temperature 0 the same text), the same question asked in another chat or by another API
client, boilerplate the model writes in every answer. The drafter looks its last tokens up in the
request's own history first (the prompt and the answer so far: what the answer copies); where that has
no continuation for an n-gram, in this table.

The table holds the last MAX_ANSWERS answers, indexed by their NGRAM_MIN..NGRAM_MAX-token n-grams (the
most recent occurrence of each wins), at most MAX_ENTRIES n-grams in all: the oldest answer is dropped
first, with its n-grams that no later answer shares. Adding an answer costs a few dictionary writes per
token (the engine thread adds each answer once it has ended); a look-up, one dictionary read.

One table per client of the engine (ClientAnswers: the window, the API server's clients, …): a request
drafts only from its own client's answers. A table shared by all would be a side channel: an API answer
reports its accepted drafts, so a client could have the model write a guess and read from that count
whether another client's recent answers held it.

In memory only, for one loaded model: never written to disk, dropped when the model is unloaded, and
emptied when chats are deleted for good and when a benchmark resets the caches (local/cache.py)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence

# The answers kept, and the n-grams indexed in all (about 250 bytes each: ~4 MB at most).
MAX_ANSWERS = 16
MAX_ENTRIES = 1 << 14
# The n-grams indexed: the longest the drafter looks up (speculative.NGRAM_MAX, which imports this
# module); not one token: one token of another answer says little about what this answer's next tokens
# are (and the request's own history nearly always has a 1-token match, looked up first).
NGRAM_MAX = 3
NGRAM_MIN = 2
# The clients with a table at once (the window, the API server's, a benchmark's or test's direct calls,
# one more): the least recently used one's is dropped past it (~4 MB each at most).
MAX_CLIENTS = 4


class AnswerNgrams:
    """Recent answers' n-grams → where their most recent occurrence was followed. Used by one thread."""

    def __init__(self, max_answers: int = MAX_ANSWERS, max_entries: int = MAX_ENTRIES) -> None:
        self.max_answers = max(1, max_answers)
        self.max_entries = max(1, max_entries)
        self._answers: dict[int, list[int]] = {}  # serial → the answer's tokens, oldest first
        self._index: dict[tuple[int, ...], tuple[int, int]] = {}  # n-gram → (serial, position after it)
        self._serial = 0

    @property
    def answers(self) -> int:
        return len(self._answers)

    @property
    def entries(self) -> int:
        return len(self._index)

    def add(self, tokens: Sequence[int]) -> None:
        """An answer's tokens (its start, where it alone would pass MAX_ENTRIES); then the oldest answers
        dropped until both bounds hold."""
        per_token = NGRAM_MAX - NGRAM_MIN + 1
        answer = list(tokens[: self.max_entries // per_token + 1])
        if len(answer) < NGRAM_MIN + 1:  # (no n-gram with a token after it)
            return
        serial = self._serial
        self._serial += 1
        self._answers[serial] = answer
        index = self._index
        for n in range(NGRAM_MIN, NGRAM_MAX + 1):  # (later occurrences overwrite earlier ones)
            after = ((serial, start + n) for start in range(len(answer) - n))
            index.update(zip(_ngrams(answer, n), after, strict=True))
        while len(self._answers) > 1 and (len(self._answers) > self.max_answers or len(index) > self.max_entries):
            self._drop_oldest()

    def follow(self, ngram: tuple[int, ...], size: int) -> list[int]:
        """Up to `size` tokens that followed the most recent occurrence of `ngram` in an answer; [] when
        none did (or its length is not indexed)."""
        found = self._index.get(ngram)
        if found is None or size <= 0:
            return []
        serial, after = found
        return self._answers[serial][after : after + size]

    def clear(self) -> None:
        self._answers.clear()
        self._index.clear()

    def _drop_oldest(self) -> None:
        serial = next(iter(self._answers))
        answer = self._answers.pop(serial)
        index = self._index
        for n in range(NGRAM_MIN, NGRAM_MAX + 1):
            for key in _ngrams(answer, n):
                found = index.get(key)
                if found is not None and found[0] == serial:  # (not a later answer's occurrence)
                    del index[key]


class ClientAnswers:
    """Each client's AnswerNgrams (made at its first request; the least recently used client's dropped
    beyond `max_clients`). A client is the engine service's name for where a request came from
    (GenerationRequest.client: "window", "api", …; "" for a caller of the runtime that names none). Used
    by one thread."""

    def __init__(self, max_clients: int = MAX_CLIENTS) -> None:
        self.max_clients = max(1, max_clients)
        self._tables: OrderedDict[str, AnswerNgrams] = OrderedDict()  # least recently used first

    @property
    def clients(self) -> list[str]:
        return list(self._tables)

    def of(self, client: str) -> AnswerNgrams:
        """The table `client`'s requests draft from and add their answers to."""
        table = self._tables.get(client)
        if table is None:
            table = self._tables[client] = AnswerNgrams()
            while len(self._tables) > self.max_clients:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(client)
        return table

    def clear(self) -> None:
        """Every client's answers forgotten (chats deleted for good, a benchmark's reset)."""
        self._tables.clear()


def _ngrams(answer: list[int], n: int) -> Iterator[tuple[int, ...]]:
    """The answer's n-grams that a token follows, in order (the one starting at `start` is followed by
    answer[start + n])."""
    return zip(*(answer[i : len(answer) - n + i] for i in range(n)), strict=True)
