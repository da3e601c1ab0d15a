"""The window's Parameters ▸ "Answer as JSON": per chat, with an optional JSON schema checked as it is
typed (what is wrong said under the field), saved with the chat's parameters; the answer is
grammar-constrained JSON and its metrics line says "valid JSON". Real window, real tiny model."""

from __future__ import annotations

import json
from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.grammar.json_check import json_problem
from tests.helpers.json_schemas import PERSON
from tests.helpers.window import load, send, set_max_tokens


def type_schema(qtbot: QtBot, w: MainWindow, text: str) -> None:
    box = w.side.params.json_answer
    with qtbot.waitSignal(box.checked, timeout=10_000):  # checked off the GUI thread, after a pause in typing
        box.schema.setPlainText(text)


def test_answer_as_json_with_a_schema(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    box = w.side.params.json_answer
    assert not box.enabled.isChecked() and box.schema.isHidden()
    set_max_tokens(w, 400)
    w.side.params.temperature.setValue(1.0)
    w.side.params.seed.setValue(3)
    send(qtbot, w, "Describe a person.")  # a chat to keep the setting with
    cid = w.controller.conversation_id
    assert "valid JSON" not in w.transcript.plain_text()  # free text: no badge
    box.enabled.setChecked(True)
    assert not box.schema.isHidden()
    assert w.store.conversation(cid).params["response_format"] == {"type": "json_object"}

    type_schema(qtbot, w, '{"type": "object", "properties": {')  # unfinished: said in plain words
    assert not box.error.isHidden() and "The schema is not valid JSON (line 1" in box.error.text()
    assert "any JSON object" in box.error.text()
    assert w.side.params.params().response_format == {"type": "json_object"}  # not used
    type_schema(qtbot, w, '{"type": "martian"}')
    assert "cannot be used to constrain the answer" in box.error.text()
    type_schema(qtbot, w, json.dumps(PERSON, indent=2))
    assert box.error.isHidden()
    saved = w.store.conversation(cid).params["response_format"]
    assert saved["type"] == "json_schema" and saved["json_schema"]["schema"] == PERSON

    send(qtbot, w, "Another one.")
    answer = w.store.thread(cid)[-1]
    assert json_problem(answer.content, PERSON) is None, answer.content
    assert answer.metrics["json_check"] == "valid"
    assert "valid JSON" in w.transcript.plain_text()  # the badge in the metrics line

    # per chat: a new chat starts without it, and the first chat has it back when reopened
    w.chats.new_chat()
    assert not box.enabled.isChecked() and w.side.params.params().response_format is None
    w.chats.open_conversation(cid)
    assert box.enabled.isChecked() and json.loads(box.schema.toPlainText()) == PERSON
    assert box.error.isHidden()
    assert w.side.params.params().response_format == saved


def test_an_answer_cut_short_is_not_valid_json(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    w.side.params.json_answer.enabled.setChecked(True)
    # (a schema no 4 tokens can satisfy: any JSON object could be a finished "{}" in two)
    type_schema(qtbot, w, json.dumps(PERSON))
    set_max_tokens(w, 4)
    send(qtbot, w, "Describe a person.")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.metrics["stop_reason"] == "length" and answer.metrics["json_check"] == "not JSON"
    assert "not valid JSON: not JSON" in w.transcript.plain_text()
    # Continue would put a second document after the cut one: the window says what to do instead
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=20_000):
        w.transcript.action.emit("continue", answer.id, 0)  # the Continue link
    assert w.banner.isVisible() and "cannot be continued" in w.banner.text() and "max tokens" in w.banner.text()
    assert w.store.message(answer.id).content == answer.content  # the cut answer is kept as it was
