"""Picking a damaged GGUF keeps the working model (issue 16, item 4): the file is checked — its header,
then llama.cpp's own `vocab_only` read, whose reason comes from llama.cpp's log — before anything is
unloaded, in the window and in the engine service the API server and the CLI use."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.cli.common import PrintSink, generate_blocking, load_blocking
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from tests.helpers.window import load, send, set_max_tokens

REASON = "unknown tokenizer: 'llamx'"


def damaged_copy(model: Path, target: Path) -> Path:
    """A GGUF whose header reads fine but whose tokenizer llama.cpp does not know (one byte changed in
    the tokenizer.ggml.model string, "llama" -> "llamx"), as a bad conversion or a damaged download
    can leave it."""
    data = model.read_bytes()
    key = b"tokenizer.ggml.model"
    at = data.index(key) + len(key) + 4 + 8  # value type (u32), string length (u64)
    assert data[at : at + 5] == b"llama"
    target.write_bytes(data[:at] + b"llamx" + data[at + 5 :])
    return target


def test_picking_a_damaged_model_keeps_the_loaded_one(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    damaged_copy(w.library.models_dir / "tiny.gguf", w.library.models_dir / "damaged.gguf")
    with qtbot.waitSignal(w.models_listed, timeout=10_000):
        w.models.reload_models()
    states: list[str] = []
    w.model_state_changed.connect(states.append)
    index = w.model_picker.findData("damaged.gguf")
    w.model_picker.setCurrentIndex(index)  # the user's pick: the list shows it and says `activated`
    w.model_picker.activated.emit(index)
    qtbot.waitUntil(lambda: REASON in w.banner.text(), timeout=10_000)
    assert "damaged.gguf" in w.banner.text() and "tiny.gguf is still loaded" in w.banner.text()
    assert states == [] and w.controller.model_ready and w.model is not None  # never unloaded, never "loading"
    assert w.model_picker.currentData() == "tiny.gguf"  # the picker shows what is loaded
    assert w.bridge.service.model is not None
    set_max_tokens(w, 4)
    send(qtbot, w, "still there?")
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.role == "assistant" and answer.complete and answer.metrics["output_tokens"] >= 1


def test_the_engine_keeps_its_model_when_a_damaged_file_is_loaded(tiny_model: Path, tmp_path: Path) -> None:
    """The API server's and the CLI's path: service.load straight to the runtime."""
    damaged = damaged_copy(tiny_model, tmp_path / "damaged.gguf")
    service = EngineService()
    try:
        load_blocking(service, LoadConfig(tiny_model, n_ctx=512, threads=1), "tiny")
        with pytest.raises(EmberError, match=REASON):
            load_blocking(service, LoadConfig(damaged, n_ctx=512, threads=1), "damaged")
        assert service.model is not None and service.model_alias == "tiny"
        sink = PrintSink(io.StringIO())
        request = GenerationRequest(SamplingParams(max_tokens=3), sink, prompt="hello", client="cli", batch_s=0)
        generate_blocking(service, request, sink)
        assert sink.error is None and sink.metrics is not None and sink.metrics.output_tokens >= 1
    finally:
        service.close()
