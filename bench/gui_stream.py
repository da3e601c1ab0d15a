"""GUI streaming benchmark: 20,000 tokens from a fake engine, as fast as it can produce them, into
the real window (offscreen); then the real Gemma 3 270M (`gemma-3-270m`) through the GUI vs directly
(the CLI path).

Prints JSON: longest event-loop stall (budget <= 50 ms), tokens/s displayed (>= 5,000), GUI time per
token at the start vs the end of the message (end/start <= 1.5), the long-chat case (a 500-message
Markdown chat: switching to it, then sending and streaming 20,000 tokens into it, longest stall
<= 50 ms each), and decode tok/s of Gemma 3 270M through the GUI / through the runtime directly
(>= 0.97).

    python -m bench.gui_stream --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QObject, Qt, QTimer, Slot
from PySide6.QtWidgets import QApplication

from ember_chat.app.main import build_window
from ember_chat.app.qt.gc_guard import MainThreadGc
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.chat_fixtures import seed_long_chat
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.gguf_factory import write_tiny_model


class StallProbe(QObject):
    """A 1 ms timer on the GUI thread; the longest gap between its ticks is the longest stall."""

    def __init__(self) -> None:
        super().__init__()
        self.timer = QTimer(self)
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(1)
        self.timer.timeout.connect(self.tick)
        self.last = 0.0
        self.max_gap = 0.0
        self.max_at = 0.0

    def start(self) -> None:
        self.last = time.perf_counter()
        self.timer.start()

    @Slot()
    def tick(self) -> None:
        now = time.perf_counter()
        gap = now - self.last
        if gap > self.max_gap:
            self.max_gap = gap
            self.max_at = now
        self.last = now


def wait_until_idle(window: object) -> None:
    loop = QEventLoop()
    window.controller.generating_changed.connect(lambda on: None if on else loop.quit())
    loop.exec()


def wait_loaded(window: object) -> None:
    loop = QEventLoop()
    window.model_state_changed.connect(lambda s: loop.quit() if s in ("ready", "none") else None)
    QTimer.singleShot(120_000, loop.quit)  # a pick refused before loading changes no state: never wait forever
    loop.exec()
    if window.model is None:
        raise SystemExit("the model did not load")


@contextlib.contextmanager
def fresh_paths() -> Iterator[AppPaths]:
    """Data and config folders of a new user's, in a temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = AppPaths(Path(tmp) / "data", Path(tmp) / "config")
        paths.default_models_dir.mkdir(parents=True)
        yield paths


def fake_window(paths: AppPaths, n_tokens: int, rate: float) -> object:
    """The real window over a fake engine that streams `n_tokens` at `rate`, its model loaded."""
    window = build_window(paths, backend_factory=lambda _ref: FakeBackend(n_tokens=n_tokens, rate=rate))
    window.resize(1280, 800)
    window.show()
    write_tiny_model(paths.default_models_dir / "fake.gguf")  # (a real header: the pick checks the file)
    window.models.load_model("fake.gguf")
    wait_loaded(window)
    window.side.params.max_tokens.setValue(n_tokens)
    return window


def stream_fake(paths: AppPaths, n_tokens: int, rate: float) -> dict[str, float]:
    window = fake_window(paths, n_tokens, rate)

    batches: list[tuple[int, int, float]] = []  # tokens so far, tokens in batch, GUI seconds
    controller = window.controller
    original = controller._on_tokens
    state = {"n": 0, "first": 0.0, "last": 0.0}

    def timed(rid: int, text: str, n: int) -> None:
        t = time.perf_counter()
        original(rid, text, n)
        done = time.perf_counter()
        if not state["first"]:
            state["first"] = t
        state["last"] = done
        batches.append((n, n - state["n"], done - t))
        state["n"] = n

    window.bridge.tokens.disconnect(controller._on_tokens)
    controller._on_tokens = timed
    relay = Relay(timed)
    window.bridge.tokens.connect(relay.on_tokens)

    probe = StallProbe()
    probe.start()
    t_send = time.perf_counter()
    window.controller.send("stream please")
    wait_until_idle(window)
    t_done = time.perf_counter()
    while window.transcript.rendering:  # include the final Markdown rendering in the stall probe
        QApplication.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
    probe.timer.stop()
    shown = len(window.store.thread(window.controller.conversation_id)[-1].content)

    def per_token(sel: list[tuple[int, int, float]]) -> float:
        return sum(b[2] for b in sel) / max(1, sum(b[1] for b in sel))

    tenth = max(1, n_tokens // 10)
    # the batches that brought the first tenth of the tokens, and those of the last tenth (at least
    # one batch each, however few tokens: a batch may carry many)
    first = next((i for i, b in enumerate(batches) if b[0] >= tenth), len(batches) - 1)
    start = batches[: first + 1]
    end = [b for b in batches if b[0] > n_tokens - tenth] or batches[-1:]
    window.close()
    window.store.close()
    return {
        "tokens": n_tokens,
        "fake_rate_tokens_per_s": rate,
        "chars_shown": shown,
        "batches": len(batches),
        "longest_stall_ms": round(probe.max_gap * 1e3, 2),
        "longest_stall_ended_at_ms_after_send": round((probe.max_at - t_send) * 1e3, 1),
        "answer_done_at_ms_after_send": round((t_done - t_send) * 1e3, 1),
        "tokens_per_s_displayed": round(n_tokens / (state["last"] - state["first"]), 1),
        "gui_us_per_token_start": round(per_token(start) * 1e6, 3),
        "gui_us_per_token_end": round(per_token(end) * 1e6, 3),
    }


class Relay(QObject):
    def __init__(self, fn: object) -> None:
        super().__init__()
        self.fn = fn

    @Slot(int, str, int)
    def on_tokens(self, rid: int, text: str, n: int) -> None:
        self.fn(rid, text, n)


def decode_directly(runtime: LocalRuntime, prompt: str, tokens: int) -> float:
    """Decode tok/s of one greedy answer through the runtime itself (the CLI's path), from a cold cache."""
    runtime.reset_cache()
    for ev in runtime.chat([ChatMessage("user", prompt)], SamplingParams(temperature=0.0, max_tokens=tokens)):
        if isinstance(ev, Finished):
            return ev.metrics.decode_tokens_per_s
    raise RuntimeError("the runtime's answer ended without Finished")


def starter_gui_vs_direct(paths: AppPaths, runs: int, tokens: int, noise_floor: bool = False) -> dict[str, object]:
    """`noise_floor`: a second direct answer after each pair, so that the same comparison between two
    identical direct answers shows how far the machine's noise alone moves one run's ratio."""
    window = build_window(paths)
    window.resize(1280, 800)
    window.show()
    window.side.params.context.setValue(2048)
    window.models.load_model("gemma-3-270m")  # Gemma 3 270M, the figures' model since the first run
    wait_loaded(window)
    direct = LocalRuntime()
    direct.load(LoadConfig(window.library.resolve("gemma-3-270m"), n_ctx=2048, threads=window.settings.threads))
    prompt = "Write a long story about a lighthouse keeper."
    gui_tps, direct_tps, again_tps, gui_cpu_us = [], [], [], []
    gui_tokens = []
    for _ in range(runs):
        window.chats.new_chat()  # (a new chat starts from the settings' parameters: set this run's again)
        window.side.params.max_tokens.setValue(tokens)
        window.side.params.temperature.setValue(0.0)
        cpu0 = time.thread_time()  # the GUI thread's own CPU: batches, metrics, repaints
        window.controller.send(prompt)
        wait_until_idle(window)
        metrics = window.store.thread(window.controller.conversation_id)[-1].metrics
        gui_cpu_us.append((time.thread_time() - cpu0) * 1e6 / max(1, metrics["output_tokens"]))
        gui_tps.append(metrics["decode_tokens_per_s"])
        gui_tokens.append(metrics["output_tokens"])
        direct_tps.append(decode_directly(direct, prompt, tokens))
        if noise_floor:
            again_tps.append(decode_directly(direct, prompt, tokens))
    direct.close()
    window.close()
    window.store.close()
    result: dict[str, object] = {
        "starter_gui_decode_tokens_per_s": round(statistics.median(gui_tps), 2),
        "starter_direct_decode_tokens_per_s": round(statistics.median(direct_tps), 2),
        "starter_gui_vs_direct_ratio": round(statistics.median(gui_tps) / statistics.median(direct_tps), 4),
        # each run's own (its GUI answer over the direct one right after it): the budget holds in every run
        "starter_gui_vs_direct_ratio_per_run": [round(g / d, 4) for g, d in zip(gui_tps, direct_tps, strict=True)],
        "gui_thread_cpu_us_per_token": round(statistics.median(gui_cpu_us), 1),
        "starter_gui_output_tokens": gui_tokens,
    }
    if noise_floor:
        result["direct_vs_direct_ratio_per_run"] = [round(a / b, 4) for a, b in zip(direct_tps, again_tps, strict=True)]
    return result


def _drain(window: object) -> None:
    """Run the event loop until the transcript has no background work left, and 100 ms more (so the
    stall probe ticks after the last piece of work)."""
    t = window.transcript
    while t.rendering or t.backfilling:
        QApplication.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
    loop = QEventLoop()
    QTimer.singleShot(100, loop.quit)
    loop.exec()


def long_chat(paths: AppPaths, n_messages: int, n_tokens: int, rate: float) -> dict[str, float]:
    """A chat of `n_messages` Markdown messages: switch to it, send in it, stream into it."""
    window = fake_window(paths, n_tokens, rate)
    other = seed_long_chat(window.store, 4, "short chat")
    long_id = seed_long_chat(window.store, n_messages, "long chat")
    window.chats.open_conversation(other)
    _drain(window)

    probe = StallProbe()
    probe.start()
    t0 = time.perf_counter()
    window.chats.open_conversation(long_id)
    t_shown = time.perf_counter()
    _drain(window)
    t_filled = time.perf_counter() - 0.1
    switch_stall = probe.max_gap
    assert len(window.transcript.shown_ids()) == n_messages

    probe.max_gap = 0.0
    probe.last = time.perf_counter()
    window.controller.send("one more question")
    wait_until_idle(window)
    _drain(window)
    send_stall = probe.max_gap
    probe.timer.stop()
    window.close()
    window.store.close()
    return {
        "long_chat_messages": n_messages,
        "long_chat_switch_ms": round((t_shown - t0) * 1e3, 1),
        "long_chat_filled_in_ms": round((t_filled - t0) * 1e3, 1),
        "long_chat_switch_longest_stall_ms": round(switch_stall * 1e3, 2),
        "long_chat_send_and_stream_longest_stall_ms": round(send_stall * 1e3, 2),
    }


def competing_load() -> subprocess.Popen[bytes]:
    """Another program keeping one core busy (what a browser or a build does to a laptop)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=20_000, help="fake engine tokens/s (0: unpaced)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--long-chat", type=int, default=500, help="messages in the long-chat case")
    ap.add_argument("--starter-tokens", type=int, default=128)
    ap.add_argument("--no-starter", action="store_true")
    ap.add_argument("--only-starter", action="store_true", help="only the starter model through the GUI vs directly")
    ap.add_argument("--competing-load", action="store_true", help="also measure with another process busy on one core")
    ap.add_argument(
        "--noise-floor", action="store_true", help="also a second direct answer per run: direct / direct, run by run"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    collector = MainThreadGc(app)  # noqa: F841 - as the app runs (app/main.py): collections on the GUI thread
    app.setStyle("Fusion")
    with tempfile.TemporaryDirectory() as tmp:  # (several users' folders in it: see below)
        paths = AppPaths(Path(tmp) / "data", Path(tmp) / "config")
        paths.default_models_dir.mkdir(parents=True)
        result: dict[str, object] = {}
        if not args.only_starter:
            result.update(stream_fake(paths, args.tokens, args.rate))
            start_us = result["gui_us_per_token_start"]
            result["end_over_start"] = round(result["gui_us_per_token_end"] / start_us, 3) if start_us else None
            long_paths = AppPaths(Path(tmp) / "data-long", Path(tmp) / "config-long")
            long_paths.default_models_dir.mkdir(parents=True)
            result.update(long_chat(long_paths, args.long_chat, args.tokens, args.rate))
        if not args.no_starter:
            real_paths = AppPaths(Path(tmp) / "data2", Path(tmp) / "config2")
            result.update(starter_gui_vs_direct(real_paths, args.runs, args.starter_tokens, args.noise_floor))
            if args.competing_load:
                load = competing_load()
                try:
                    loaded = starter_gui_vs_direct(
                        AppPaths(Path(tmp) / "data3", Path(tmp) / "config3"), args.runs, args.starter_tokens
                    )
                finally:
                    load.kill()
                    load.wait()
                result.update({f"loaded_{k}": v for k, v in loaded.items()})
    print(json.dumps(result) if args.json else "\n".join(f"{k:40} {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
