"""A reasoning model in the window and through Ember's API: the thinking streams live, folds when the
answer starts, stays in the store, opens on a click, is counted in the metrics, is exported, and goes
out as `reasoning_content` to API clients."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import openai
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load, send

SCRIPT = ["<think>", "\n", "The user ", "greets me. ", "Be brief.", "</think>", "\n\n", "Hello ", "**there**", "!"]


def test_thinking_streams_folds_and_opens(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    backend = FakeBackend(script=SCRIPT, rate=40)  # a batch every token or two
    w = make_window(lambda _ref: backend)
    load(qtbot, w, "tiny.gguf")
    seen_thinking_live = []
    w.controller.streamed.connect(lambda _n: seen_thinking_live.append("Thinking…" in w.transcript.plain_text()))
    send(qtbot, w, "hi")
    assert any(seen_thinking_live)  # the thinking was shown while it streamed
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.content.startswith("<think>\nThe user greets me.")  # kept in the store
    text = w.transcript.plain_text()
    assert "▸ Thinking" in text and "Hello there!" in text
    assert "greets me" not in text  # folded
    assert answer.metrics["thinking_tokens"] == 6 and answer.metrics["ttfat_s"] >= answer.metrics["ttft_s"]
    assert "6 thinking" in text  # in the answer's metrics line
    assert w.side.metrics.thinking.text().startswith("6 tokens · answer at")
    links = dict(w.transcript.links())
    assert links[f"ember:think/{answer.id}"] == "Show the model's thinking"
    w.transcript.action.emit("think", answer.id, 0)  # the fold, clicked
    assert "The user greets me. Be brief." in w.transcript.plain_text()
    assert dict(w.transcript.links())[f"ember:think/{answer.id}"] == "Hide the model's thinking"
    w.transcript.action.emit("think", answer.id, 0)
    assert "greets me" not in w.transcript.plain_text()
    # the next turn: the window sends the stored answer; the thinking is left out when it is rendered
    send(qtbot, w, "again")
    assert backend.requests[-1][1].content == answer.content


def test_thinking_is_exported(qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    w = make_window(lambda _ref: FakeBackend(script=SCRIPT))
    load(qtbot, w, "tiny.gguf")
    send(qtbot, w, "hi")
    w.chats.exports.export(tmp_path / "chat.md", "md")
    md = (tmp_path / "chat.md").read_text(encoding="utf-8")
    assert "> **Thinking**" in md and "> The user greets me. Be brief." in md and "Hello **there**!" in md
    w.chats.exports.export(tmp_path / "chat.json", "json")
    data = json.loads((tmp_path / "chat.json").read_text(encoding="utf-8"))
    answer = data["messages"][-1]
    assert answer["thinking"] == "The user greets me. Be brief." and answer["content"] == "Hello **there**!"


def test_api_clients_get_reasoning_content() -> None:
    backend = FakeBackend(script=SCRIPT)
    service = EngineService(backend_factory=lambda _ref: backend)
    server = ApiServer(service, ServerConfig(port=0))
    try:
        load_blocking(service, LoadConfig(Path("fake.gguf")), "fake")
        server.start()
        with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=30) as client:
            messages = [{"role": "user", "content": "hi"}]
            reply = client.chat.completions.create(model="fake", messages=messages)
            message = reply.choices[0].message
            assert message.content == "Hello **there**!"
            assert message.model_extra["reasoning_content"] == "The user greets me. Be brief."
            assert reply.usage.completion_tokens_details.reasoning_tokens == 6
            thinking, content = [], []
            with client.chat.completions.create(model="fake", messages=messages, stream=True) as stream:
                for chunk in stream:
                    if chunk.choices:
                        delta = chunk.choices[0].delta
                        thinking.append((delta.model_extra or {}).get("reasoning_content") or "")
                        content.append(delta.content or "")
            assert "".join(thinking) == "The user greets me. Be brief." and "".join(content) == "Hello **there**!"
            # a client flips the thinking switch the way vLLM and llama.cpp's server take it
            client.chat.completions.create(
                model="fake", messages=messages, extra_body={"chat_template_kwargs": {"enable_thinking": False}}
            )
            assert backend.params[-1].thinking is False and backend.params[0].thinking is None
    finally:
        server.stop()
        service.close()


def test_the_per_chat_thinking_switch(qtbot: QtBot, make_window: Callable[..., MainWindow], paths: object) -> None:
    from tests.helpers.gguf_factory import TinySpec, write_tiny_model
    from tests.helpers.reasoning_templates import QWEN3_STYLE

    write_tiny_model(paths.default_models_dir / "switch.gguf", TinySpec(chat_template=QWEN3_STYLE))
    w = make_window()
    think = w.side.params.think
    load(qtbot, w, "tiny.gguf")
    assert not think.isEnabled() and w.side.params.params().thinking is None  # ChatML has no switch
    w.models.reload_models()
    load(qtbot, w, "switch.gguf")
    assert think.isEnabled() and w.side.params.params().thinking is True
    think.setChecked(False)
    w.side.params.max_tokens.setValue(2)
    send(qtbot, w, "no thinking please")
    conv = w.store.conversation(w.controller.conversation_id)
    assert conv.params["thinking"] is False  # saved with the chat
    w.chats.open_conversation(conv.id)
    assert think.isChecked() is False
