"""Answers that cite (issue 34) in the real window: a chat in a project is answered with the project's instructions
before its system prompt and with passages of the project's knowledge (a real index over files in a temporary
folder); under the answer its Sources, each a link, and its [n] markers linked to them (a marker without a source
stays plain), those the answer uses (its [n], or its words) in bold; a click on [1] opens the passage with the
question's words marked and an Open file button that opens the source's own file (QDesktopServices.openUrl
recorded), refused with a sentence once the file is gone (and for a source an imported chat brought); the side
panel's Why this answer says the instructions and sources; the sources come back when the chat is shown again, and
so does how many passages did not fit; the project's embedding model ranks the passages (loaded for the answer, on
the engine thread), and one gone is said."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QTextCursor
from PySide6.QtWidgets import QInputDialog, QLabel, QLineEdit, QPlainTextEdit, QPushButton
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.events import KnowledgeUsed
from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.projects.citations import ProjectSource
from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.import_plan import IMPORTED_PASSAGE
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.gguf_factory import write_word_bert
from tests.helpers.opened_paths import opened
from tests.helpers.projects_window import INSTRUCTIONS
from tests.helpers.projects_window import project_chat as _project_chat
from tests.helpers.window import send

pytestmark = pytest.mark.usefixtures("nothing_blocks")
WAIT_MS = 30_000
QUESTION = "Which river is the longest of Iberia?"
ANSWER = ["The ", "Tagus ", "is ", "the ", "longest ", "[1]", ", ", "not ", "in ", "[7]", "."]


def _click_link(qtbot: QtBot, w: MainWindow, href: str) -> None:
    """A real mouse click on the first link to `href` in the transcript."""
    doc = w.transcript.document()
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().anchorHref() == href:
                c = QTextCursor(doc)
                c.setPosition(fragment.position() + fragment.length() // 2 + 1)
                w.transcript.ensureCursorVisible()
                w.transcript.setTextCursor(c)
                w.transcript.ensureCursorVisible()
                rect = w.transcript.cursorRect(c)
                w.transcript.setTextCursor(QTextCursor(doc))  # (the click makes its own selection)
                qtbot.mouseClick(
                    w.transcript.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(rect.x() - 2, rect.center().y())
                )
                return
            it += 1
        block = block.next()
    raise AssertionError(f"no link to {href}")


def test_a_project_answer_cites_its_sources_and_opens_them(
    qtbot: QtBot,
    make_loaded_window: Callable[[FakeBackend | None], MainWindow],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    rivers = docs / "rivers.md"
    rivers.write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    (docs / "lakes.txt").write_text("Lake Alqueva is a reservoir on the Guadiana.\n")
    fake = FakeBackend(script=ANSWER)
    w = make_loaded_window(fake)
    folder_id = _project_chat(qtbot, w, docs)
    w.side.params.system_prompt.setPlainText("You are helpful.")  # (the new chat's own)
    send(qtbot, w, QUESTION)

    # the request: the project's instructions, then the chat's system prompt; the passages before the question
    messages = fake.requests[-1]
    assert messages[0].role == "system"
    assert messages[0].content == f"{INSTRUCTIONS}\n\nYou are helpful."
    assert "[1] rivers.md: " in messages[-1].content and messages[-1].content.endswith(QUESTION)

    cid = w.controller.conversation_id
    assert cid is not None and w.store.conversation(cid).folder_id == folder_id
    answer_id = w.store.thread(cid)[-1].id
    text = w.transcript.plain_text()
    assert "Sources  [1] rivers.md" in text
    links = [href for href, _tip in w.transcript.links()]
    assert links.count(f"ember:cite/{answer_id}/1") == 2  # the [1] in the text and the Sources line
    assert not any(h.endswith("/7") and h.startswith("ember:cite") for h in links)  # [7]: no source, plain text
    assert "[7]" in text
    # the Sources line's link to [1] (the last of the two) says the answer uses it; it is in bold
    tips = [tip for href, tip in w.transcript.links() if href == f"ember:cite/{answer_id}/1"]
    assert tips[-1] == "Show passage 1: rivers.md (the answer uses this passage)"

    # Why this answer: the instructions (first line, the whole on hover) and the sources
    why = w.side.metrics.project_why
    assert not why.isHidden()
    assert "“Answer as a geographer would…”" in why.instructions.text()
    assert "Keep it short." in why.instructions.toolTip()
    assert "[1] rivers.md" in why.sources.text()

    # a click on the [1] in the answer: the passage, its words marked, Open file
    _click_link(qtbot, w, f"ember:cite/{answer_id}/1")
    dialog = w.transcript.attachments.dialog
    assert dialog is not None and dialog.isVisible()
    passage = dialog.findChild(QPlainTextEdit, "sourceText")
    assert "The Tagus is the longest river of Iberia" in passage.toPlainText()
    marked = {s.cursor.selectedText().lower() for s in passage.extraSelections()}
    assert {"river", "longest", "iberia"} <= marked
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    button = dialog.findChild(QPushButton, "openSourceFile")
    qtbot.waitUntil(button.isEnabled, timeout=WAIT_MS)  # (checked off the GUI thread)
    assert button.text() == "Open file"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(opened), timeout=WAIT_MS)  # (checked again, then opened)
    assert opened == [QUrl.fromLocalFile(str(rivers))]
    dialog.close()

    # the file gone: said, never opened
    rivers.unlink()
    w.transcript.action.emit("cite", answer_id, 1)
    dialog = w.transcript.attachments.dialog
    qtbot.waitUntil(lambda: dialog.findChild(QLabel, "sourceMissing") is not None, timeout=WAIT_MS)
    assert not dialog.findChild(QPushButton, "openSourceFile").isEnabled()
    assert "no longer at" in dialog.findChild(QLabel, "sourceMissing").text()
    dialog.close()
    assert len(opened) == 1

    # the chat shown again: its sources kept with the answer
    w.chats.new_chat()
    w.chats.open_conversation(cid)
    w.transcript.finish_rendering()
    assert "Sources  [1] rivers.md" in w.transcript.plain_text()
    assert [h for h, _t in w.transcript.links()].count(f"ember:cite/{answer_id}/1") == 2

    # Regenerate (the file back): the same instructions and knowledge, the new answer's sources its own
    rivers.write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=WAIT_MS):
        w.controller.regenerate(answer_id)
    again = fake.requests[-1]
    assert again[0].content == messages[0].content and "[1] rivers.md: " in again[-1].content
    regenerated = w.store.thread(cid)[-1].id
    assert regenerated != answer_id
    assert str(rivers) in [s.file_path for s in AnswerKnowledge(w.store).sources_of(regenerated)]


def test_open_file_on_a_source_moved_away_since_says_it_is_no_longer_there(
    qtbot: QtBot,
    make_loaded_window: Callable[[FakeBackend | None], MainWindow],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The passage shown, its file moved out of the project's folder and the folder indexed again (the
    index forgets it): Open file says the file is no longer there, moved or deleted, not that it is not in
    the project's knowledge (its folder still is); a path outside the project's knowledge still is not."""
    docs = tmp_path / "docs"
    docs.mkdir()
    rivers = docs / "rivers.md"
    rivers.write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    (docs / "lakes.txt").write_text("Lake Alqueva is a reservoir on the Guadiana.\n")
    w = make_loaded_window(FakeBackend(script=["The Tagus [1]."]))
    folder_id = _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    answer_id = w.store.thread(w.controller.conversation_id)[-1].id
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    w.transcript.action.emit("cite", answer_id, 1)
    dialog = w.transcript.attachments.dialog
    button = dialog.findChild(QPushButton, "openSourceFile")
    qtbot.waitUntil(button.isEnabled, timeout=WAIT_MS)

    rivers.replace(tmp_path / "rivers.md")  # moved away, and the folder indexed again
    indexing = w.projects.indexing
    with qtbot.waitSignal(indexing.finished, timeout=WAIT_MS):
        indexing.run(folder_id)
    qtbot.waitUntil(lambda: not indexing.running(folder_id), timeout=WAIT_MS)
    index = KnowledgeIndex(indexing.index_path(folder_id))
    try:
        assert index.file(str(rivers)) is None  # (forgotten: the case the old words got wrong)
    finally:
        index.close()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.findChild(QLabel, "sourceMissing") is not None, timeout=WAIT_MS)
    said = dialog.findChild(QLabel, "sourceMissing").text()
    assert said == f"The file is no longer at {rivers}: it was moved or deleted since it was indexed."
    assert opened == [] and not button.isEnabled()
    dialog.close()
    outside = str(tmp_path / "rivers.md")  # (on disk, but in no folder of the project)
    assert "not in the knowledge" in (w.projects.answering.why_not_open(answer_id, outside, 1) or "")


def test_a_code_file_s_source_shows_its_folder_and_is_never_opened(
    qtbot: QtBot,
    make_loaded_window: Callable[[FakeBackend | None], MainWindow],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cited script (.bat: run by its default action on Windows) is never handed to the system to
    open: its button says Show in folder and opens the folder that holds it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    script = docs / "rivers.bat"
    script.write_text("echo The Tagus is the longest river of Iberia\n")
    w = make_loaded_window(FakeBackend(script=ANSWER))
    _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    answer_id = w.store.thread(w.controller.conversation_id)[-1].id
    assert w.transcript.attachments.of(answer_id).knowledge[0].file_path == str(script)
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    w.transcript.action.emit("cite", answer_id, 1)
    dialog = w.transcript.attachments.dialog
    button = dialog.findChild(QPushButton, "openSourceFile")
    qtbot.waitUntil(button.isEnabled, timeout=WAIT_MS)
    assert button.text() == "Show in folder" and "folder" in button.toolTip()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(opened), timeout=WAIT_MS)
    assert opened == [QUrl.fromLocalFile(str(docs))]
    dialog.close()


def test_the_passage_shows_at_once_while_its_file_is_checked_off_the_gui_thread(
    qtbot: QtBot,
    make_loaded_window: Callable[[FakeBackend | None], MainWindow],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The index held by another connection (the indexer writing): a click on [1] shows the passage at
    once with its button disabled, saying Checking…; the check, off the GUI thread, enables it once the
    index answers. The button's click checks again, off the GUI thread, before opening."""
    docs = tmp_path / "docs"
    docs.mkdir()
    rivers = docs / "rivers.md"
    rivers.write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    w = make_loaded_window(FakeBackend(script=ANSWER))
    folder_id = _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    answer_id = w.store.thread(w.controller.conversation_id)[-1].id
    index = w.projects.indexing.index_path(folder_id)
    holder = sqlite3.connect(index, isolation_level=None)  # (every other connection waits on it)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        w.transcript.action.emit("cite", answer_id, 1)
        dialog = w.transcript.attachments.dialog
        assert dialog is not None and dialog.isVisible()
        assert "Tagus" in dialog.findChild(QPlainTextEdit, "sourceText").toPlainText()
        button = dialog.findChild(QPushButton, "openSourceFile")
        assert button.text() == "Checking…" and not button.isEnabled()
        holder.execute("COMMIT")
    finally:
        holder.close()
    qtbot.waitUntil(button.isEnabled, timeout=WAIT_MS)
    assert button.text() == "Open file" and dialog.findChild(QLabel, "sourceMissing") is None
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    rivers.unlink()  # (gone after the window checked: the click's own check says so)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.findChild(QLabel, "sourceMissing") is not None, timeout=WAIT_MS)
    assert "no longer at" in dialog.findChild(QLabel, "sourceMissing").text()
    assert opened == [] and not button.isEnabled()
    dialog.close()


def test_an_answer_that_uses_a_passage_s_words_without_a_marker_shows_it_as_used(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    """A small model seldom writes [n]: a source whose words the answer has is shown as used (bold, said in
    its tooltip), one it does not use is not, and the same once the chat is shown again."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    (docs / "iberia.txt").write_text("Iberia has many a river; the Douro is the third longest river of Iberia.\n")
    # its thinking quotes iberia.txt, its answer repeats the question's words (which iberia.txt has too) and
    # quotes rivers.md: only rivers.md is used
    script = ["<think>The Douro is the third longest.</think>", "The longest river of Iberia is the Tagus, ",
              "flowing to Lisbon."]  # fmt: skip
    w = make_loaded_window(FakeBackend(script=script))
    _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    cid = w.controller.conversation_id
    answer_id = w.store.thread(cid)[-1].id

    def tips() -> dict[str, str]:
        m = w.transcript.attachments.of(answer_id)
        assert {s.file_name for s in m.knowledge} == {"rivers.md", "iberia.txt"}
        by_n = {s.n: s.file_name for s in m.knowledge}
        return {by_n[int(href.rsplit("/", 1)[1])]: tip for href, tip in w.transcript.links()
                if href.startswith(f"ember:cite/{answer_id}/")}  # fmt: skip

    assert "▸ Thinking" in w.transcript.plain_text() and "third longest" not in w.transcript.plain_text()
    for shown in ("folded", "open", "shown again"):
        got = tips()
        assert got["rivers.md"].endswith("rivers.md (the answer uses this passage)"), shown
        assert got["iberia.txt"].endswith("iberia.txt"), shown  # (its words: only the question's, the thinking's)
        if shown == "folded":
            w.transcript.action.emit("think", answer_id, 0)  # the fold, clicked
            assert "The Douro is the third longest." in w.transcript.plain_text()
        else:
            w.chats.new_chat()
            w.chats.open_conversation(cid)
            w.transcript.finish_rendering()


def test_passages_of_one_file_are_told_apart_in_the_sources_line_its_tooltips_and_the_side_panel(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    """An answer given several passages of one file: each says its position in the file ('rivers.txt §3'),
    in the Sources line, its tooltip (and the [n] markers') and Why this answer; a file with one passage
    keeps its plain name; the passages used are still in bold."""
    docs = tmp_path / "docs"
    docs.mkdir()
    parts = [
        f"Part {k}. The river Tagus is the longest of Iberia, note {k}. " + "Its water runs west. " * 40
        for k in range(8)
    ]
    (docs / "rivers.txt").write_text("\n\n".join(parts))
    (docs / "lakes.txt").write_text("Lake Alqueva is on the river Guadiana, in Iberia.\n")
    w = make_loaded_window(FakeBackend(script=["The Tagus [1] [2]."]))
    _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    answer_id = w.store.thread(w.controller.conversation_id)[-1].id
    knowledge = w.transcript.attachments.of(answer_id).knowledge
    of_rivers = [s for s in knowledge if s.file_name == "rivers.txt"]
    assert len(of_rivers) >= 2 and len({s.seq for s in of_rivers}) == len(of_rivers)  # (the case: one file, many)
    line = next(x for x in w.transcript.plain_text().splitlines() if x.startswith("Sources"))
    shown = [x.strip() for x in line.removeprefix("Sources").split("·")]
    assert len(set(shown)) == len(knowledge)  # (each told apart)
    tips = dict(w.transcript.links())  # (the Sources line's, the last of each href)
    for s in knowledge:
        label = f"rivers.txt §{s.seq + 1}" if s.file_name == "rivers.txt" else s.file_name
        assert f"[{s.n}] {label}" in shown
        assert f"[{s.n}] {label}" in w.side.metrics.project_why.sources.text()
        tip = tips[f"ember:cite/{answer_id}/{s.n}"]
        if s.file_name == "rivers.txt":
            assert tip.startswith(f"Show passage {s.n}: {label} (passage {s.seq + 1} of {docs / 'rivers.txt'})")
        else:
            assert tip.startswith(f"Show passage {s.n}: {label}") and "§" not in tip
        assert tip.endswith("(the answer uses this passage)") == (s.n in (1, 2))
    marker = next(t for h, t in w.transcript.links() if h == f"ember:cite/{answer_id}/1")  # the [1] in the text
    first = knowledge[0]
    said = f"rivers.txt §{first.seq + 1} (passage {first.seq + 1} of {docs / 'rivers.txt'})"
    assert marker == f"Source 1: {said if first.file_name == 'rivers.txt' else first.file_name}"


def test_files_of_one_name_in_two_folders_are_two_sources_in_the_line_its_tooltips_and_the_side_panel(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    """a/README.md and b/README.md, one passage each: the Sources line, Why this answer and the tooltips
    name each with its folder, never both 'README.md §1' (as if they were passages of one file)."""
    docs = tmp_path / "docs"
    for folder, lake in (("a", "Alqueva"), ("b", "Sanabria")):
        (docs / folder).mkdir(parents=True)
        (docs / folder / "README.md").write_text(f"The river Tagus is the longest of Iberia; lake {lake} is not.\n")
    w = make_loaded_window(FakeBackend(script=["The Tagus [1] [2]."]))
    _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    answer_id = w.store.thread(w.controller.conversation_id)[-1].id
    knowledge = w.transcript.attachments.of(answer_id).knowledge
    assert sorted(s.file_path for s in knowledge) == [str(docs / "a" / "README.md"), str(docs / "b" / "README.md")]
    line = next(x for x in w.transcript.plain_text().splitlines() if x.startswith("Sources"))
    tips = dict(w.transcript.links())
    for s in knowledge:
        label = f"{Path(s.file_path).parent.name}/README.md"
        assert f"[{s.n}] {label}" in line and f"[{s.n}] {label}" in w.side.metrics.project_why.sources.text()
        tip = tips[f"ember:cite/{answer_id}/{s.n}"]
        assert tip.startswith(f"Show passage {s.n}: {label} (passage 1 of {s.file_path})")
    assert "§" not in line and "§" not in w.side.metrics.project_why.sources.text()


def test_passages_that_did_not_fit_are_said_under_the_answer_and_after_it_is_shown_again(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(4):  # long files about the question: not all their passages fit the small context
        (docs / f"river{n}.txt").write_text(f"The river Tagus, note {n}: " + "Iberia river longest water " * 60)
    fake = FakeBackend(script=["The Tagus [1]."])
    fake.n_ctx = 1_200
    w = make_loaded_window(fake)
    _project_chat(qtbot, w, docs)
    w.side.params.max_tokens.setValue(64)
    send(qtbot, w, QUESTION)
    cid = w.controller.conversation_id
    answer_id = w.store.thread(cid)[-1].id
    m = w.transcript.attachments.of(answer_id)
    assert m.knowledge and m.left_out > 0  # (retrieved: more passages than fit)
    said = f"{m.left_out} more passage{'s' if m.left_out > 1 else ''} found did not fit the context."
    assert said in w.transcript.plain_text()
    assert said in w.side.metrics.project_why.sources.text()
    w.chats.new_chat()
    w.chats.open_conversation(cid)
    w.transcript.finish_rendering()
    assert said in w.transcript.plain_text()  # (kept with the answer's metrics)


def test_the_side_panel_forgets_the_answer_of_a_chat_that_leaves_the_list(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    """The project deleted (its chats to the Trash), or the open chat put in the Trash: the centre shows
    a new chat, and the side panel's Current answer and Why this answer no longer show the closed chat's."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    w = make_loaded_window(FakeBackend(script=["The Tagus [1]."]))
    folder_id = _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    cid = w.controller.conversation_id
    metrics = w.side.metrics
    assert not metrics.project_why.isHidden() and metrics.ttft.text() != "—"
    w.chats.organise.delete_folder(folder_id, confirmed=True)
    assert w.controller.conversation_id is None and w.store.conversation(cid).deleted_at is not None
    assert metrics.project_why.isHidden() and metrics.ttft.text() == "—"

    w.undo.undo_last()
    w.chats.open_conversation(cid)
    w.transcript.finish_rendering()
    send(qtbot, w, "And the second longest?")
    assert not metrics.project_why.isHidden()
    w.chats.organise.trash([cid])
    assert w.controller.conversation_id is None
    assert metrics.project_why.isHidden()


def _answered_in_rivers(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> tuple[MainWindow, int]:
    """A window whose chat in the project “Rivers” (one Markdown file) has its answer, which cites it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    w = make_loaded_window(FakeBackend(script=["The Tagus [1]."]))
    folder_id = _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    assert w.side.metrics.project_why.title() == "Why this answer — 🌊 Rivers"
    return w, folder_id


def test_why_this_answer_names_the_project_as_it_is_renamed_and_a_delete_says_project(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    """The project renamed with its chat open (Rename project… typed, then Project settings ▸ General):
    Why this answer names it anew at once, its instructions and sources still the answer's; deleted, the
    banner says the project, and Undo brings it back."""
    w, folder_id = _answered_in_rivers(qtbot, make_loaded_window, tmp_path)
    why = w.side.metrics.project_why
    sources = why.sources.text()

    w.chats.organise.rename_folder(folder_id)  # the chat list's Rename project…
    dialog = w.chats.chat_question
    assert isinstance(dialog, QInputDialog) and dialog.windowTitle() == "Rename project"
    field = dialog.findChild(QLineEdit)
    field.selectAll()
    qtbot.keyClicks(field, "Iberian rivers")
    qtbot.keyClick(field, Qt.Key.Key_Return)
    assert why.title() == "Why this answer — 🌊 Iberian rivers" and why.sources.text() == sources
    assert "Answer as a geographer would" in why.instructions.text()

    w.projects.open_settings(folder_id)  # Project settings ▸ General: name and icon saved
    settings = w.projects.settings_dialog
    settings.name.setText("Rios")
    settings.icon.setText("🏞")
    settings.save()
    assert why.title() == "Why this answer — 🏞 Rios" and why.sources.text() == sources

    w.chats.organise.delete_folder(folder_id, confirmed=True)
    assert w.banner.text().startswith("Deleted the project “Rios”; 1 chat went to the Trash.")
    w.undo.undo_last()
    assert ProjectStore(w.store).project(folder_id).name == "Rios"


def test_why_this_answer_keeps_its_project_name_when_another_project_is_made_with_its_folder_id(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    """The chat moved out of its project (its answer still shown), the project deleted and another made
    that is given its folder's id (SQLite gives a deleted row's id again): the chat list read again, Why
    this answer still names the project the answer was made in, not the new one."""
    w, folder_id = _answered_in_rivers(qtbot, make_loaded_window, tmp_path)
    why = w.side.metrics.project_why
    w.store.organise.move_chats([w.controller.conversation_id], None)
    w.chats.reload_conversations()
    w.store.organise.delete_folder(folder_id)
    w.chats.reload_conversations()
    assert not why.isHidden() and why.title() == "Why this answer — 🌊 Rivers"
    other = ProjectStore(w.store).create("Lakes", icon="🏞")
    assert other.folder_id == folder_id  # (the case: the id given again)
    w.chats.reload_conversations()
    assert why.title() == "Why this answer — 🌊 Rivers"
    ProjectStore(w.store).update(folder_id, name="Ponds")  # (still not the answer's project)
    w.chats.reload_conversations()
    assert why.title() == "Why this answer — 🌊 Rivers"


def test_a_source_an_imported_chat_brought_is_refused_by_the_check_itself_without_looking_anything_up(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    """`why_not_open` told a source is an imported chat's (IMPORTED_PASSAGE) refuses it by itself, even
    when its path names a file of the project's index, on disk: the index is not opened nor the file
    (before, it opened the index and found the file: Open file allowed; its caller alone refused)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    rivers = docs / "rivers.md"
    rivers.write_text("# Rivers\n\nThe Tagus is the longest river of Iberia, flowing to Lisbon.\n")
    w = make_loaded_window(FakeBackend(script=["The Tagus [1]."]))
    folder_id = _project_chat(qtbot, w, docs)
    send(qtbot, w, QUESTION)
    answer_id = w.store.thread(w.controller.conversation_id)[-1].id
    check = w.projects.answering.why_not_open
    imported = "This source came with an imported chat: Ember opens only files of its projects' own indexes."
    index = str(w.projects.indexing.index_path(folder_id))
    with opened(also=("sqlite3.connect",)) as seen:
        assert check(answer_id, str(rivers), IMPORTED_PASSAGE) == imported
        rivers.unlink()  # (gone: a check that looked at the disk would say so)
        assert check(answer_id, str(rivers), IMPORTED_PASSAGE) == imported
    assert seen == []
    with opened(also=("sqlite3.connect",)) as seen:  # (the project's own source: its index looked up)
        said = check(answer_id, str(rivers), 1)
    assert said is not None and said.startswith("The file is no longer at") and index in seen


def test_a_source_from_an_imported_chat_is_shown_and_its_path_never_opened(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    there = tmp_path / "there.txt"
    there.write_text("A file that is on disk.\n")
    w = make_window()
    chat = w.store.create_conversation("Imported")
    q = w.store.add_message(chat.id, "user", "What is there?")
    a = w.store.add_message(chat.id, "assistant", "Something [1].", parent_id=q.id)
    AnswerKnowledge(w.store).record(
        a.id, [ProjectSource(1, str(there), None, 0, "A file that is on disk.", IMPORTED_PASSAGE)]
    )
    w.chats.reload_conversations()
    w.chats.open_conversation(chat.id)
    w.transcript.finish_rendering()
    assert "Sources  [1] there.txt" in w.transcript.plain_text()
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    w.transcript.action.emit("cite", a.id, 1)
    dialog = w.transcript.attachments.dialog
    assert "disk" in dialog.findChild(QPlainTextEdit, "sourceText").toPlainText()
    button = dialog.findChild(QPushButton, "openSourceFile")
    assert not button.isEnabled()
    assert "imported chat" in dialog.findChild(QLabel, "sourceMissing").text()
    button.click()  # (disabled: nothing)
    assert opened == []
    dialog.close()
    # a chat exported without the passages' text (the default) comes back with their files and pages only
    b = w.store.add_message(chat.id, "assistant", "Again [1].", parent_id=q.id)
    AnswerKnowledge(w.store).record(b.id, [ProjectSource(1, str(there), None, 0, "", IMPORTED_PASSAGE)])
    w.chats.open_conversation(chat.id)
    w.transcript.finish_rendering()
    w.transcript.action.emit("cite", b.id, 1)
    shown = w.transcript.attachments.dialog.findChild(QPlainTextEdit, "sourceText")
    assert shown.toPlainText() == "" and "not exported" in shown.placeholderText()
    w.transcript.attachments.dialog.close()


def _birds_chat(qtbot: QtBot, w: MainWindow, tmp_path: Path, docs: Path) -> tuple[Path, int, list[KnowledgeUsed]]:
    """A project "Birds" over `docs` with a word-meaning embedding model, indexed, and a new chat in it:
    the model's file, the project's folder id, and the knowledge each answer is told (filled as they come)."""
    models = AppPaths(tmp_path / "data", tmp_path / "config").default_models_dir
    model = write_word_bert(models / "words.gguf", {"▁heron": "bird", "▁egret": "bird", "▁river": "water", "▁the": ""})
    store = ProjectStore(w.store)
    project = store.create("Birds", embedding_model="words.gguf")
    store.add_source(project.folder_id, str(docs))
    w.chats.reload_conversations()
    with qtbot.waitSignal(w.projects.indexing.finished, timeout=WAIT_MS):
        w.projects.indexing.run(project.folder_id)  # (the passages embedded with the project's model)
    w.conversations.list.setCurrentIndex(w.conversations.folder_index(project.folder_id))
    w.chats.new_chat()
    used: list[KnowledgeUsed] = []
    w.bridge.knowledge.connect(lambda _rid, event: used.append(event))
    return model, project.folder_id, used


def test_the_project_s_embedding_model_ranks_the_passages_and_one_gone_is_said(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "herons.txt").write_text("the heron by the river\n")
    (docs / "boats.txt").write_text("a boat on the lake\n")
    fake = FakeBackend(script=["Herons [1]."])
    w = make_loaded_window(fake)
    model, _folder_id, used = _birds_chat(qtbot, w, tmp_path, docs)
    send(qtbot, w, "Where do egrets stand?")  # (no word of the passage: found by its meaning)
    assert "vectors" in used[-1].ranked_by and not used[-1].problems
    assert str(docs / "herons.txt") in [s.file_path for s in used[-1].sources]  # (by words: none found)
    assert "meaning" in w.side.metrics.project_why.sources.text()

    model.unlink()  # the model gone: the passages found by their words, and said
    send(qtbot, w, "Where is the heron?")
    assert "vectors" not in used[-1].ranked_by and used[-1].problems
    assert used[-1].problems[0] in w.side.metrics.project_why.sources.text()


def test_an_index_that_cannot_be_opened_is_said_and_the_models_are_kept_between_answers(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "herons.txt").write_text("the heron by the river\n")
    fake = FakeBackend(script=["Herons [1]."])
    w = make_loaded_window(fake)
    _model, folder_id, used = _birds_chat(qtbot, w, tmp_path, docs)
    indexing = w.projects.indexing
    kept = w.projects.answering.models
    send(qtbot, w, "Where do egrets stand?")
    send(qtbot, w, "Where is the heron?")
    assert all("vectors" in u.ranked_by for u in used[-2:]) and kept.loads == 1  # (loaded once, kept)

    index = w.projects.indexing.index_path(folder_id)
    indexing.close()  # (the indexer lets its index go; the window's answers open their own)
    assert indexing.join(WAIT_MS / 1000)
    for extra in (Path(f"{index}-wal"), Path(f"{index}-shm")):
        extra.unlink(missing_ok=True)
    index.write_bytes(b"not a knowledge index " * 200)  # (damaged)
    send(qtbot, w, "Where is the heron?")
    assert used[-1].sources == () and len(used[-1].problems) == 1
    assert "could not be read" in used[-1].problems[0]
    assert used[-1].problems[0] in w.side.metrics.project_why.sources.text()
