"""Answers generated together share the context's cells (batch_decode.py): one whose prompt finds no
room left while another answer holds them (llama_decode returns 1, llama.cpp logs "decode: failed to
find a memory slot for batch of size N") was ended as if complete: an empty answer, `finish_reason:
"length"` on the API, an empty answer card in the window, and that line on stderr (issue 28, item 15).
It is now an error that says why and what to do (503 `context_busy` on the API, the banner in the
window, the question kept), and llama.cpp's line goes to Ember's log at DEBUG.

The tiny model, a 512-token context and 2 parallel sequences: one answer (a 300-token prompt, 190
tokens generated whatever it says) holds more than the room left for another such prompt. The tiny model
writes its 190 tokens in a blink: an EngineGate holds the engine thread until the other request is queued
(so it joins the batch while the first answer runs, on any machine) and again once it has been refused
(so the first answer is still running when the test looks)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.inference.service.requests import QueueState, ServiceListener
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import Settings, SettingsFile
from tests.helpers.api_dialog import start_server
from tests.helpers.api_support import WAIT_S
from tests.helpers.window import load, send

N_CTX, PARALLEL = 512, 2
LONG = "hello world " * 24  # about 300 tokens: two of them do not fit 512 cells with an answer going
HOLDER_TOKENS = 190  # the answer that holds the cells (with its prompt, more than 512 - 300)
MEMORY_SLOT = "failed to find a memory slot"


class Holder(threading.Thread):
    """An API client streaming a long answer."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.finish: str | None = None
        self.tokens = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0, timeout=60) as c:
                model = c.models.list().data[0].id
                stream = c.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": LONG}],
                    max_tokens=HOLDER_TOKENS,
                    stream=True,
                    stream_options={"include_usage": True},
                    extra_body={"ignore_eos": True},
                )
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].finish_reason:
                        self.finish = chunk.choices[0].finish_reason
                    if chunk.usage is not None:
                        self.tokens = chunk.usage.completion_tokens
        except BaseException as exc:
            self.error = exc

    def result(self) -> tuple[str | None, int]:
        self.join(60)
        assert not self.is_alive()
        if self.error is not None:
            raise self.error
        return self.finish, self.tokens


class EngineGate(ServiceListener):
    """Holds the engine thread where it says the queue changed with one request running and none
    waiting: the first time (the holder has started) until another request is queued, the second time
    (the other has been refused and left) until `release()`."""

    def __init__(self) -> None:
        self.holding = threading.Event()  # the holder has started: the engine waits for the next request
        self.queued = threading.Event()
        self.released = threading.Event()
        self.holds = 0

    def queue_changed(self, state: QueueState) -> None:
        running = state.running_all or ((state.running,) if state.running is not None else ())
        if state.queued and running:
            self.queued.set()
        elif threading.current_thread().name == "ember-engine" and len(running) == 1 and not state.queued:
            self.holds += 1
            if self.holds == 1:
                self.holding.set()
                self.queued.wait(WAIT_S)
            elif self.holds == 2:
                self.released.wait(WAIT_S)

    def release(self) -> None:
        self.queued.set()
        self.released.set()


@contextlib.contextmanager
def gated(service: EngineService) -> Iterator[EngineGate]:
    gate = EngineGate()
    service.add_listener(gate)
    try:
        yield gate
    finally:
        gate.release()  # (also when the test failed: the engine thread must not wait out WAIT_S)
        service.remove_listener(gate)


@pytest.fixture
def crowded_service(tiny_model: Path) -> Iterator[EngineService]:
    service = EngineService()
    try:
        load_blocking(service, LoadConfig(tiny_model, n_ctx=N_CTX, threads=1, parallel=PARALLEL), "tiny")
        yield service
    finally:
        service.close()


def test_api_answer_with_no_room_left_is_a_503_saying_why(
    crowded_service: EngineService,
    serve: Callable[[EngineService, ServerConfig], ApiServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = serve(crowded_service, ServerConfig(port=0))
    holder = Holder(server.url)
    caplog.set_level(logging.DEBUG, logger="ember.llama")
    with (
        gated(crowded_service) as gate,
        openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as c,
    ):
        holder.start()
        assert gate.holding.wait(WAIT_S)
        messages: Any = [{"role": "user", "content": "the " + LONG}]
        with pytest.raises(openai.APIStatusError) as refused:  # before: '' with finish_reason "length"
            c.chat.completions.create(model="tiny", messages=messages, max_tokens=20)
        assert holder.is_alive(), "the first answer ended before the second came: the test proves nothing"
        error = refused.value
        assert error.status_code == 503 and isinstance(error.body, dict) and error.body["code"] == "context_busy"
        assert "no room left for this answer" in error.body["message"] and "Try again" in error.body["message"]
        gate.release()
        # the first answer is whole; once it has finished, the second fits
        assert holder.result() == ("length", HOLDER_TOKENS)
        again = c.chat.completions.create(model="tiny", messages=messages, max_tokens=20)
        assert again.choices[0].message.content
    # llama.cpp's line for it: in Ember's log, below the warnings a window prints on stderr
    lines = [r for r in caplog.records if r.name == "ember.llama" and MEMORY_SLOT in r.getMessage()]
    assert lines and all(r.levelno == logging.DEBUG for r in lines)


def test_window_answer_with_no_room_left_says_why_and_keeps_the_question(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    SettingsFile(paths.settings_file).save(Settings(context_length=N_CTX, parallel=PARALLEL, threads=1))
    w = make_window()
    load(qtbot, w)
    start_server(qtbot, w)
    holder = Holder(w.api.server.url)
    with gated(w.bridge.service) as gate:
        holder.start()
        assert gate.holding.wait(WAIT_S)
        send(qtbot, w, "the " + LONG)
        assert holder.is_alive(), "the API's answer ended before the window's came: the test proves nothing"
        assert w.banner.isVisible() and "no room left for this answer" in w.banner.text()
        thread = w.store.thread(w.controller.conversation_id)
        assert [m.role for m in thread] == ["user"] and thread[0].content == ("the " + LONG).strip()  # no empty answer
    assert holder.result() == ("length", HOLDER_TOKENS)
