"""A chat's title: a new chat's from its first message, the words of its start, cut at a word with "…" when
the message is longer (a title cut mid-word read as a typo in the list and in the window's notices); and
any title as it is kept and shown (`clean_title`): without the invisible characters that make it read
otherwise than it is — a right-to-left override (U+202E) shows "a\u202egpj.exe" as "aexe.jpg" in the chat
list, the window's title, a search hit or the Trash. A title set by a rename, an import or its first
message is kept clean; one stored before is cleaned as it is read (records.py)."""

from __future__ import annotations

import unicodedata

TITLE_CHARS = 48

# characters that show nothing and move nothing: format characters (bidi embeddings, overrides and isolates
# U+202A-202E, U+2066-2069, marks U+200E/U+200F, zero-width spaces and joiners, U+FEFF…) and lone
# surrogates, dropped; marks alone, the Hangul fillers and spaces are not enough for a name either
_DROPPED = frozenset({"Cf", "Cs"})
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Mn", "Me", "Zs", "Zl", "Zp"})
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")  # letters (by category) that show as blank
_JOINERS = frozenset("\u200c\u200d")  # ZWNJ and ZWJ: how Persian and Indic words are spelt, emoji sequences
_BLACK_FLAG = "\U0001f3f4"  # the tag characters after it spell a subdivision's flag (Scotland, Wales)
UNTITLED = "Chat"  # a title in which nothing showed but the characters dropped


def shows(ch: str) -> bool:
    """Whether `ch` shows something (not a control, format character, mark alone, space or blank letter)."""
    return unicodedata.category(ch) not in _INVISIBLE and ch not in _FILLERS


def _joins(ch: str) -> bool:
    """Whether a joiner beside `ch` may join it: a character that shows, or a mark on one (a virama in
    Sinhala's ශ්‍රී, the emoji presentation selector U+FE0F in ❤️‍🔥), not a space, control or format character."""
    return unicodedata.category(ch) not in _DROPPED | {"Cc", "Zs", "Zl", "Zp"} and ch not in _FILLERS


def without_format_characters(title: str) -> str:
    """`title` without its format characters and lone surrogates (_DROPPED), but those that spell it: a
    joiner (ZWNJ, ZWJ) between two characters that show or marks on them (`_joins`), one of them not
    ASCII (between Latin letters it joins nothing; elsewhere it hides nothing: dropped), the tag
    characters of a flag. Bidi controls,
    zero-width spaces, U+FEFF and the like never stay."""
    if title.isascii():
        return title  # (no format character is ASCII: the chat list reads thousands of titles at once)
    out: list[str] = []
    for i, ch in enumerate(title):
        if unicodedata.category(ch) not in _DROPPED:
            out.append(ch)
        elif ch in _JOINERS:
            after = title[i + 1] if i + 1 < len(title) else ""
            if out and after and _joins(out[-1]) and _joins(after) and not (out[-1] + after).isascii():
                out.append(ch)
        elif "\U000e0020" <= ch <= "\U000e007f" and out and (out[-1] == _BLACK_FLAG or out[-1] >= "\U000e0020"):
            out.append(ch)  # (a tag after the black flag, or after a tag kept)
    return "".join(out)


def clean_title(title: str) -> str:
    """`title` as it is kept and shown: `without_format_characters`; UNTITLED where only what was dropped
    showed anything (a title of a lone U+202E), the title as it was where nothing was dropped."""
    kept = without_format_characters(title)
    if kept == title or any(shows(ch) for ch in kept):
        return kept
    return UNTITLED


def clean_name(name: str) -> str:
    """A folder's or project's name as it is kept and compared: without format characters
    (`without_format_characters`: "Research\u200b" or a name with a bidi override would show exactly as
    another), any run of white space one space; "" where nothing is left."""
    return " ".join(without_format_characters(name).split())


def stored_name(name: str) -> str:
    """A folder's or project's name as read back: cleaned as `clean_name` keeps a name now (one saved
    before that was kept as typed, a bidi override included), or as stored where nothing would be left."""
    return clean_name(name) or name


def title_from_message(text: str, limit: int = TITLE_CHARS) -> str:
    """The message's words on one line, at most `limit` characters ("" for a message of no words), without
    format characters (`clean_title`)."""
    words = " ".join(without_format_characters(text).split())
    if len(words) <= limit:
        return words
    cut = words.rfind(" ", 0, limit)
    start = words[:cut] if cut > limit // 2 else words[: limit - 1]  # (one long word: cut inside it)
    return start.rstrip(" ,;:.-") + "…"
