"""One model, one name (issue 28, item 13): the chat starter was "SmolLM2 135M (chat starter)" in the
picker, "SmolLM2 135M Instruct (starter: chat)" in the Model Manager, "… (chat model)" in `models list`
and "Smollm2 135M 8k Lc100K Mix1 Ep2" (its GGUF's own name) in the command line's messages and the
metrics; Gemma was "Gemma 3 270M (base model)" and "Gemma 3 270m". Each place now says the engine's
display name (engine/models/names.py); the API's model id stays what it was. The real starters, the
real window, the installed `ember-chat` (models list, run, serve with the openai client)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.models.names import display_name
from ember_chat.engine.models.starter import BASE_STARTER, CHAT_STARTER
from tests.helpers.attachment_files import image_bytes
from tests.helpers.cli import cli
from tests.helpers.peer_servers import ember_server
from tests.helpers.window import LOAD_TIMEOUT, load, send, set_max_tokens

CHAT = "SmolLM2 135M (chat starter)"
BASE = "Gemma 3 270M (base model)"


def test_the_display_name_of_each_starter_by_alias_and_by_file() -> None:
    assert display_name("starter") == display_name(CHAT_STARTER.file_name) == CHAT
    assert display_name("gemma-3-270m") == display_name(BASE_STARTER.file_name) == BASE
    # any other model keeps its library name; a download that shares a starter's file name too
    assert display_name("bartowski/Llama-3.2-1B-GGUF/Llama-3.2-1B-Q4_K_M.gguf").endswith("Q4_K_M.gguf")
    assert display_name(f"someone/repo/{BASE_STARTER.file_name}") == f"someone/repo/{BASE_STARTER.file_name}"
    assert display_name("remote:lab/gpt-4o-mini") == "remote:lab/gpt-4o-mini"


def test_models_list_names_the_starters_as_the_window_does(tmp_path: Path) -> None:
    rows = json.loads(cli("models", "list", "--json", data_dir=tmp_path).stdout)
    named = {r["name"]: r["description"] for r in rows}
    assert named["starter"] == CHAT and named["gemma-3-270m"] == BASE
    out = cli("models", "list", data_dir=tmp_path).stdout
    assert CHAT in out and BASE in out and "(chat model)" not in out and "text completion" not in out


@pytest.mark.slow
def test_the_picker_the_manager_and_an_answer_name_the_starter_alike(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    picker = {w.model_picker.itemData(i): w.model_picker.itemText(i) for i in range(w.model_picker.count())}
    assert picker["starter"] == CHAT and picker["gemma-3-270m"] == BASE
    mm = w.models.model_manager()
    with qtbot.waitSignal(mm.installed_listed, timeout=LOAD_TIMEOUT):
        mm.show()
    rows = [mm.installed.item(r, 0) for r in range(mm.installed.rowCount())]
    named = {item.data(Qt.ItemDataRole.UserRole).name: item.text() for item in rows}
    assert named["starter"] == CHAT and named["gemma-3-270m"] == BASE
    mm.close()
    load(qtbot, w, "starter")
    assert w.model.name == CHAT and w.model_picker.currentText() == CHAT
    set_max_tokens(w, 2)
    send(qtbot, w, "Hi")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.metrics is not None and answer.metrics["model"] == CHAT  # the answer's metrics
    header = w.transcript.document().find("Ember").block().text()
    assert CHAT in header  # the answer's header


@pytest.mark.slow
def test_a_command_line_error_names_the_starter_by_its_display_name(chat_starter_model: Path, tmp_path: Path) -> None:
    picture = tmp_path / "picture.png"
    picture.write_bytes(image_bytes("PNG"))
    out = cli("run", "--model", str(chat_starter_model), "--prompt", "What is this?", "--attach", str(picture),
              "--max-tokens", "2", "--threads", "1", data_dir=tmp_path / "data")  # fmt: skip
    assert out.returncode != 0
    assert f"{CHAT} cannot see images" in out.stderr, out.stderr
    assert "Smollm2" not in out.stderr


@pytest.mark.slow
def test_the_api_metrics_label_the_starter_and_its_model_id_is_unchanged(chat_starter_model: Path) -> None:
    with ember_server(chat_starter_model, threads=1, n_ctx=512) as url:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        try:
            model = client.models.list().data[0].id  # (the served model: listed first)
            assert model == CHAT_STARTER.file_name  # the id a client sends: as before
            response = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2, temperature=0
            )
            assert response.model == model
            assert (response.model_extra or {})["ember"]["model"] == CHAT  # the human label
        finally:
            client.close()
