"""A long, deterministic user message, for the tests that need a long prompt."""

from __future__ import annotations

WORDS = "river stone lantern orchard copper meadow harbor violet canyon ember willow falcon".split()  # noqa: SIM905


def text(words: int, seed: int = 0) -> str:
    """A long, deterministic user message (about 1.3 tokens a word)."""
    out = [WORDS[(i * 7 + seed * 5 + i // 11) % len(WORDS)] for i in range(words)]
    return "Remember this list and answer briefly: " + " ".join(out) + ". What was the third word?"
