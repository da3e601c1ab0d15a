"""A comparison whose prompt goes while it runs (review finding 6), in the real window over a real SQLite
file: the prompt deleted, its chat moved to the Trash, or another database restored from a backup. The
run stops, the dialog says why (it never waits for an end that does not come), nothing is written into
rows that are not the comparison's, and no error is raised in the window's timer."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.backups.dialog import DAILY_KEY
from ember_chat.app.compare.dialog import CompareDialog
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.compare_window import running_comparison
from tests.helpers.sse_server import FakeOpenAI
from tests.helpers.window import ANSWER_TIMEOUT


@pytest.fixture
def paths(endless_models_paths: AppPaths) -> AppPaths:
    """Two tiny models that never end on their own: tests/app/conftest.py's endless_models_paths."""
    return endless_models_paths


def _answers(w: MainWindow) -> list[tuple[int, str]]:
    rows = w.store.shared_connection()[0].execute("SELECT comparison_id, content FROM comparison_answers ORDER BY id")
    return [(r[0], r[1]) for r in rows]


def test_deleting_the_prompt_stops_the_run_and_the_dialog_says_so(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    dialog, prompt = running_comparison(qtbot, w, peer)
    with qtbot.waitSignal(w.compare.run_lost, timeout=ANSWER_TIMEOUT) as lost:
        undo = w.store.organise.delete_messages(prompt)  # (the message's Delete action)
    assert "deleted" in lost.args[0] and lost.args[0] in dialog.prompt.text()
    qtbot.waitUntil(lambda: not w.compare.running, timeout=ANSWER_TIMEOUT)
    assert not dialog.running and not dialog.stop_button.isEnabled()
    assert [c.status.text() for c in dialog.columns] == ["Stopped.", "Stopped."]
    assert not any(c.keep.isEnabled() for c in dialog.columns) and dialog.columns[0].text  # what streamed stays
    w.store.organise.undo(undo)  # the prompt and its comparison come back: nothing was written meanwhile
    (stored,) = w.store.comparisons.of_prompt(prompt)
    assert [a.content for a in stored.answers] == ["", ""]


def test_trashing_the_chat_stops_the_run(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    dialog, prompt = running_comparison(qtbot, w, peer)
    with qtbot.waitSignal(w.compare.run_lost, timeout=ANSWER_TIMEOUT) as lost:
        w.store.organise.trash_chats([w.store.message(prompt).conversation_id])
    assert "Trash" in lost.args[0]
    qtbot.waitUntil(lambda: not w.compare.running, timeout=ANSWER_TIMEOUT)
    assert not dialog.running


def test_a_restore_during_a_run_stops_it_before_the_database_changes(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    gone = w.store.create_conversation("compared before the backup")
    w.store.comparisons.create(gone.id, None, ["x", "y"], {})
    backup = w.backups.manager.backup("manual")  # its comparison's answers get the ids the run's will have
    w.store.delete_conversation(gone.id)
    dialog, _prompt = running_comparison(qtbot, w, peer)
    assert [a.id for a in dialog.comparison.answers] == [1, 2]
    with qtbot.waitSignal(w.backups.restored, timeout=ANSWER_TIMEOUT):
        w.backups.restore(backup)
    qtbot.waitUntil(lambda: not w.compare.running, timeout=ANSWER_TIMEOUT)
    assert not dialog.running and "restored" in dialog.prompt.text()
    assert _answers(w) == [(1, ""), (1, "")]  # the restored comparison's answers stay as they were


def _earlier(qtbot: QtBot, w: MainWindow, title: str = "Compared") -> tuple[CompareDialog, int, int]:
    """A chat with a stored comparison of two answers, shown again in an idle dialog; (dialog, chat, prompt)."""
    chat = w.store.create_conversation(title)
    prompt = w.store.add_message(chat.id, "user", f"what about {title}?")
    comparison = w.store.comparisons.create(chat.id, prompt.id, ["m1", "m2"], {"seed": 1})
    for a in comparison.answers:
        w.store.comparisons.set_answer(a.id, f"{title}: answer of {a.model}", None, None)
    w.chats.reload_conversations()
    dialog = w.compare.open(prompt.id)
    with qtbot.waitSignal(dialog.earlier_shown, timeout=5000):
        dialog.earlier_box.setCurrentIndex(1)  # the user picks the earlier comparison
    assert dialog.columns[0].keep.isEnabled()
    return dialog, chat.id, prompt.id


def test_keep_is_refused_when_the_chat_went_to_the_trash_or_the_prompt_was_deleted(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    dialog, chat, prompt = _earlier(qtbot, w)
    w.store.organise.trash_chats([chat])  # (ember-chat chats in a terminal, while the dialog stays open)
    dialog.columns[0].keep.click()
    rows = w.store.shared_connection()[0].execute("SELECT role FROM messages WHERE conversation_id = ?", (chat,))
    assert [r[0] for r in rows] == ["user"]  # nothing added to a chat in the Trash
    assert w.banner.isVisible() and "Trash" in w.banner.label.text()
    assert w.store.comparisons.of_prompt(prompt)[0].answers[0].kept_message_id is None
    dialog.close()

    dialog, chat, prompt = _earlier(qtbot, w, "Other")
    w.store.organise.delete_messages(prompt)
    dialog.columns[1].keep.click()
    rows = w.store.shared_connection()[0].execute("SELECT role FROM messages WHERE conversation_id = ?", (chat,))
    assert [r[0] for r in rows] == [] and "deleted" in w.banner.label.text()


def test_after_delete_all_chats_an_open_comparison_keeps_nothing_in_a_new_chat(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    dialog, _chat, _prompt = _earlier(qtbot, w)
    with qtbot.waitSignal(w.tasks.settled, timeout=ANSWER_TIMEOUT):
        w.chats.organise.delete_all(confirmed=True)
    # a new chat and comparison get the ids the deleted ones had
    new = w.store.create_conversation("New")
    question = w.store.add_message(new.id, "user", "a new question")
    fresh = w.store.comparisons.create(new.id, question.id, ["m3", "m4"], {})
    w.store.comparisons.set_answer(fresh.answers[0].id, "the new comparison's answer", None, None)
    assert dialog.comparison is None and dialog.forgotten  # Delete all chats: the open dialog forgot it
    assert dialog.prompt.text() == "The comparison stopped: all chats were deleted."
    w.compare.keep(0)
    rows = w.store.shared_connection()[0].execute("SELECT role FROM messages WHERE conversation_id = ?", (new.id,))
    assert [r[0] for r in rows] == ["user"]  # the old dialog's Keep adds nothing to the new chat


def test_a_restore_leaves_an_open_comparison_with_nothing_to_keep(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    qtbot.waitUntil(lambda: not w.tasks.pending(DAILY_KEY))
    other = w.store.create_conversation("in the backup")
    other_prompt = w.store.add_message(other.id, "user", "the backup's question")
    stored = w.store.comparisons.create(other.id, other_prompt.id, ["x", "y"], {})
    w.store.comparisons.set_answer(stored.answers[0].id, "the backup's answer", None, None)
    backup = w.backups.manager.backup("manual")  # its comparison has the id the dialog's will have
    w.store.delete_conversation(other.id)
    dialog, _chat, _prompt = _earlier(qtbot, w)
    assert dialog.comparison.id == stored.id
    with qtbot.waitSignal(w.backups.restored, timeout=ANSWER_TIMEOUT):
        w.backups.restore(backup)
    assert dialog.comparison is None and "restored" in dialog.prompt.text()
    assert not any(c.keep.isEnabled() for c in dialog.columns) and not dialog.start_button.isEnabled()
    w.compare.keep(0)
    rows = w.store.shared_connection()[0].execute("SELECT role FROM messages WHERE conversation_id = ?", (other.id,))
    assert [r[0] for r in rows] == ["user"]  # nothing kept into the restored chat


def test_a_model_picked_during_a_comparison_stays_loaded_after_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow], peer: FakeOpenAI
) -> None:
    w = make_window()
    # tiny.gguf was the window's model: unloaded for the run
    dialog, _prompt = running_comparison(qtbot, w, peer, local=True)
    assert w.model is None
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=30_000):
        w.models.load_model("other.gguf")  # the user picks another model meanwhile
        dialog.stop_button.click()
    qtbot.waitUntil(lambda: not w.compare.running, timeout=ANSWER_TIMEOUT)
    qtbot.waitUntil(lambda: not w.models.loading, timeout=ANSWER_TIMEOUT)  # (a load the run's end started)
    assert w.models.loaded_name == "other.gguf" and w.model is not None  # not tiny.gguf loaded back over it
    assert w.model_picker.currentData() == "other.gguf"
