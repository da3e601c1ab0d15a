"""Issue 28: a sent attachment can be inspected. A click on a sent message's chip, or Enter on it in the
transcript's Tab walk, opens its preview: the text the model was given with its token count and how the
answer read it (whole, or the passages retrieval used, marked), or the image at full size (clicking a
chip did nothing before). An imported chat's attachment shows its real size, not the size the chat
file claims (tests/hostile/chat_export_lies_about_size.json), and its preview shows Ember's stored
text as plain text, never the file its entry names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication, QDialog, QLabel, QPlainTextEdit
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.transcript import attachments as transcript_attachments
from ember_chat.app.transcript.view import TranscriptView
from ember_chat.engine.attachments import read_attachment_bytes
from ember_chat.engine.attachments.store import temporary_store
from tests.helpers.accessibility import _activate, _focused_link
from tests.helpers.attachment_files import image_bytes
from tests.helpers.attachments_window import FACT, WAIT_MS, SeeingFake, send, settle
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.import_window import imported_and_opened
from tests.helpers.paths import TESTS


@pytest.fixture
def make_window(make_loaded_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window with the tiny model loaded: tests/app/conftest.py's make_loaded_window."""
    return make_loaded_window


HOSTILE = TESTS / "hostile"


def chip_point(t: TranscriptView, href: str) -> QPoint:
    """Where the chip linking to `href` is drawn in the transcript's viewport (scrolled into view)."""
    block = t.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.charFormat().anchorHref() == href:
                c = QTextCursor(t.document())
                c.setPosition(frag.position() + frag.length() // 2)
                t.setTextCursor(c)
                t.ensureCursorVisible()
                return t.cursorRect(c).center()
            it += 1
        block = block.next()
    raise AssertionError(f"no chip links to {href}: {[h for h, _ in t.links()]}")


def click_chip(qtbot: QtBot, w: MainWindow, message_id: int, index: int = 0) -> QDialog:
    _activate(qtbot, w)  # (a click goes to an active window: the link it activates is the one selected)
    point = chip_point(w.transcript, f"ember:attachment/{message_id}/{index}")
    qtbot.mouseClick(w.transcript.viewport(), Qt.MouseButton.LeftButton, pos=point)
    dialog = w.transcript.attachments.dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def preview_parts(dialog: QDialog) -> tuple[str, str, QPlainTextEdit]:
    header = dialog.findChild(QLabel, "previewHeader")
    reading = dialog.findChild(QLabel, "previewReading")
    text = dialog.findChild(QPlainTextEdit, "previewText")
    assert header is not None and reading is not None and text is not None
    assert header.textFormat() == reading.textFormat() == Qt.TextFormat.PlainText
    assert text.isReadOnly()
    return header.text(), reading.text(), text


def test_a_click_or_enter_on_a_sent_file_shows_the_text_the_model_was_given(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    notes = tmp_path / "notes.txt"
    notes.write_text("Shopping list\n" + FACT + "\n", encoding="utf-8")
    w.composer.attach_paths([notes])
    settle(qtbot, w)
    send(qtbot, w, "What is the cat called?")
    question, answer = w.store.thread(w.controller.conversation_id)
    dialog = click_chip(qtbot, w, question.id)
    header, reading, text = preview_parts(dialog)
    assert text.toPlainText() == "Shopping list\n" + FACT + "\n"  # the stored text, as extracted
    assert header.startswith("notes.txt · text · ")
    (item,) = w.attach.store.plan_of(answer.id).items
    assert f"For the answer to this message: {item.tokens:,} tokens, whole." == reading
    dialog.close()
    qtbot.waitUntil(lambda: w.transcript.attachments.dialog is None, timeout=WAIT_MS)
    # the keyboard: Shift+Tab from the message box walks up the actions to the chip; Enter opens it
    _activate(qtbot, w)
    w.composer.editor.setFocus(Qt.FocusReason.TabFocusReason)
    walked = []
    for _ in range(8):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Backtab)
        walked.append(_focused_link(w.transcript))
        if walked[-1].startswith("ember:attachment/"):
            break
    assert walked[-1] == f"ember:attachment/{question.id}/0", walked
    qtbot.keyClick(w.transcript, Qt.Key.Key_Return)
    dialog = w.transcript.attachments.dialog
    assert dialog is not None and dialog.isVisible()
    assert FACT in preview_parts(dialog)[2].toPlainText()
    dialog.close()


def test_a_file_read_by_retrieval_shows_which_passages_were_used_marked_in_its_text(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    fake = FakeBackend(n_tokens=3)
    fake.n_ctx = 2048  # a small context: the file does not fit whole
    w = make_window(fake)
    w.side.params.max_tokens.setValue(64)
    lines = [f"Line {i} of the annual report talks about budgets and meetings." for i in range(900)]
    lines[610] = "The secret harbour code is PELICAN-42."
    report = tmp_path / "annual.txt"
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    w.composer.attach_paths([report])
    settle(qtbot, w)
    send(qtbot, w, "What is the secret harbour code?")
    question, answer = w.store.thread(w.controller.conversation_id)
    plan = w.attach.store.plan_of(answer.id)
    (item,) = plan.items
    assert item.mode == "retrieval" and 0 < item.used < item.total
    dialog = click_chip(qtbot, w, question.id)
    _, reading, text = preview_parts(dialog)
    assert f"{item.tokens:,} tokens, too long to read whole: {item.used} of {item.total} passages used" in reading
    harbour = next(s for s in plan.sources if "PELICAN-42" in s.text)
    assert f"passage {harbour.chunk + 1}" in reading
    assert text.toPlainText() == report.read_text(encoding="utf-8")  # the whole text, not only the passages
    marked = [s.cursor.selectedText() for s in text.extraSelections()]
    assert len(marked) == len(plan.sources) and any("PELICAN-42" in m for m in marked)
    dialog.close()


def test_a_click_on_a_sent_images_chip_shows_the_image(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(SeeingFake(n_tokens=3))
    shot = tmp_path / "screenshot.png"
    shot.write_bytes(image_bytes("PNG", (300, 200)))
    w.composer.attach_paths([shot])
    settle(qtbot, w)
    send(qtbot, w, "What colour is it?")
    question = w.store.thread(w.controller.conversation_id)[0]
    dialog = click_chip(qtbot, w, question.id)
    full = dialog.findChild(QLabel, "fullImage").pixmap()
    assert (full.width(), full.height()) == (300, 200)
    assert dialog.findChild(QLabel, "previewHeader").text().endswith("300 × 200 pixels")
    dialog.close()


def test_an_imported_file_shows_its_real_size_and_its_stored_text_as_plain_text(
    qtbot: QtBot, make_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export claims 987,654,321 bytes (942 MB was shown) and names /etc/passwd beside the text."""
    w = make_window(FakeBackend(n_tokens=3), load=False)
    imported_and_opened(qtbot, w, HOSTILE / "chat_export_lies_about_size.json")
    w.transcript.finish_rendering()
    question = w.store.thread(w.controller.conversation_id)[0]
    (att,) = w.attach.store.of_message(question.id)
    stored = w.attach.store.text(att)
    size = len(stored.encode("utf-8"))
    assert att.size == size == 148
    shown = w.transcript.plain_text().replace("\u00a0", " ")
    assert "<b>minutes.txt · text · 148 B" in shown and "MB" not in shown
    (tip,) = [tip for href, tip in w.transcript.links() if href == f"ember:attachment/{question.id}/0"]
    assert "&lt;b&gt;minutes.txt" in tip  # the chip's tooltip shows the name as written too
    dialog = click_chip(qtbot, w, question.id)
    header, reading, text = preview_parts(dialog)
    assert header.startswith("<b>minutes.txt · text · 148 B")  # the name as written, not bold
    assert reading.startswith("How the answers read this file was not recorded: this is the text a model is given")
    assert text.toPlainText() == stored  # the tags and the Markdown as characters; nothing of /etc/passwd
    assert '<img src="file:///etc/passwd">' in text.toPlainText() and "root:" not in text.toPlainText()
    assert dialog.windowTitle() == "<b>minutes.txt"
    dialog.close()
    # a text longer than the preview loads: its start, and a line that says so
    monkeypatch.setattr(transcript_attachments, "MAX_TEXT_BYTES", 40)
    dialog = click_chip(qtbot, w, question.id)
    cut = dialog.findChild(QLabel, "previewCut")
    assert cut is not None and cut.text() == "The first 40 B of its 148 B of text are shown here."
    assert preview_parts(dialog)[2].toPlainText() == stored.encode()[:40].decode()
    dialog.close()


def test_the_start_of_a_stored_text_never_ends_in_half_a_character() -> None:
    with temporary_store("preview-") as store:
        att = store.save(read_attachment_bytes("accents.txt", ("é" * 50).encode()))
        assert store.text_head(att, 5) == ("éé", 100)  # (the third é's first byte is left out)
        assert store.text_head(att, 1000) == ("é" * 50, 100)
