"""Attachments in the real window (issue 17): the 📎 button's path, drops and pastes, the chips above the
message box (kind, size, token count, how each will be read, ✕), sending them (what the engine
received), and the sent message's chips, Sources and thumbnails, also after the chat is reopened.
Real files written at test time (a text file, a PDF, PNG images), the real extraction, store and
FTS5; the fake engine only answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication, QLabel, QPlainTextEdit
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments.planning import whole_block
from tests.helpers.attachment_files import image_bytes, write_pdf
from tests.helpers.attachments_window import FACT, WAIT_MS, SeeingFake, send, settle
from tests.helpers.fake_backend import FakeBackend


@pytest.fixture
def make_window(make_loaded_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window with the tiny model loaded: tests/app/conftest.py's make_loaded_window."""
    return make_loaded_window


def chip_texts(w: MainWindow) -> list[str]:
    """Each chip's name and its whole sentence (its tooltip; the strip shows a short part of it)."""
    return [f"{i.chip.name_label.text()} | {i.chip.words}" for i in w.composer.attachments.items]


def test_the_attach_button_is_an_icon_with_a_name_and_in_the_tab_walk(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow]
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    button = w.composer.attach_button
    assert button.isVisible() and not button.icon().isNull()
    assert button.accessibleName() == "Attach files" and "Attach" in button.toolTip()
    assert button.focusPolicy() & Qt.FocusPolicy.TabFocus
    w.composer.editor.setFocus()
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is button  # the message box, the 📎 button, Tools, the voice buttons, Send
    qtbot.keyClick(button, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is w.tools.button
    voice = [b for b in (w.dictation.button, w.voice.button) if b.isVisible()]  # (issue 33; a narrow window hides them)
    for after in (*voice, w.composer.button):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        assert QApplication.focusWidget() is after
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)  # a file dialog that does not block the window
    dialog = w.composer.attachments.dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.windowModality() != Qt.WindowModality.ApplicationModal
    dialog.reject()


def test_a_file_that_cannot_be_read_says_why_in_the_banner_and_keeps_the_text(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    w.composer.editor.setPlainText("my long question")
    gone = tmp_path / "deleted.txt"
    with qtbot.waitSignal(w.composer.attachments.failed, timeout=WAIT_MS) as failed:
        w.composer.attach_paths([gone])
    assert "deleted.txt" in failed.args[0]
    assert w.banner.isVisible() and w.banner.text() == failed.args[0]
    assert w.composer.attachments.items == [] and not w.composer.attachments.isVisible()
    assert w.composer.editor.toPlainText() == "my long question"


def test_several_files_that_cannot_be_read_each_say_why(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    """Three bad files dropped at once: the banner keeps each one's sentence (the last replaced the
    others: two of three reasons were lost)."""
    w = make_window(FakeBackend(n_tokens=3))
    binary = tmp_path / "program.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    w.composer.attach_paths([tmp_path / "deleted.txt", binary, empty])
    bar = w.composer.attachments
    qtbot.waitUntil(lambda: not bar.items, timeout=WAIT_MS)
    text = w.banner.text()
    assert w.banner.isVisible() and all(name in text for name in ("deleted.txt", "program.bin", "empty.pdf")), text
    assert len(text.splitlines()) == 3
    w.banner.hide()  # dismissed: the next failure starts a banner of its own
    w.composer.attach_paths([tmp_path / "gone-too.txt"])
    qtbot.waitUntil(lambda: w.banner.isVisible(), timeout=WAIT_MS)
    assert "gone-too.txt" in w.banner.text() and "program.bin" not in w.banner.text()


def test_files_dropped_on_the_window_are_attached(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    dropped = tmp_path / "dropped.md"
    dropped.write_text("# Title\n\nSome *notes*.\n", encoding="utf-8")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(dropped))])
    pos = QPoint(40, 40)
    left, none = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(pos, Qt.DropAction.CopyAction, mime, left, none)
    target = w.transcript.viewport()  # over the chat: the transcript does not take files, so the window does
    QApplication.sendEvent(target, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(pos), Qt.DropAction.CopyAction, mime, left, none)
    QApplication.sendEvent(target, drop)
    assert drop.isAccepted()
    settle(qtbot, w)
    assert chip_texts(w)[0].startswith("dropped.md | Markdown · ")


def test_an_image_pasted_is_attached_and_a_model_that_cannot_see_it_refuses_it_before_sending(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow]
) -> None:
    fake = FakeBackend(n_tokens=3)
    w = make_window(fake)
    image = QImage(40, 30, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.red)
    QGuiApplication.clipboard().setImage(image)
    w.composer.editor.setFocus()
    w.composer.editor.paste()
    settle(qtbot, w)
    item = w.composer.attachments.items[0]
    assert item.chip.name_label.text() == "pasted image.png" and item.state.kind == "image"
    assert w.composer.editor.toPlainText() == ""  # the image was attached, not pasted as text
    assert item.chip.warning.isVisible() and "cannot see images" in item.chip.toolTip()
    both = QMimeData()  # a word processor's copy: the text, and a picture of it
    both.setText("pasted words")
    both.setImageData(image)
    QGuiApplication.clipboard().setMimeData(both)
    w.composer.editor.paste()
    assert w.composer.editor.toPlainText() == "pasted words" and len(w.composer.attachments.items) == 1
    w.composer.editor.clear()
    send_clicks = len(fake.requests)
    w.composer.editor.setPlainText("what is in this picture?")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert "cannot see images" in w.banner.text() and w.banner.isVisible()
    assert w.composer.editor.toPlainText() == "what is in this picture?"  # kept, and so is the image
    assert len(w.composer.attachments.items) == 1 and len(fake.requests) == send_clicks
    assert w.controller.conversation_id is None  # nothing was sent or saved


def test_an_image_for_a_vision_model_reaches_the_engine_and_shows_as_a_thumbnail(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    fake = SeeingFake(n_tokens=5)
    w = make_window(fake)
    shot = tmp_path / "screenshot.png"
    data = image_bytes("PNG", (300, 200))
    shot.write_bytes(data)
    w.composer.attach_paths([shot])
    settle(qtbot, w)
    item = w.composer.attachments.items[0]
    assert not item.chip.warning.isVisible() and "image" in item.chip.words
    send(qtbot, w, "What colour is it?")
    last = fake.requests[-1][-1]
    assert [(i.name, i.data) for i in last.images] == [("screenshot.png", data)]
    user_id = w.store.thread(w.controller.conversation_id)[-2].id
    assert f"ember:image/{user_id}/0" in [href for href, _ in w.transcript.links()]
    w.transcript.action.emit("image", user_id, 0)
    dialog = w.transcript.attachments.dialog
    assert dialog is not None
    full = dialog.findChild(QLabel, "fullImage").pixmap()
    assert (full.width(), full.height()) == (300, 200)  # at full size
    dialog.close()


def test_a_text_file_and_a_pdf_become_chips_with_their_token_counts(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(None)  # the real runtime: counted with the tiny model's own tokenizer
    notes = tmp_path / "notes.txt"
    notes.write_text("Shopping list\n" + FACT + "\n", encoding="utf-8")
    pdf = write_pdf(tmp_path / "report.pdf", ["Page one of the report.", "Page two: " + FACT])
    w.composer.editor.setPlainText("typed before attaching")
    w.composer.attach_paths([notes, pdf])
    settle(qtbot, w)
    texts = chip_texts(w)
    assert texts[0].startswith("notes.txt | text · ") and texts[1].startswith("report.pdf | PDF · ")
    for item, text in zip(w.composer.attachments.items, texts, strict=True):
        expected = w.bridge.measure_tokens(whole_block(item.stored, item.extracted.text))  # as the prompt holds it
        assert expected.tokens > 0 and not expected.estimated
        expected = expected.tokens
        assert f"{expected:,} tokens · whole" in text  # counted with the loaded model's tokenizer
        assert item.chip.close_button.accessibleName() == f"Remove {item.chip.name_label.text()}"
    assert w.composer.editor.toPlainText() == "typed before attaching"  # nothing typed is lost
    assert w.composer.attachments.isVisible()


def test_removing_a_chip_before_sending_removes_it(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    fake = FakeBackend(n_tokens=3)
    w = make_window(fake)
    keep, drop = tmp_path / "keep.txt", tmp_path / "drop.txt"
    keep.write_text("keep this " + FACT, encoding="utf-8")
    drop.write_text("the removed file's secret: zebra", encoding="utf-8")
    w.composer.attach_paths([keep, drop])
    settle(qtbot, w)
    assert "tokens (estimated)" in chip_texts(w)[0]  # the fake engine has no tokenizer: said so
    w.composer.editor.setFocus()
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Tab)  # the chips' ✕ are in the Tab walk
    assert QApplication.focusWidget() is w.composer.attachments.items[0].chip.close_button
    qtbot.mouseClick(w.composer.attachments.items[1].chip.close_button, Qt.MouseButton.LeftButton)
    assert [i.chip.name_label.text() for i in w.composer.attachments.items] == ["keep.txt"]
    send(qtbot, w, "what does it say?")
    prompt = fake.requests[-1][-1].content
    assert FACT in prompt and "zebra" not in prompt
    assert w.composer.attachments.items == [] and not w.composer.attachments.isVisible()


def test_a_sent_file_reaches_the_engine_and_shows_on_the_message_and_after_reopening(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    fake = FakeBackend(n_tokens=5)
    w = make_window(fake)
    notes = tmp_path / "notes.txt"
    notes.write_text("Shopping list\n" + FACT + "\n", encoding="utf-8")
    w.composer.attach_paths([notes])
    settle(qtbot, w)
    send(qtbot, w, "What is the cat called?")
    last = fake.requests[-1][-1]
    assert last.role == "user" and "notes.txt" in last.content and FACT in last.content
    assert last.content.rstrip().endswith("What is the cat called?")  # the file's block, then the question
    text = w.transcript.plain_text().replace("\u00a0", " ")  # (a chip's spaces do not break)
    assert "notes.txt · text · " in text  # the sent message's chip
    assert "Read: notes.txt (" in text and "whole" in text  # how it was read, under the answer
    cid = w.controller.conversation_id
    w.chats.new_chat()
    assert "notes.txt" not in w.transcript.plain_text()
    w.chats.open_conversation(cid)
    w.transcript.finish_rendering()
    again = w.transcript.plain_text().replace("\u00a0", " ")
    assert "notes.txt · text · " in again and "Read: notes.txt (" in again
    w.chats.exports.export(tmp_path / "chat.json", "json")  # File ▸ Export: the file goes with its message
    exported = json.loads((tmp_path / "chat.json").read_text(encoding="utf-8"))
    user = next(m for m in exported["messages"] if m["role"] == "user")
    assert [(f["name"], FACT in f["text"]) for f in user["attachments"]] == [("notes.txt", True)]
    w.chats.exports.export(tmp_path / "chat.md", "md")
    assert "notes.txt" in (tmp_path / "chat.md").read_text(encoding="utf-8")


def test_a_long_pdf_is_read_by_retrieval_and_its_sources_show_their_passage(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    fake = FakeBackend(n_tokens=5)
    fake.n_ctx = 2048  # a small context: the PDF does not fit whole
    w = make_window(fake)
    w.side.params.max_tokens.setValue(64)
    filler = "\n".join(f"Line {i} of the annual report talks about budgets and meetings." for i in range(40))
    pages = [filler] * 30
    pages[17] = filler + "\nThe secret harbour code is PELICAN-42."
    pdf = write_pdf(tmp_path / "annual.pdf", pages)
    w.composer.attach_paths([pdf])
    settle(qtbot, w)
    w.composer.editor.setPlainText("What is the secret harbour code?")
    settle(qtbot, w)  # (planned again for the question typed)
    (item,) = w.composer.attachments.items
    assert item.state.mode == "retrieval" and 0 < item.state.used < item.state.total
    how = f"too long to read whole: {item.state.used} of {item.state.total} passages used"
    assert f"{item.state.planned:,} tokens (estimated) · {how}" in chip_texts(w)[0]  # the engine's plan, before
    send(qtbot, w, "What is the secret harbour code?")
    assert "PELICAN-42" in fake.requests[-1][-1].content
    text = w.transcript.plain_text()
    assert "too long to read whole:" in text and "passages used" in text
    assert f"annual.pdf ({item.state.planned:,} tokens, {how})" in text  # the Read line says what the chip said
    assert "Sources" in text and "annual.pdf · p. 18" in text
    answer_id = w.store.thread(w.controller.conversation_id)[-1].id
    links = [href for href, _tip in w.transcript.links() if href.startswith("ember:source/")]
    assert links and all(h.startswith(f"ember:source/{answer_id}/") for h in links)
    sources = w.attach.store.sources_of(answer_id)
    index = next(i for i, s in enumerate(sources) if "PELICAN-42" in s.text)
    assert f"ember:source/{answer_id}/{index}" in links
    w.transcript.action.emit("source", answer_id, index)  # what a click on that signed link emits
    dialog = w.transcript.attachments.dialog
    assert dialog is not None and dialog.isVisible()
    assert "PELICAN-42" in dialog.findChild(QPlainTextEdit, "sourceText").toPlainText()
    dialog.close()
    cid = w.controller.conversation_id
    w.chats.new_chat()
    w.chats.open_conversation(cid)
    w.transcript.finish_rendering()
    assert "annual.pdf · p. 18" in w.transcript.plain_text()  # the Sources are kept with the answer


def test_sending_while_a_file_is_still_read_waits_and_keeps_the_text(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    fake = FakeBackend(n_tokens=3)
    w = make_window(fake)
    notes = tmp_path / "notes.txt"
    notes.write_text(FACT, encoding="utf-8")
    w.composer.attach_paths([notes])  # (read on a worker: its result comes back through the event loop)
    chip = w.composer.attachments.items[0].chip
    assert chip.progress.isVisibleTo(chip) and chip.details.text().startswith("reading…")
    w.composer.editor.setPlainText("quick question")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert "still being read" in w.banner.text()
    assert w.composer.editor.toPlainText() == "quick question" and fake.requests == []
    settle(qtbot, w)
    send(qtbot, w, "quick question")
    assert FACT in fake.requests[-1][-1].content


def test_editing_a_message_brings_back_its_files(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    fake = FakeBackend(n_tokens=3)
    w = make_window(fake)
    notes = tmp_path / "notes.txt"
    notes.write_text(FACT, encoding="utf-8")
    w.composer.attach_paths([notes])
    settle(qtbot, w)
    send(qtbot, w, "What is the cat called?")
    question = w.store.thread(w.controller.conversation_id)[-2]
    w.compose.edit_message(question.id)
    settle(qtbot, w)
    assert [i.chip.name_label.text() for i in w.composer.attachments.items] == ["notes.txt"]
    assert "tokens" in chip_texts(w)[0]  # counted again
    send(qtbot, w, "And what is the keeper's cat called?")
    edited = w.store.thread(w.controller.conversation_id)[-2]
    assert edited.id != question.id and edited.parent_id == question.parent_id  # a new branch
    assert [a.name for a in w.attach.store.of_message(edited.id)] == ["notes.txt"]
    assert FACT in fake.requests[-1][-1].content


def test_chips_made_before_a_model_is_loaded_are_counted_again_when_one_is(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window(None, load=False)
    notes = tmp_path / "notes.txt"
    notes.write_text("Shopping list\n" + FACT + "\n", encoding="utf-8")
    w.composer.attach_paths([notes])
    settle(qtbot, w)
    before = chip_texts(w)[0]
    assert "tokens (estimated)" in before and "whole" not in before  # no model: no budget to say it fits
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=WAIT_MS):
        w.models.load_model("tiny.gguf")
    settle(qtbot, w)
    (item,) = w.composer.attachments.items
    tokens = w.bridge.measure_tokens(whole_block(item.stored, notes.read_text(encoding="utf-8")))
    assert not tokens.estimated and chip_texts(w)[0].endswith(f"{tokens.tokens:,} tokens · whole")
