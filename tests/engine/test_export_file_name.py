"""The file name a chat's export proposes (every format, one rule): its title made safe for Windows,
macOS and Linux, without the "…" a shortened title ends with, of a bounded length."""

from __future__ import annotations

import pytest

from ember_chat.engine.storage.export import NAME_BYTES, export_file_name
from ember_chat.engine.storage.titles import title_from_message


def test_a_shortened_title_gives_its_words_without_the_ellipsis() -> None:
    title = title_from_message("In which year did the Tarvesh volcano last erupt, and what did it destroy?")
    assert title.endswith("…")
    assert export_file_name(title, "json") == f"{title.removesuffix('…')}.json"
    assert export_file_name(title, "md") == f"{title.removesuffix('…')}.md"
    assert export_file_name("Notes...", "md") == "Notes.md" and export_file_name("Notes. …", "md") == "Notes.md"


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ('a/b\\c:d*e?f"g<h>i|j', "a b c d e f g h i j.md"),
        ("tab\there\x00\x1f\x7fend", "tab here end.md"),
        ("  . hidden and trailing .  ", "hidden and trailing.md"),
        ("CON", "Chat CON.md"),
        ("nul.txt", "Chat nul.txt.md"),
        ("com1", "Chat com1.md"),
        ("Console", "Console.md"),
        ("???", "Chat.md"),
        ("…", "Chat.md"),
    ],
)
def test_what_file_systems_refuse_is_left_out(title: str, name: str) -> None:
    assert export_file_name(title, "md") == name


def test_the_name_is_bounded_in_characters_and_in_bytes() -> None:
    assert export_file_name("x" * 500, "json") == "x" * 80 + ".json"
    wide = export_file_name("🌋" * 80, "json")  # (4 bytes each: 320 bytes at 80 characters)
    stem = wide.removesuffix(".json")
    assert set(stem) == {"🌋"} and len(stem.encode("utf-8")) <= NAME_BYTES < len(("🌋" * 80).encode("utf-8"))
    assert export_file_name("a" * 79 + " b", "md") == "a" * 79 + ".md"  # (no space left at the cut)
