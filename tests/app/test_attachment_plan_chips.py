"""The attachment chips say what the answer's Read line will say (issue 28, item 2): every chip said
"too long to read whole: retrieval" while the Read line said `whole` for most, a chip said 3,321 tokens
where the Read line said 2,199, a short .txt said "too long to read whole: 0 of 12 passages used" — in
an edited message's chips too, and after a chip was removed with ✕. The chips guessed with a budget of
their own (the context less the last answer's whole prompt, the files in the order attached); now they
show the engine's own plan of the message as it would be sent, made again after every change.

The real window on the real llama.cpp runtime (the tiny model's own tokenizer), real PDFs and text
files, three turns: a long PDF; then a 4-page PDF, a one-line PDF, a 12-line .txt and a licence file
with a big PDF removed by its ✕; then that message edited."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.engine_link.attachment_words import mode_words
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments import AttachmentStore, read_attachment_bytes
from ember_chat.engine.attachments.planning import plan_turn
from ember_chat.engine.core.messages import AttachmentRef
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.attachment_files import write_pdf
from tests.helpers.attachments_window import send, settle
from tests.helpers.fake_backend import FakeBackend


@pytest.fixture
def make_window(make_loaded_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window with the tiny model loaded: tests/app/conftest.py's make_loaded_window."""
    return make_loaded_window


READ_ENTRY = re.compile(r"^(?P<name>.+?) \((?:(?P<tokens>[\d,]+) tokens, )?(?P<how>.+)\)$")
FILLER = "Line {i} of the yearly report: the committee met, budgets were read aloud and approved."


def long_pdf(path: Path, pages: int, fact: str = "") -> Path:
    text = "\n".join(FILLER.format(i=i) for i in range(30))
    return write_pdf(path, [text + (f"\n{fact}" if n == pages // 2 and fact else "") for n in range(pages)])


def read_line(w: MainWindow) -> dict[str, str]:
    """The last answer's Read line: file name → "N tokens, how"."""
    (line,) = [b for b in w.transcript.plain_text().split("\n") if b.startswith("Read: ")][-1:]
    out = {}
    for entry in line.removeprefix("Read: ").split("; "):
        m = READ_ENTRY.match(entry)
        assert m, entry
        out[m["name"]] = f"{m['tokens']} tokens, {m['how']}" if m["tokens"] else m["how"]
    return out


def chips_said(qtbot: QtBot, w: MainWindow, question: str) -> dict[str, str]:
    """Type the question, wait for the plan, and read each chip as the Read line would word it (its
    whole sentence: the chip's tooltip and what a screen reader says)."""
    w.composer.editor.setPlainText(question)
    settle(qtbot, w)
    out = {}
    for item in w.composer.attachments.items:
        assert item.chip.words in item.chip.toolTip().splitlines()
        details = item.chip.words.split(" · ")  # kind · size · N tokens · how
        assert len(details) == 4, details
        out[item.chip.name_label.text()] = f"{details[2]}, {details[3]}"
    return out


def test_the_chips_say_what_the_read_line_says_turn_after_turn_after_a_removal_and_in_an_edit(
    qtbot: QtBot, make_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    w = make_window(None)  # the real runtime: the tiny model's own tokenizer and context
    w.side.params.max_tokens.setValue(2)
    assert w.model is not None and w.model.n_ctx

    # turn 1: a PDF far longer than the context
    w.composer.attach_paths([long_pdf(tmp_path / "yearly.pdf", 24, "The vault code is HERON-7.")])
    settle(qtbot, w)
    said = chips_said(qtbot, w, "What is the vault code?")
    assert said["yearly.pdf"].endswith("passages used") and "too long to read whole" in said["yearly.pdf"]
    send(qtbot, w, "What is the vault code?")
    assert read_line(w)["yearly.pdf"] == said["yearly.pdf"]

    # turn 2: small files after the long one, and a big one removed with its ✕
    four = long_pdf(tmp_path / "four pages.pdf", 4)
    tiny = write_pdf(tmp_path / "tiny.pdf", ["Herons nest in colonies."])
    notes = tmp_path / "notes.txt"
    notes.write_text("".join(f"Note {i}: feed the cat at {i} o'clock.\n" for i in range(1, 13)), encoding="utf-8")
    licence = tmp_path / "LICENSE"
    licence.write_text("Permission is granted to use this file, provided this notice is kept.\n", encoding="utf-8")
    big = long_pdf(tmp_path / "big.pdf", 12)
    w.composer.attach_paths([four, big, tiny, notes, licence])
    settle(qtbot, w)
    (big_chip,) = [i.chip for i in w.composer.attachments.items if i.chip.name_label.text() == "big.pdf"]
    qtbot.mouseClick(big_chip.close_button, Qt.MouseButton.LeftButton)
    said = chips_said(qtbot, w, "When is the cat fed?")
    assert set(said) == {"four pages.pdf", "tiny.pdf", "notes.txt", "LICENSE"}
    assert any(how.endswith(", whole") for how in said.values())  # (not all "too long": the case)
    send(qtbot, w, "When is the cat fed?")
    read = read_line(w)
    assert "big.pdf" not in read
    for name, how in said.items():
        assert read[name] == how, name

    # the same message edited: its files come back, planned on the conversation before it
    question = w.store.thread(w.controller.conversation_id)[-2]
    w.compose.edit_message(question.id)
    settle(qtbot, w)
    said = chips_said(qtbot, w, "At what time is the cat fed in the evening?")
    assert set(said) == {"four pages.pdf", "tiny.pdf", "notes.txt", "LICENSE"}
    send(qtbot, w, "At what time is the cat fed in the evening?")
    read = read_line(w)
    for name, how in said.items():
        assert read[name] == how, name


def test_a_file_with_no_room_left_is_not_called_too_long(tmp_path: Path) -> None:
    """A file the conversation left no room for: none of its passages, said as such (a 12-line .txt
    said "too long to read whole: 0 of 12 passages used"); the chip and the Read line use these words."""
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(paths.database)
    atts = AttachmentStore(paths, store)
    count = lambda text: (len(text) + 3) // 4  # noqa: E731 (as a model without a tokenizer counts)
    try:
        for name, lines in (("notes.txt", 12), ("log.txt", 120)):
            text = "".join(f"Note {i}: feed the cat at {i} o'clock, then the heron.\n" for i in range(lines))
            att = atts.save(read_attachment_bytes(name, text.encode()))
            ref = AttachmentRef(att.id, att.sha256, att.name, att.kind)
            (item,) = plan_turn([ref], "When is the cat fed?", 8, count, atts).items
            assert item.mode == "retrieval" and item.used == 0 and item.crowded_out and item.whole_tokens > 8
            words = "not used" if item.total == 1 else f"none of its {item.total} passages used"
            assert item.describe() == f"no room left in the context: {words}"
            assert mode_words(item.mode, item.used, item.total) == item.describe()
        assert item.total > 1  # (the long one: several passages)
    finally:
        store.close()
