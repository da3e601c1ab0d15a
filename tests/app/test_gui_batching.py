"""The bridge's coalescer: the engine thread hands it every token; the GUI thread gets them in few
deliveries (at most one queued wake-up waits at a time, whatever the engine makes meanwhile), the
first token at once, held tokens without waiting for the next one, the text complete and in order.
These tests count deliveries and block threads on events; none measures a duration."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Signal, Slot
from pytestqt.qtbot import QtBot

from ember_chat.app.engine_link.bridge import GUI_CPU_BUDGET, MAX_BATCH_S, TOKEN_BATCH_S, EngineBridge
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.service.engine import EngineService
from tests.helpers.fake_backend import WORDS, FakeBackend
from tests.helpers.window import ANSWER_TIMEOUT, load, set_max_tokens

WAIT_S = 10  # how long an engine thread waits for the GUI thread before it gives up (a failure)
WAIT_MS = 30_000


def fake_text(n: int) -> str:
    """What FakeBackend says in n tokens."""
    return "".join(WORDS[i % len(WORDS)] + ("\n\n" if i % 80 == 79 else "") for i in range(n))


class Deliveries(QObject):
    """What reaches the GUI thread, counted by slots connected like the controller's (tests wait on
    the signals of this GUI-thread object, never on one the engine thread could emit)."""

    delivered = Signal()
    done = Signal()

    def __init__(self, bridge: EngineBridge, on_text: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.counts: list[int] = []
        self.threads: set[bool] = set()
        self.on_text = on_text
        bridge.tokens.connect(self.on_tokens)
        bridge.finished.connect(self.on_finished)

    @Slot(int, str, int)
    def on_tokens(self, _rid: int, text: str, output_tokens: int) -> None:
        self.threads.add(threading.current_thread() is threading.main_thread())
        self.texts.append(text)
        self.counts.append(output_tokens)
        if self.on_text is not None:
            self.on_text("".join(self.texts))
        self.delivered.emit()

    @Slot(int, str, str, object, object)
    def on_finished(self, *_args: object) -> None:
        self.done.emit()


@pytest.fixture
def bridge_with(qtbot: QtBot) -> Iterator[Callable[[FakeBackend], EngineBridge]]:
    bridges: list[EngineBridge] = []

    def make(backend: FakeBackend) -> EngineBridge:
        bridge = EngineBridge(EngineService(lambda _ref: backend))
        bridges.append(bridge)
        with qtbot.waitSignal(bridge.loaded, timeout=WAIT_MS):
            bridge.load(LoadConfig(Path("fake.gguf")), alias="fake")
        return bridge

    yield make
    for bridge in bridges:
        bridge.close()  # cancels, stops the engine thread and joins it
        assert not bridge.service.running


def ask(bridge: EngineBridge, n: int) -> int:
    return bridge.generate([ChatMessage("user", "go")], SamplingParams(max_tokens=n))


def test_tokens_made_while_the_gui_thread_is_busy_arrive_in_one_delivery(
    qtbot: QtBot, bridge_with: Callable[[FakeBackend], EngineBridge]
) -> None:
    n = 400
    backend = FakeBackend(n_tokens=n, rate=2000)  # 0.2 s of tokens: several batch intervals
    made = threading.Event()
    backend.on_token = lambda i: made.set() if i == n - 1 else None
    bridge = bridge_with(backend)
    got = Deliveries(bridge)
    with qtbot.waitSignal(got.delivered, timeout=WAIT_MS):  # the first delivery
        ask(bridge, n)
    # The GUI thread is busy (it handles no event) while the engine makes all the other tokens: they
    # wait as one batch behind one wake-up, not as a queued signal per batch interval.
    assert made.wait(WAIT_S)
    before = len(got.texts)
    with qtbot.waitSignal(got.done, timeout=WAIT_MS):
        pass
    assert len(got.texts) - before == 1
    assert "".join(got.texts) == fake_text(n)  # complete and in order
    assert got.counts[-1] == n and got.counts == sorted(got.counts)
    assert got.threads == {True}  # delivered on the GUI thread


def test_the_first_token_is_delivered_at_once(qtbot: QtBot, bridge_with: Callable[[FakeBackend], EngineBridge]) -> None:
    """A fast prompt evaluation must not leave the first token waiting for a batch interval or a
    timer: the engine waits, on its thread, until the GUI thread has it."""
    backend = FakeBackend(n_tokens=3)
    seen = threading.Event()
    waited: list[bool] = []
    backend.on_token = lambda i: waited.append(seen.wait(WAIT_S)) if i == 0 else None
    bridge = bridge_with(backend)
    got = Deliveries(bridge, on_text=lambda text: seen.set() if text else None)
    with qtbot.waitSignal(got.done, timeout=WAIT_MS):
        ask(bridge, 3)
    assert waited == [True]
    assert got.texts[0] == WORDS[0]  # the first token alone
    assert "".join(got.texts) == fake_text(3)


def test_a_token_held_back_is_delivered_when_the_engine_pauses(
    qtbot: QtBot, bridge_with: Callable[[FakeBackend], EngineBridge]
) -> None:
    """The second token comes right after the first (within a batch interval), then the engine
    pauses until the GUI thread has shown it: the coalescer delivers it without a third token."""
    backend = FakeBackend(n_tokens=3)
    seen = threading.Event()
    waited: list[bool] = []
    backend.on_token = lambda i: waited.append(seen.wait(WAIT_S)) if i == 1 else None
    bridge = bridge_with(backend)
    got = Deliveries(bridge, on_text=lambda text: seen.set() if text == fake_text(2) else None)
    with qtbot.waitSignal(got.done, timeout=WAIT_MS):
        ask(bridge, 3)
    assert waited == [True]
    assert "".join(got.texts) == fake_text(3)


def test_deliveries_are_spaced_to_keep_the_gui_thread_within_its_budget(
    qtbot: QtBot, bridge_with: Callable[[FakeBackend], EngineBridge]
) -> None:
    """Each delivery of a model's tokens at tens a second costs the GUI thread about the same
    whatever it carries: when they cost more (a slow or busy machine), tokens wake it less often,
    never less than ten times a second."""
    bridge = bridge_with(FakeBackend(n_tokens=1))
    cpu, wall, count = [0.0], [0.0], [0]
    bridge._cpu_clock = lambda: cpu[0]  # the GUI thread's CPU, as the test spends it
    bridge._wall_clock = lambda: wall[0]

    def deliveries_costing(cpu_s: float, tokens_per_s: float = 60.0) -> float:
        for _ in range(40):
            bridge._pace(count[0])  # what the bridge does after each delivery of tokens
            step = bridge._mailbox.interval
            cpu[0] += cpu_s
            wall[0] += step
            count[0] += round(tokens_per_s * step)
        return bridge._mailbox.interval

    assert deliveries_costing(0.0002) == TOKEN_BATCH_S  # cheap: ≈30 Hz
    assert deliveries_costing(0.001) == pytest.approx(0.001 / GUI_CPU_BUDGET, rel=0.05)
    assert bridge._hold.interval() == round(2 * bridge._mailbox.interval * 1000)
    assert deliveries_costing(0.05) == MAX_BATCH_S  # expensive (or a stall): never slower than this
    assert deliveries_costing(0.0002) == TOKEN_BATCH_S  # and back when they are cheap again


def test_a_fast_stream_is_not_spaced_into_large_deliveries(
    qtbot: QtBot, bridge_with: Callable[[FakeBackend], EngineBridge]
) -> None:
    """Thousands of tokens a second make each delivery cost by its size: spacing them would only
    make each one a longer stall of the window, so they stay at ≈30 Hz, whatever they cost."""
    bridge = bridge_with(FakeBackend(n_tokens=1))
    cpu, wall, count = [0.0], [0.0], [0]
    bridge._cpu_clock = lambda: cpu[0]
    bridge._wall_clock = lambda: wall[0]
    for _ in range(40):
        bridge._pace(count[0])
        cpu[0] += 0.01  # 10 ms a delivery: expensive
        wall[0] += bridge._mailbox.interval
        count[0] += round(20_000 * bridge._mailbox.interval)
    assert bridge._mailbox.interval == TOKEN_BATCH_S
    assert count[0] / 40 <= 20_000 * TOKEN_BATCH_S + 1  # deliveries of ≈670 tokens, not 2,000


def test_the_window_shows_the_first_token_at_once_and_the_whole_answer_in_few_deliveries(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    n = 3000
    backend = FakeBackend(n_tokens=n)  # unpaced: as fast as the engine thread can make them
    w = make_window(lambda _ref: backend)
    shown = threading.Event()
    waited: list[bool] = []
    backend.on_token = lambda i: waited.append(shown.wait(WAIT_S)) if i == 0 else None
    load(qtbot, w)
    set_max_tokens(w, n)
    deliveries: list[int] = []

    def on_streamed(output_tokens: int) -> None:
        deliveries.append(output_tokens)
        if w.transcript.plain_text().endswith(WORDS[0]):
            shown.set()  # the first token is in the transcript

    w.controller.streamed.connect(on_streamed)
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        assert w.controller.send("go")
    assert waited == [True]
    assert deliveries[0] == 1
    assert deliveries[-1] == n and len(deliveries) < n // 10
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.complete and answer.content == fake_text(n)
