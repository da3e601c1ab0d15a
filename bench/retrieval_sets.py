"""The real document sets of bench/retrieval_projects.py: where each is found on this machine, the
questions asked of it and the phrases that mark the passages answering them."""

from __future__ import annotations

from pathlib import Path

COREUTILS_INFO = Path("/usr/share/info/coreutils.info.gz")

# written from the coreutils manual: (question in our words, a phrase of the passage that answers it, or
# phrases of the passages that each answer it). Reviewed: three questions that said their answer in its
# own words were put in others' ("symbolic link" -> "soft link", "prints the name of the current
# directory" -> "the path of the folder I am in", "Print the kernel name" -> "which kernel"), and "who is
# logged in" is answered by `who` as well as by `users`.
REAL_QUESTIONS: list[tuple[str, str | tuple[str, ...]]] = [
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


def answers(phrase: str | tuple[str, ...], text: str) -> bool:
    """Whether a passage holds (one of) a real question's answering phrase(s)."""
    phrases = (phrase,) if isinstance(phrase, str) else phrase
    return any(_squashed(p) in _squashed(text) for p in phrases)


def _squashed(text: str) -> str:
    return " ".join(text.split()).lower()
