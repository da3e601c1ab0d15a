"""A project answer's knowledge and its citations: the block of numbered passages added to the question
(`knowledge_block`), the [n] markers an answer used (`cited`), the sources whose words an answer uses
whether it cites them or not (`quoted`: small models seldom write markers), and the sources an answer
carries (`ProjectSource`: recorded with the answer, the API's `ember.sources`, the CLI's JSON `sources`)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import PurePath
from typing import Protocol

from ember_chat.engine.core.reasoning import split_thinking
from ember_chat.engine.inference.events import CitedPassage, FilePassage

CITE_INSTRUCTION = (
    "Answer from these passages where they hold the answer, and cite each passage you use with its "
    "number in square brackets, like [1]."
)
MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")  # [2] and [1, 3]; not [1.5] or [12345]
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # kana and ideographs: written without spaces
# a word: letters and digits with inner apostrophes; a CJK character alone
_WORD = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+(?:['’][^\W{_CJK}]+)*")
# words that say nothing of where an answer comes from (with the question's own words): English, French,
# German, Spanish, Italian and Portuguese small words, and the commonest CJK characters of that kind
_SMALL_WORDS = (
    "a an the and or but if of to in on at by for with from as is are was were be been being it its this that "
    "these those there here he she they them his her their we you your i my me our not no yes do does did has "
    "have had can could will would should may might so than then which who whom what when where why how "
    "one other others also more most some any all each such only just very about into over after before "
    "between through up out like well use used make made get much many few both either even still however "
    "because while important note end day way thing things case fact point part lot kind sort "
    "de la le les des du un une et en est que qui pour dans par sur au aux ce ces il elle ne pas se sa son "
    "der die das und ist ein eine zu den von mit im nicht auf für es sich dem des sie er wie auch "
    "el los las del y que una por con es para se lo al su "
    "il lo gli di che per è non della delle dei "
    "o os as do da dos das em para com não um uma "
    "的 是 了 在 和 有 我 你 他 这 那 不 也 就 都 而 与 之 の は が を に で と た し て も な い"
)
_SMALL = frozenset(_SMALL_WORDS.split())
QUOTE_SPAN = 4  # a run of at most this many of the answer's words in a row, found in a passage, with
QUOTE_OWN = 2  # at least this many of its own words ("Captain Marmalade", "flowing to Lisbon", "1 o'clock")


class Retrieved(FilePassage, Protocol):
    """What a source is made from: a retrieval hit (projects/retrieval.py `Hit`), a passage with its id."""

    @property
    def passage_id(self) -> int: ...


@dataclass(frozen=True)
class ProjectSource:
    """Passage `n` of an answer's knowledge block: where it comes from and what it says."""

    n: int  # its number in the block, the [n] an answer cites it with
    file_path: str
    page: int | None  # 1-based PDF page, None for a file without pages
    seq: int  # the passage's position in its file
    text: str
    passage_id: int

    @property
    def file_name(self) -> str:
        return PurePath(self.file_path).name

    def label(self) -> str:
        """'report.pdf, p. 3' or 'notes.md'."""
        return f"{self.file_name}, p. {self.page}" if self.page is not None else self.file_name

    def as_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ProjectSource:
        page = data.get("page")
        return cls(
            int(str(data["n"])), str(data["file_path"]), None if page is None else int(str(page)),
            int(str(data["seq"])), str(data["text"]), int(str(data["passage_id"])),
        )  # fmt: skip


def _file_names(paths: set[str]) -> dict[str, str]:
    """Each file's name as shown: its own name ('README.md'), or where other files listed share it, with the
    fewest parent folders that tell it from them ('a/README.md', 'b/README.md'); the whole path where none do."""
    by_name: dict[str, list[PurePath]] = {}
    for path in paths:
        by_name.setdefault(PurePath(path).name, []).append(PurePath(path))
    shown = {}
    for name, same in by_name.items():
        for path in same:
            shown[str(path)] = name
            if len(same) == 1:
                continue
            others = [o.parts for o in same if o != path]
            for k in range(2, len(path.parts) + 1):
                tail = path.parts[-k:]
                if all(o[-k:] != tail for o in others):
                    shown[str(path)] = str(PurePath(*tail))
                    break
            else:
                shown[str(path)] = str(path)
    return shown


def distinct_labels(sources: Sequence[ProjectSource]) -> dict[int, str]:
    """Each source's label by its number, told apart where two of them would share one: files of one name
    in different folders by the fewest parent folders that tell them apart ('a/README.md', 'b/README.md'),
    passages of one file (of one PDF page) by their position in it: 'notes.md §3' for the file's third
    passage (`seq` + 1), 'report.pdf, p. 4 §12'; a label no other source has stays as it is ('notes.md',
    'report.pdf, p. 3')."""
    names = _file_names({str(PurePath(s.file_path)) for s in sources})
    listed = Counter((str(PurePath(s.file_path)), s.page) for s in sources)
    labels = {}
    for s in sources:
        key = (str(PurePath(s.file_path)), s.page)
        label = names[key[0]] if s.page is None else f"{names[key[0]]}, p. {s.page}"
        labels[s.n] = f"{label} §{s.seq + 1}" if listed[key] > 1 else label
    return labels


def sources(hits: Sequence[Retrieved]) -> list[ProjectSource]:
    """The hits as numbered sources, 1 first, in their order."""
    return [ProjectSource(n, h.file_path, h.page, h.seq, h.text, h.passage_id) for n, h in enumerate(hits, start=1)]


def knowledge_block(hits: Sequence[Retrieved]) -> str:
    """The passages numbered for the prompt ("[1] report.pdf, p. 3: …"), then the line asking for [n]
    citations; "" when there are none."""
    if not hits:
        return ""
    lines = ["Passages from the project's files:"]
    for source in sources(hits):
        text = " ".join(source.text.split())  # (one line each: a passage's own [n] or blank lines stay inside it)
        lines.append(f"[{source.n}] {source.label()}: {text}")
    lines.append(CITE_INSTRUCTION)
    return "\n\n".join(lines)


def cited(answer_text: str, count: int | None = None) -> set[int]:
    """The passage numbers an answer cites with [n] (or [n, m]) markers; with `count` (the block's
    passages), only 1..count."""
    numbers = {int(n) for group in MARKER.findall(answer_text) for n in group.split(",")}
    return {n for n in numbers if n >= 1 and (count is None or n <= count)}


def _words(text: str) -> list[str]:
    return [w.replace("’", "'") for w in _WORD.findall(text.casefold())]


def _stem(word: str) -> str:
    """A word without its ending ("named", "names" and "name" alike: the question's words in another form)."""
    word = word.removesuffix("'s")
    for ending in ("ing", "ed", "es", "s", "e"):
        if len(word) > len(ending) + 2 and word.endswith(ending):
            return word[: -len(ending)]
    return word


def _runs(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def quoted(answer_text: str, question: str, passages: Sequence[CitedPassage]) -> set[int]:
    """The numbers of the passages whose words the answer uses: a passage holds a run of at most QUOTE_SPAN
    of the answer's words in a row with QUOTE_OWN of the answer's own (neither the question's in any form
    nor small words: "at the edge of the" is no quote) — a run no other passage given has. Words the answer
    repeats from the question say nothing (every passage retrieved for it has them), nor does a run two
    passages share (a turn of phrase, not a source); [n] markers are not words."""
    answer = _words(MARKER.sub(" ", answer_text))
    asked = {_stem(w) for w in _words(question)} | _SMALL
    own = [w not in _SMALL and _stem(w) not in asked for w in answer]
    wanted: dict[int, set[tuple[str, ...]]] = {n: set() for n in range(QUOTE_OWN, QUOTE_SPAN + 1)}
    for n, runs in wanted.items():
        runs.update(tuple(answer[i : i + n]) for i in range(len(answer) - n + 1) if sum(own[i : i + n]) >= QUOTE_OWN)
    matched = {}  # each passage's runs of the answer
    for source in passages:
        words = _words(source.text)
        matched[source.n] = set().union(*(wanted[n] & _runs(words, n) for n in wanted if wanted[n]))
    shared = Counter(run for runs in matched.values() for run in runs)
    return {n for n, runs in matched.items() if any(shared[run] == 1 for run in runs)}


def answer_uses(answer_text: str, question: str, passages: Sequence[CitedPassage]) -> set[int]:
    """The passages an answer uses: those it cites with [n], and those whose words it has (`quoted`); its
    thinking left out (what it thought is not what it answered)."""
    said = split_thinking(answer_text).answer
    return cited(said, len(passages)) | quoted(said, question, passages)


__all__ = [
    "CITE_INSTRUCTION",
    "MARKER",
    "ProjectSource",
    "answer_uses",
    "cited",
    "knowledge_block",
    "quoted",
    "sources",
]
