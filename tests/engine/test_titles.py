"""A new chat's title: its first message's words, cut at a word with "…" when longer than 48 characters."""

from __future__ import annotations

from ember_chat.engine.storage.titles import TITLE_CHARS, title_from_message


def test_a_short_message_is_its_own_title_on_one_line() -> None:
    assert title_from_message("  Say\nhi.  ") == "Say hi."
    assert title_from_message("\n \t") == ""


def test_a_long_message_is_cut_at_a_word_with_an_ellipsis() -> None:
    text = "Write a long story about a lighthouse keeper and the history of shipwrecks on the coast"
    title = title_from_message(text)
    assert title == "Write a long story about a lighthouse keeper…"
    assert len(title) <= TITLE_CHARS and text.startswith(title[:-1])


def test_one_long_word_is_cut_inside_it() -> None:
    title = title_from_message("x" * 100)
    assert title == "x" * (TITLE_CHARS - 1) + "…" and len(title) == TITLE_CHARS
