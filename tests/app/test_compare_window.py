"""Compare models in the real window: "Compare…" on a message, two tiny models with other weights
chosen, their columns streaming with metrics, the diff toggle, "Keep this one" as a new branch with its
metrics (the transcript's branch arrows), the comparison kept in the SQLite file and shown again after
the window is reopened; the window's model loaded back afterwards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.style.theme import LIGHT
from ember_chat.engine.storage.connections import Connection, remote_model_name
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.compare_window import open_compare, running_comparison
from tests.helpers.peer_servers import free_port
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk, usage_chunk
from tests.helpers.transcript import anchors
from tests.helpers.window import ANSWER_TIMEOUT, LOAD_TIMEOUT, load, send, set_max_tokens


@pytest.fixture
def paths(endless_models_paths: AppPaths) -> AppPaths:
    """Two tiny models that never end on their own: tests/app/conftest.py's endless_models_paths."""
    return endless_models_paths


def test_compare_two_models_keep_one_as_a_branch_and_see_it_again(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 10)
    w.side.params.seed.setValue(4242)
    send(qtbot, w, "hello there")
    cid = w.controller.conversation_id
    question, first_answer = w.store.thread(cid)

    dialog = open_compare(qtbot, w, first_answer.id)  # on the answer: its question is the prompt
    assert "hello there" in dialog.prompt.text()
    assert {"other.gguf", "tiny.gguf"} <= {n for _l, n in w.model_bar.choices()}  # (and the starters)
    assert len(dialog.checked()) == 2 and dialog.checked()[0] == "tiny.gguf"  # the loaded one, and another
    assert dialog.start_button.isEnabled()
    dialog.set_checked(["tiny.gguf"])
    assert not dialog.start_button.isEnabled() and "at least two" in dialog.hint.text()
    dialog.set_checked(["tiny.gguf", "other.gguf"])

    states: list[str] = []
    w.model_state_changed.connect(states.append)
    with qtbot.waitSignal(w.compare.run_ended, timeout=ANSWER_TIMEOUT) as ended:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    comparison = ended.args[0]
    a, b = comparison.answers
    assert [a.model, b.model] == ["tiny.gguf", "other.gguf"]
    assert a.content and b.content and a.content != b.content  # other weights, same seed and prompt
    assert a.metrics["seed"] == b.metrics["seed"] == comparison.settings["seed"] == 4242
    assert a.metrics["output_tokens"] == b.metrics["output_tokens"] == 10
    for col, ans in zip(dialog.columns, comparison.answers, strict=True):
        assert col.text == ans.content == col.answer.toPlainText()
        assert "TTFT" in col.metrics.text() and "tok/s" in col.metrics.text() and "10 tokens" in col.metrics.text()
        assert col.keep.isEnabled()
    # the window's model made room and came back
    qtbot.waitUntil(lambda: w.controller.model_ready, timeout=LOAD_TIMEOUT)
    assert "none" in states and states[-1] == "ready" and w.models.loaded_name == "tiny.gguf"

    # the diff against the first column marks what the second says differently
    dialog.diff.setChecked(True)
    assert (
        "line-through" in dialog.columns[1].answer.toHtml() or "background-color" in dialog.columns[1].answer.toHtml()
    )
    assert dialog.columns[1].answer.toPlainText().replace(" ", "") != ""
    w.set_theme("dark")  # a theme switch while the dialog is open: the marks take the dark theme's colours
    qtbot.waitUntil(lambda: dialog.colors.name == "dark", timeout=5000)
    assert all(c.colors.name == "dark" for c in dialog.columns)
    assert w.colors.error in dialog.columns[1].answer.toHtml() and LIGHT.error not in dialog.columns[1].answer.toHtml()
    w.set_theme("light")
    dialog.diff.setChecked(False)
    assert dialog.columns[1].answer.toPlainText() == b.content

    # keep the second: a sibling of the first answer, with its metrics, and the chat shows it
    with qtbot.waitSignal(w.compare.kept, timeout=5000) as kept:
        qtbot.mouseClick(dialog.columns[1].keep, Qt.MouseButton.LeftButton)
    kept_id = kept.args[0]
    kept_msg = w.store.message(kept_id)
    assert kept_msg.parent_id == question.id and kept_msg.content == b.content
    assert kept_msg.metrics["output_tokens"] == 10
    assert [m.id for m in w.store.siblings(kept_id)] == [first_answer.id, kept_id]
    assert w.store.thread(cid)[-1].id == kept_id  # switched to it
    assert not dialog.columns[1].keep.isEnabled() and dialog.columns[0].keep.isEnabled()
    hrefs = [x.href for x in anchors(w.transcript)]
    assert f"ember:prev/{kept_id}" in hrefs  # the branch arrows
    assert "2/2" in w.transcript.plain_text().replace(" ", "")
    dialog.close()

    # Comparisons… on the message again: the stored one is listed and shown as it was kept
    w.activateWindow()  # (the window manager's part when a dialog closes; offscreen has none)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    again = open_compare(qtbot, w, question.id)
    assert again.earlier_row.isVisible() and again.earlier_box.count() == 2
    with qtbot.waitSignal(again.earlier_shown, timeout=5000):
        again.earlier_box.setCurrentIndex(1)
    assert [c.text for c in again.columns] == [a.content, b.content]
    assert not again.columns[1].keep.isEnabled() and "Kept" in again.columns[1].keep.text()
    again.close()


def test_the_comparison_is_in_the_sqlite_file_after_reopening(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 6)
    send(qtbot, w, "tell me")
    cid = w.controller.conversation_id
    question = w.store.thread(cid)[0]
    dialog = open_compare(qtbot, w, question.id)
    dialog.set_checked(["tiny.gguf", "other.gguf"])
    with qtbot.waitSignal(w.compare.run_ended, timeout=ANSWER_TIMEOUT):
        dialog.start_button.click()
    qtbot.waitUntil(lambda: w.controller.model_ready, timeout=LOAD_TIMEOUT)
    with qtbot.waitSignal(w.compare.kept, timeout=5000):
        dialog.columns[0].keep.click()
    dialog.close()
    db = w.store.path
    w.close()
    assert w.join_background(30)
    w.store.close()

    from ember_chat.engine.storage.conversations import ConversationStore

    store = ConversationStore(db)
    (stored,) = store.comparisons.of_conversation(cid)
    assert stored.prompt_id == question.id and [x.model for x in stored.answers] == ["tiny.gguf", "other.gguf"]
    assert all(x.content and x.metrics for x in stored.answers)
    assert stored.answers[0].kept_message_id is not None and stored.answers[1].kept_message_id is None
    assert store.message(stored.answers[0].kept_message_id).content == stored.answers[0].content
    store.close()


def test_stop_ends_the_run_and_keeps_what_was_answered(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    dialog, prompt = running_comparison(qtbot, w, peer, local=True)  # (the peer stalls: only Stop ends it)
    with qtbot.waitSignal(w.compare.run_ended, timeout=ANSWER_TIMEOUT) as ended:
        qtbot.mouseClick(dialog.stop_button, Qt.MouseButton.LeftButton)
    local, remote = ended.args[0].answers
    assert local.content and local.metrics is not None
    assert remote.content == "Once" and dialog.columns[1].status.text() == "Stopped."  # what it had is kept
    qtbot.waitUntil(lambda: w.controller.model_ready, timeout=LOAD_TIMEOUT)
    # the prompt deleted while the dialog is open: Keep says so, nothing is added, nothing breaks
    conversation_id = w.store.message(prompt).conversation_id
    w.store.delete_message(prompt)
    count = len(w.store.messages(conversation_id))
    qtbot.mouseClick(dialog.columns[0].keep, Qt.MouseButton.LeftButton)
    assert "could not be added" in w.banner.text() and len(w.store.messages(conversation_id)) == count
    w.close()
    assert w.join_background(30)


def test_closing_the_window_during_a_comparison_stops_it_and_joins_its_threads(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    running_comparison(qtbot, w, peer, local=True)  # (the peer stalls)
    w.close()  # (the fixture's teardown then checks that every thread was joined)
    assert w.compare.join(30) and not w.bridge.service.running


def test_a_local_and_a_remote_model_side_by_side_and_an_unreachable_one_says_so(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    with FakeOpenAI() as fake:
        fake.stream(
            [chunk("Once", role="assistant"), chunk(" upon"), chunk(" a time", finish="stop"), usage_chunk(9, 3), DONE]
        )
        w = make_window()
        w.connections.save(Connection("peer", fake.base_url, "test-model"))
        w.connections.save(Connection("gone", f"http://127.0.0.1:{free_port()}/v1", "test-model"))
        with qtbot.waitSignal(w.models_listed, timeout=LOAD_TIMEOUT):
            w.models.reload_models()
        load(qtbot, w, "tiny.gguf")
        set_max_tokens(w, 5)
        notes = tmp_path / "notes.txt"
        notes.write_text("The cat is called Mirabelle.\n", encoding="utf-8")
        w.composer.attach_paths([notes])  # the prompt carries a file: every model gets it, as the chat sent it
        qtbot.waitUntil(lambda: bool(w.composer.attachments.items) and not w.composer.attachments.busy, timeout=10_000)
        send(qtbot, w, "a story")
        question = w.store.thread(w.controller.conversation_id)[0]
        peer, gone = remote_model_name("peer", "test-model"), remote_model_name("gone", "test-model")
        dialog = open_compare(qtbot, w, question.id)
        dialog.set_checked(["tiny.gguf", peer, gone])
        assert dialog.checked() == ["tiny.gguf", gone, peer]  # (the picker's order: connections by name)
        events: list[tuple[str, int]] = []
        shown = dialog.show_event
        dialog.show_event = lambda kind, i, v: (events.append((kind, i)), shown(kind, i, v))  # type: ignore[method-assign]
        with qtbot.waitSignal(w.compare.run_ended, timeout=ANSWER_TIMEOUT) as ended:
            dialog.start_button.click()
        local, unreachable, remote = ended.args[0].answers
        assert local.content and local.metrics["output_tokens"] == 5
        assert remote.content == "Once upon a time" and remote.metrics["output_tokens"] == 3
        body = fake.generate_requests()[0].body
        assert body["seed"] == local.metrics["seed"] and "Mirabelle" in body["messages"][-1]["content"]
        assert unreachable.error and "refused" in unreachable.error and not unreachable.content
        assert "did not answer" in dialog.columns[1].status.text() and not dialog.columns[1].keep.isEnabled()
        assert "peer" in dialog.columns[2].title.text() and "tok/s" in dialog.columns[2].metrics.text()
        assert ("loading", 0) in events and ("started", 0) in events  # the local model's load progress
        qtbot.waitUntil(lambda: w.controller.model_ready, timeout=LOAD_TIMEOUT)
        dialog.close()
        w.close()
        assert w.join_background(30)


def test_two_remote_models_leave_the_windows_model_loaded(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    with FakeOpenAI() as fake:
        fake.stream([chunk("Hi", role="assistant"), chunk(finish="stop"), usage_chunk(5, 1), DONE])
        w = make_window()
        w.connections.save(Connection("one", fake.base_url, "test-model"))
        w.connections.save(Connection("two", fake.base_url, "test-model"))
        with qtbot.waitSignal(w.models_listed, timeout=LOAD_TIMEOUT):
            w.models.reload_models()
        load(qtbot, w, "tiny.gguf")
        set_max_tokens(w, 3)
        send(qtbot, w, "hi")
        question = w.store.thread(w.controller.conversation_id)[0]
        dialog = open_compare(qtbot, w, question.id)
        dialog.set_checked([remote_model_name("one", "test-model"), remote_model_name("two", "test-model")])
        states: list[str] = []
        w.model_state_changed.connect(states.append)
        with qtbot.waitSignal(w.compare.run_ended, timeout=ANSWER_TIMEOUT) as ended:
            dialog.start_button.click()
        assert [a.content for a in ended.args[0].answers] == ["Hi", "Hi"]
        assert states == [] and w.controller.model_ready and w.bridge.service.model is not None  # never unloaded
        assert len(fake.generate_requests()) == 2
        dialog.close()
        w.close()
        assert w.join_background(30)
