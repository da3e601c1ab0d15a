"""The tool cards in the transcript: a consent card (tool, source, pretty JSON arguments, Allow once /
Always allow in this chat / Deny, reached and run from the keyboard), a call's card as it runs and
when it is done (duration, result folded when long, errors, denied, not valid), the cap's sentence,
in the light and the dark theme. Messages come from a real chat store on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QTextCursor
from pytestqt.qtbot import QtBot

from ember_chat.app.style.theme import DARK, LIGHT
from ember_chat.app.transcript.view import TranscriptView
from ember_chat.engine.core.tools import InvalidCall, ToolCall, ToolResult, tool_limit_message
from ember_chat.engine.storage.conversations import ConversationStore

ADD = ToolCall("call00001", "calculator", {"expression": "2+3", "precision": 2})
LIST = ToolCall("call00002", "list_files", {"folder": "notes"})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    s = ConversationStore(tmp_path / "chats.db")
    yield s
    s.close()


@pytest.fixture
def view(qtbot: QtBot) -> TranscriptView:
    v = TranscriptView(LIGHT)
    qtbot.addWidget(v)
    v.resize(900, 700)
    v.show()
    return v


def answer(store: ConversationStore, calls: list[ToolCall | InvalidCall]) -> tuple[int, int]:
    conv = store.create_conversation("tools")
    q = store.add_message(conv.id, "user", "What is 2+3?")
    a = store.add_message(conv.id, "assistant", "Let me compute that.", parent_id=q.id)
    store.set_tool_calls(a.id, calls)
    return conv.id, a.id


def show(view: TranscriptView, store: ConversationStore, cid: int) -> str:
    view.show_thread(*store.thread_with_branches(cid))
    view.finish_rendering()
    return view.plain_text()


def hrefs(view: TranscriptView) -> list[str]:
    return [href for href, _tip in view.links()]


def test_a_consent_card_shows_the_call_and_asks(qtbot: QtBot, view: TranscriptView, store: ConversationStore) -> None:
    cid, aid = answer(store, [ADD])
    store.set_tool_state(aid, ADD.id, ADD.name, "asking", source="Built-in")
    text = show(view, store, cid)
    assert "\ufffc calculator" in text and "from Built-in" in text and "Waiting for your permission" in text
    assert '"expression": "2+3",\n  "precision": 2' in text  # pretty JSON, one line per key
    assert "Allow once" in text and "Always allow in this chat" in text and "Deny" in text
    assert text.index("Let me compute that.") < text.index("\ufffc calculator")  # below the answer's text
    assert view.last_announcement.startswith("The model asks to run calculator.")  # screen readers are told
    consent = [f"ember:toolallow/{aid}/0", f"ember:toolalways/{aid}/0", f"ember:tooldeny/{aid}/0"]
    assert [h for h in hrefs(view) if h.startswith("ember:tool")] == consent
    # the keyboard: Shift+Tab from the end walks the buttons up (Deny first), Enter runs one
    actions: list[tuple[str, int, int]] = []
    view.action.connect(lambda verb, mid, arg: actions.append((verb, mid, arg)))
    view.setFocus(Qt.FocusReason.OtherFocusReason)
    end = QTextCursor(view.document())
    end.movePosition(QTextCursor.MoveOperation.End)
    view.setTextCursor(end)
    qtbot.keyClick(view, Qt.Key.Key_Backtab)
    assert view.textCursor().selectedText().strip("\u00a0") == "Deny"
    qtbot.keyClick(view, Qt.Key.Key_Backtab)
    assert view.textCursor().selectedText().strip("\u00a0") == "Always allow in this chat"
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert actions == [("toolalways", aid, 0)]


def test_a_call_runs_then_shows_its_result_and_duration(view: TranscriptView, store: ConversationStore) -> None:
    cid, aid = answer(store, [ADD])
    store.set_tool_state(aid, ADD.id, ADD.name, "running", source="Built-in", decision="once")
    text = show(view, store, cid)
    assert "Running…" in text and "Allow once" not in text
    store.set_tool_result(aid, ToolResult(ADD.id, ADD.name, "5", duration_ms=0.2), source="Built-in")
    assert "Done · under 1 ms · allowed once" in show(view, store, cid)
    store.set_tool_result(aid, ToolResult(ADD.id, ADD.name, "5", duration_ms=12.4), source="Built-in")
    text = show(view, store, cid)
    assert text.rstrip().endswith("tools 12 ms")  # the call's time, apart from the generation's figures
    assert "Done · 12 ms · allowed once" in text and "Result\n5\n" in text and "Running" not in text
    assert not [h for h in hrefs(view) if h.startswith("ember:tool")]  # nothing to decide any more


def test_a_long_result_is_folded_with_a_toggle(qtbot: QtBot, view: TranscriptView, store: ConversationStore) -> None:
    cid, aid = answer(store, [LIST])
    listing = "\n".join(f"file{i:02}.txt" for i in range(40))
    store.set_tool_result(
        aid, ToolResult(LIST.id, LIST.name, listing, duration_ms=3), source="Built-in", decision="auto"
    )
    text = show(view, store, cid)
    assert "file07.txt" in text and "file08.txt" not in text and "▸ Show all (40 lines)" in text
    assert "not asked" in text
    fold = f"ember:toolfold/{aid}/0"
    assert fold in hrefs(view)
    actions: list[str] = []
    view.action.connect(lambda verb, mid, arg: actions.append(verb))
    view.setFocus(Qt.FocusReason.OtherFocusReason)
    end = QTextCursor(view.document())
    end.movePosition(QTextCursor.MoveOperation.End)
    view.setTextCursor(end)
    qtbot.keyClick(view, Qt.Key.Key_Backtab)
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert actions == ["toolfold"]
    text = show(view, store, cid)  # (the controller shows the thread again)
    assert "file39.txt" in text and "▾ Fold the result" in text
    view.tools.toggle(aid, 0)
    assert "file39.txt" not in show(view, store, cid)


def test_invalid_denied_failed_and_capped_calls(view: TranscriptView, store: ConversationStore) -> None:
    bad = InvalidCall(ToolCall("call00003", "calculator", {"expr": 1}), "expression is required")
    over = ToolCall("call00004", "calculator", {"expression": "1"})
    cid, aid = answer(store, [ADD, bad, LIST, over])
    store.set_tool_result(aid, ToolResult(ADD.id, ADD.name, "The user denied this call.", True), "Built-in", "deny")
    store.set_tool_result(aid, bad.result(), "Built-in", "invalid")
    store.set_tool_result(
        aid, ToolResult(LIST.id, LIST.name, "The folder notes is not one you picked.", True, 4.0), "Built-in", "once"
    )
    store.set_tool_result(aid, ToolResult(over.id, over.name, tool_limit_message(3), True), "Built-in", "cap")
    text = show(view, store, cid)
    assert text.count("  ·  from Built-in") == 4
    assert "Denied" in text
    assert "Not run: the call was not valid" in text and "expression is required" in text
    assert "Error · 4 ms" in text and "The folder notes is not one you picked." in text
    assert "Not run: too many calls in one answer" in text
    # the sentence that ended the answer, once, below the cards; then the time the calls ran
    assert text.rstrip().endswith(tool_limit_message(3).rstrip() + "\ntools 4 ms")
    assert text.count("Raise the limit") == 1


def test_cards_follow_the_theme(view: TranscriptView, store: ConversationStore) -> None:
    cid, aid = answer(store, [ADD])
    store.set_tool_state(aid, ADD.id, ADD.name, "asking", source="Built-in")
    for colors in (LIGHT, DARK):
        view.set_colors(colors)
        show(view, store, cid)
        tables = [f for f in view.document().rootFrame().childFrames() if f.format().background().color().isValid()]
        backgrounds = {f.format().background().color().name() for f in tables}
        assert QColor(colors.code_bg).name() in backgrounds
        allow = next(
            it.fragment().charFormat()
            for b in _blocks(view)
            for it in _fragments(b)
            if it.fragment().charFormat().anchorHref() == f"ember:toolallow/{aid}/0"
        )
        assert allow.background().color().name() == QColor(colors.accent).name()


def _blocks(view: TranscriptView) -> Iterator:
    block = view.document().begin()
    while block.isValid():
        yield block
        block = block.next()


def _fragments(block) -> Iterator:
    it = block.begin()
    while not it.atEnd():
        yield it
        it += 1
