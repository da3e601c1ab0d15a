"""Continue streams the rest of an answer right after its text: the metrics line of the part before
("… · stopped") and the Read line of its files go while it streams (they sat between the two halves of a
sentence), and the whole answer gets them again at the end; a character cut by max tokens is completed,
never saved as U+FFFD. Real window, a fake engine (the real runtime for the cut character)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.gguf_factory import TinySpec, says, write_tiny_model
from tests.helpers.window import ANSWER_TIMEOUT, load, send, set_max_tokens, start_endless_answer


def test_the_old_metrics_line_goes_while_the_continuation_streams(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = start_endless_answer(qtbot, make_window)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.controller.stop()
    qtbot.waitUntil(lambda: "· stopped" in w.transcript.plain_text(), timeout=ANSWER_TIMEOUT)
    answer = w.store.thread(w.controller.conversation_id)[-1]
    before = len(w.transcript.plain_text())
    w.transcript.action.emit("continue", answer.id, 0)
    qtbot.waitUntil(lambda: len(w.transcript.plain_text()) > before + 100, timeout=ANSWER_TIMEOUT)
    text = w.transcript.plain_text()
    assert "stopped" not in text and "TTFT" not in text, text[-300:]  # (the line said both)
    assert text.rstrip().endswith(w.controller._stream.text.rstrip()[-20:])  # the continuation is last
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.controller.stop()
    qtbot.waitUntil(lambda: w.transcript.plain_text().count("TTFT") == 1, timeout=ANSWER_TIMEOUT)


def test_continuing_an_answer_that_ends_in_a_code_block_keeps_the_block(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """The code card is a table: removing the metrics line must not take it along."""
    backend = FakeBackend(script=["Here it is:\n\n", "```python\n", "print(1)\n", "```\n"])
    w = make_window(lambda _ref: backend)
    load(qtbot, w)
    send(qtbot, w, "code please")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert "print(1)" in w.transcript.plain_text() and "TTFT" in w.transcript.plain_text()
    backend.script = ["And ", "more ", "text."]
    backend.delay_s = 0.05
    w.transcript.action.emit("continue", answer.id, 0)
    qtbot.waitUntil(lambda: "And" in w.transcript.plain_text(), timeout=ANSWER_TIMEOUT)
    text = w.transcript.plain_text()
    assert "print(1)" in text and "Here it is:" in text and "TTFT" not in text, text[-300:]
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=ANSWER_TIMEOUT)


def test_a_continuation_streams_in_place_above_the_read_line(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    """Issue 28, item 1: an answer made with a file ends with its "Read:" line; the continuation was drawn
    below that line until it finished. It streams right after the answer's text, in its last paragraph
    (a word it cut is whole again at once), and the Read line comes back once, below the whole answer."""
    backend = FakeBackend(script=["Ember ", "streams ", "tok"])
    w = make_window(lambda _ref: backend)
    load(qtbot, w)
    notes = tmp_path / "notes.txt"
    notes.write_text("Shopping list\nBread\n", encoding="utf-8")
    w.composer.attach_paths([notes])
    bar = w.composer.attachments
    qtbot.waitUntil(lambda: bool(bar.items) and not bar.busy, timeout=ANSWER_TIMEOUT)
    set_max_tokens(w, 3)
    send(qtbot, w, "What does it say?")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.content == "Ember streams tok" and "Read: notes.txt" in w.transcript.plain_text()
    backend.script = ["ens ", "and ", "more."]
    backend.delay_s = 0.3
    w.transcript.action.emit("continue", answer.id, 0)
    qtbot.waitUntil(lambda: "tokens" in w.transcript.plain_text(), timeout=ANSWER_TIMEOUT)
    text = w.transcript.plain_text()
    assert "Ember streams tokens" in text  # in place: the word cut in two is whole
    assert "Read:" not in text and text.rstrip().endswith("tokens"), text[-200:]  # nothing below it
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=ANSWER_TIMEOUT)
    w.transcript.finish_rendering()
    text = w.transcript.plain_text()
    assert "Ember streams tokens and more." in text and text.count("Read: notes.txt") == 1
    assert text.index("Read: notes.txt") > text.index("and more.")


def test_a_continuation_after_a_space_starts_after_it(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """The rendered answer ends without its last space or line break; the continuation is not glued to it."""
    backend = FakeBackend(script=["One ", "two\n\n"])
    w = make_window(lambda _ref: backend)
    load(qtbot, w)
    set_max_tokens(w, 2)
    send(qtbot, w, "Count")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    backend.script = ["three ", "four"]
    backend.delay_s = 0.3
    w.transcript.action.emit("continue", answer.id, 0)
    qtbot.waitUntil(lambda: "three" in w.transcript.plain_text(), timeout=ANSWER_TIMEOUT)
    assert "One two\n\nthree" in w.transcript.plain_text()
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=ANSWER_TIMEOUT)


def test_a_character_cut_by_max_tokens_is_not_saved_broken_and_continue_completes_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths, tmp_path: Path
) -> None:
    """Issue 28, item 1, in the window with the real runtime: the scripted model writes 日 as three byte
    tokens; max tokens cut it after the first. Nothing shows or is saved as U+FFFD (the export neither),
    and Continue completes the character: the answer reads "hello日", not "hello��"."""
    script = says("▁hello", "<0xE6>", "<0x97>", "<0xA5>", "</s>")
    write_tiny_model(paths.default_models_dir / "cut.gguf", TinySpec(script=script))
    w = make_window()
    load(qtbot, w, "cut.gguf")
    w.side.params.temperature.setValue(0.0)
    set_max_tokens(w, 2)
    send(qtbot, w, "Say hello in Japanese.")
    cid = w.controller.conversation_id
    cut = w.store.thread(cid)[-1]
    assert cut.content == " hello" and cut.metrics["held_utf8"] == "e6" and cut.metrics["stop_reason"] == "length"
    assert "\ufffd" not in w.transcript.plain_text()
    w.chats.exports.export(tmp_path / "cut.json", "json")
    assert "\\ufffd" not in (tmp_path / "cut.json").read_text(encoding="utf-8")
    set_max_tokens(w, 20)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        w.transcript.action.emit("continue", cut.id, 0)
    w.transcript.finish_rendering()
    whole = w.store.message(cut.id)
    assert whole.content == " hello日" and whole.metrics["stop_reason"] == "stop" and not whole.metrics["held_utf8"]
    assert "hello日" in w.transcript.plain_text() and "\ufffd" not in w.transcript.plain_text()
