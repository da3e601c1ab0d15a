"""Word error rate: (substitutions + deletions + insertions) / words of the reference, over words
compared without case and punctuation ("Noon." is "noon"; "don't" stays one word)."""

from __future__ import annotations

import re

_WORD = re.compile(r"[\w']+")


def words(text: str) -> list[str]:
    return [w.strip("'") for w in _WORD.findall(text.lower()) if w.strip("'")]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """The edit distance between the two texts' words over the reference's word count (an empty
    reference: 0.0 for an empty hypothesis, else 1.0)."""
    ref, hyp = words(reference), words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = list(range(len(hyp) + 1))  # the distances from ref[:i] to each hyp[:j], row by row
    for i, r in enumerate(ref, 1):
        current = [i]
        for j, h in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1] / len(ref)
