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


SCOTLAND = "\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"  # (the tags after the black flag)


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("invoice\u202egpj.exe", "invoicegpj.exe.md"),  # (a right-to-left override: shown 'invoiceexe.jpg')
        ("a\u202ab\u202bc\u202cd\u202de", "abcde.md"),  # (embeddings and overrides, U+202A-202E)
        ("a\u2066b\u2067c\u2068d\u2069e", "abcde.md"),  # (isolates, U+2066-2069)
        ("zero\u200bwidth\u200c\u200dname\ufeff", "zerowidthname.md"),
        ("x\x85y\x9bz\x80", "x y z.md"),  # (C1 controls: as other controls, a space)
        ("\u200b", "Chat.md"),
        ("\u200b\u200b.\u202e", "Chat.md"),
        ("\u3164\u200b \u0301", "Chat.md"),  # (a Hangul filler, a zero-width space, a mark alone: nothing shows)
        ("\u2800", "Chat.md"),
        ("C\u200bON", "Chat CON.md"),  # (a reserved name hidden by an invisible character)
        ("COM0", "Chat COM0.md"),
        ("lpt0.txt", "Chat lpt0.txt.md"),
        ("COM¹", "Chat COM¹.md"),
        ("com²", "Chat com².md"),
        ("LPT³.json", "Chat LPT³.json.md"),
        ("CONIN$", "Chat CONIN$.md"),
        ("conout$.log", "Chat conout$.log.md"),
        ("COM10", "COM10.md"),
        ("CONIN", "CONIN.md"),
        ("Café\u0301 notes", "Café\u0301 notes.md"),  # (a mark on a letter stays)
        # joiners that spell what shows stay: an emoji sequence, a Persian word, a flag's tags
        ("👨\u200d👩\u200d👧 family", "👨\u200d👩\u200d👧 family.md"),
        ("می\u200cخواهم", "می\u200cخواهم.md"),
        (f"🏴{SCOTLAND} Scotland", f"🏴{SCOTLAND} Scotland.md"),
        ("\u200dx\u200c", "x.md"),  # (at either end: nothing joined)
        ("x\U000e0067y", "xy.md"),  # (a tag after a letter: dropped)
    ],
)
def test_invisible_characters_and_every_name_windows_reserves_are_left_out(title: str, name: str) -> None:
    assert export_file_name(title, "md") == name
