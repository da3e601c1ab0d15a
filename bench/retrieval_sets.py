"""The real document sets of bench/retrieval_projects.py: where each is found on this machine, the
questions asked of it and the phrases that mark the passages answering them.

- coreutils: GNU coreutils' Info manual (Debian's coreutils package: on every such machine) as ONE
  knowledge file; 30 questions we wrote by reading it (REAL_QUESTIONS).
- python_faq: the Python 3.11 FAQ (eight documents: general, programming, design, library, extending,
  windows, gui, installed), whose questions were written by the FAQ's authors, not by us: each
  question is a section title of the FAQ. The titles are taken out of the text the index holds, and
  each is asked; the passages answering it are those holding the start of one of its answer's
  paragraphs (the first 40 characters, where those are in the text once): any passage of a long answer
  counts, so the bench also gives the stricter figure where only the passage holding the answer's
  first such paragraph counts (`recall_at_5_answer_start`). Its reStructuredText
  sources come with Debian's python3.11-doc (`/usr/share/doc/python3.11/html/_sources/faq`); without
  installing it (it would upgrade this machine's Python): `apt-get download python3.11-doc`,
  `dpkg -x python3.11-doc_*.deb DIR`, then `--python-faq DIR/usr/share/doc/python3.11/html/_sources/faq`."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

COREUTILS_INFO = Path("/usr/share/info/coreutils.info.gz")
PYTHON_FAQ = Path("/usr/share/doc/python3.11/html/_sources/faq")
ANCHOR_CHARS = 40  # the start of an answer's paragraph that marks the passage holding it
MIN_PARAGRAPH = 30  # characters: a shorter paragraph ("Yes.") marks nothing

Phrases = str | tuple[str, ...]


@dataclass(frozen=True)
class DocumentSet:
    described: str
    files: list[tuple[str, str]]  # (the path it is stored under, its text as the indexer reads it)
    questions: list[tuple[str, Phrases]]  # (question, the phrase(s) marking a passage that answers it)
    answer_starts: bool = False  # each question's first phrase marks its answer's first passage


# written from the coreutils manual: (question in our words, a phrase of the passage that answers it, or
# phrases of the passages that each answer it). Reviewed: three questions that said their answer in its
# own words were put in others' ("symbolic link" -> "soft link", "prints the name of the current
# directory" -> "the path of the folder I am in", "Print the kernel name" -> "which kernel"), and "who is
# logged in" is answered by `who` as well as by `users`.
REAL_QUESTIONS: list[tuple[str, Phrases]] = [
    ("How do I make ls order files by when they were last changed?", "Sort by modification timestamp"),
    (
        "Which command tells how much room is left on each mounted file system?",
        "‘df’ reports the amount of space used and available",
    ),
    ("How can I see the last lines of a log while it keeps growing?", "Loop forever trying to read more"),
    ("What does the wc command count?", "‘wc’ counts the number of bytes, characters, words, and newlines"),
    ("How do I split a big file into pieces of a given number of lines?", "Put LINES lines of INPUT into"),
    ("How do I create a soft link with ln rather than a hard one?", "Make symbolic links instead of hard links"),
    ("How do I change the owner of a file?", "‘chown’ changes the user and/or group ownership"),
    ("How can sort order numbers like 10 after 9?", "Sort numerically.  The number begins each line"),
    ("Which command removes duplicate adjacent lines?", "‘uniq’ writes the unique lines"),
    ("How can I show a file's bytes in octal or hex?", "‘od’ writes an unambiguous representation"),
    ("How do I print a file's lines in reverse order?", "‘tac’ copies each FILE"),
    ("How do I make cp keep timestamps and permissions?", "Preserve the specified attributes of the original files"),
    ("How can I number the lines of a file?", "‘nl’ writes each FILE"),
    ("How to compute a file's SHA-256 checksum?", "‘sha224sum’, ‘sha256sum’, ‘sha384sum’"),
    (
        "What does the touch command do when the file does not exist?",
        "Any FILE argument that does not exist is created empty",
    ),
    ("How do I wait for a number of seconds in a script?", "‘sleep’ pauses for an amount of time"),
    ("How can I run a command with a time limit?", "‘timeout’ runs the given COMMAND and kills it"),
    ("Which command shows the full path of the folder I am in?", "‘pwd’ prints the name of the current directory"),
    ("How can I see how much space a directory uses?", "‘du’ reports the amount of file system space"),
    ("How do I make several nested directories at once with mkdir?", "Make any missing parent directories"),
    ("What does rm do with the -r option?", "Remove the listed directories and their contents recursively"),
    ("How can I make a temporary file safely from a script?", "‘mktemp’ manages the creation of temporary files"),
    ("How do I join lines of two files that share a field?", "‘join’ writes to standard output a line for each pair"),
    ("Which command translates or deletes characters?", "‘tr’ copies standard input to standard output, performing"),
    ("How can I print only certain columns of each line?", "‘cut’ writes to standard output selected parts"),
    (
        "How do I see who is logged in right now?",
        ("‘users’ prints on a single line a blank-separated list", "‘who’ prints information about users who are"),
    ),
    ("How can I find out which operating system kernel the machine runs?", "Print the kernel name"),
    ("How do I shred a file so it cannot be recovered?", "‘shred’ overwrites devices or files"),
    ("How to print the first ten lines of a file?", "‘head’ prints the first part"),
    ("How can I change a file's permissions?", "‘chmod’ changes the access permissions"),
]


def coreutils(path: Path = COREUTILS_INFO) -> DocumentSet | None:
    if not path.is_file():
        return None
    text = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
    text = text.split("\x1fTag Table:")[0]  # (the node offsets at its end: no text for a reader)
    described = f"GNU coreutils Info manual ({path}) as one knowledge file of {len(text)} characters"
    return DocumentSet(described, [("/manuals/coreutils.info", text)], REAL_QUESTIONS)


# a reStructuredText title: its line, then a row of one punctuation character at least as long
_RST_TITLE = re.compile(r"^([^\n]*\S[^\n]*)\n([=\-~^*\"'`#+])\2{2,}[ \t]*$\n?", re.MULTILINE)
_RST_ROLE = re.compile(r":[a-z:]+:`([^`]*)`")


def python_faq(folder: Path = PYTHON_FAQ) -> DocumentSet | None:
    paths = sorted(p for p in folder.glob("*.rst.txt") if p.name != "index.rst.txt") if folder.is_dir() else []
    if not paths:
        return None
    files: list[tuple[str, str]] = []
    asked: list[tuple[str, list[str]]] = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        titles = list(_RST_TITLE.finditer(text))
        kept, at = [], 0
        for i, title in enumerate(titles):
            question = title.group(1).strip()
            if not question.endswith("?"):
                continue
            end = titles[i + 1].start() if i + 1 < len(titles) else len(text)
            asked.append((_plain(question), _paragraph_starts(text[title.end() : end])))
            kept.append(text[at : title.start()])
            at = title.end()
        kept.append(text[at:])
        files.append((f"/python-faq/{path.name}", "".join(kept)))
    everything = _squashed(" ".join(text for _, text in files))
    once = Counter(a for _, anchors in asked for a in anchors)
    questions = [
        (question, tuple(a for a in anchors if once[a] == 1 and everything.count(a) == 1))
        for question, anchors in asked
    ]
    questions = [(q, anchors) for q, anchors in questions if anchors]
    described = (
        f"the Python 3.11 FAQ ({folder}), {len(files)} knowledge files of {sum(len(t) for _, t in files)} "
        f"characters without their {len(asked)} question titles; its own questions asked, {len(questions)} "
        "of them with an answer found in the text"
    )
    return DocumentSet(described, files, questions, answer_starts=True)


def _plain(title: str) -> str:
    """A title without its reStructuredText marks (``x``, :func:`x`, *x*)."""
    return " ".join(_RST_ROLE.sub(r"\1", title).replace("``", "").replace("*", "").split())


def _paragraph_starts(answer: str) -> list[str]:
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n[ \t]*\n", answer))
    return [_squashed(p)[:ANCHOR_CHARS] for p in paragraphs if len(p) >= MIN_PARAGRAPH and not p.startswith("..")]


def answers(phrase: Phrases, text: str) -> bool:
    """Whether a passage holds (one of) a real question's answering phrase(s)."""
    phrases = (phrase,) if isinstance(phrase, str) else phrase
    return any(_squashed(p) in _squashed(text) for p in phrases)


def _squashed(text: str) -> str:
    return " ".join(text.split()).lower()
