"""Where the GUI thread's time goes while an answer streams: the real window (offscreen) over the
fake engine paced at a realistic rate (default 60 tokens/s) or over the real Gemma 3 270M (`gemma-3-270m`), the GUI
thread's own CPU per token (`time.thread_time`), how many deliveries reached it, and (with
`--profile`) a cProfile of the GUI thread only, timed by that thread's CPU clock, so its
top functions are CPU spent by the GUI thread, not waiting.

Splits the GUI thread's CPU into: the send (from `send` to the first token shown), the stream (first
token to the last batch), and the end (finished to idle, not counting the Markdown rendering, which
runs after the answer and is not part of the decode).

    python -m bench.gui_profile                    # fake engine, 300 tokens at 60 tokens/s
    python -m bench.gui_profile --profile --top 25
    python -m bench.gui_profile --starter --tokens 128 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEvent, QEventLoop, QObject
from PySide6.QtWidgets import QApplication

from bench.gui_stream import fresh_paths, wait_loaded, wait_until_idle
from ember_chat.app.main import build_window
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.gguf_factory import write_tiny_model


class EventTimingApp(QApplication):
    """Every event the GUI thread delivers, timed by the thread's CPU clock: self time per (event type,
    receiver class), nested deliveries (a window's update request paints its children) subtracted."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(argv)
        self.on = False
        self.table: dict[tuple[str, str], list[float]] = {}
        self._stack: list[float] = []  # CPU of nested deliveries, one slot per level

    def notify(self, receiver: QObject, event: QEvent) -> bool:  # Qt override
        if not self.on:
            return super().notify(receiver, event)
        self._stack.append(0.0)
        t0 = time.thread_time()
        try:
            return super().notify(receiver, event)
        finally:
            spent = time.thread_time() - t0
            nested = self._stack.pop()
            if self._stack:
                self._stack[-1] += spent
            key = (event.type().name, type(receiver).__name__)
            row = self.table.setdefault(key, [0, 0.0])
            row[0] += 1
            row[1] += spent - nested


def open_window(paths: AppPaths, starter: bool, tokens: int, rate: float) -> object:
    if starter:
        window = build_window(paths)
    else:
        window = build_window(paths, backend_factory=lambda _ref: FakeBackend(n_tokens=tokens, rate=rate))
        write_tiny_model(paths.default_models_dir / "fake.gguf")  # (a real header: the pick checks the file)
    window.resize(1280, 800)
    window.show()
    window.side.params.context.setValue(2048)
    window.models.load_model("gemma-3-270m" if starter else "fake.gguf")  # (Gemma: figures stay comparable)
    wait_loaded(window)
    return window


def one_answer(window: object, tokens: int, profiler: cProfile.Profile | None) -> dict[str, float]:
    window.chats.new_chat()
    window.side.params.max_tokens.setValue(tokens)
    window.side.params.temperature.setValue(0.0)
    marks: dict[str, float] = {}
    counts = {"streamed": 0}

    def on_streamed(_n: int) -> None:
        now = time.thread_time()
        counts["streamed"] += 1
        marks.setdefault("first", now)
        marks["last"] = now

    window.controller.streamed.connect(on_streamed)
    if profiler is not None:
        profiler.enable()
    cpu0 = time.thread_time()
    window.controller.send("Write a long story about a lighthouse keeper.")
    wait_until_idle(window)
    cpu1 = time.thread_time()
    if profiler is not None:
        profiler.disable()
    window.controller.streamed.disconnect(on_streamed)
    while window.transcript.rendering:  # the Markdown rendering, outside the figures
        QApplication.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
    metrics = window.store.thread(window.controller.conversation_id)[-1].metrics
    n = max(1, metrics["output_tokens"])
    first, last = marks.get("first", cpu0), marks.get("last", cpu1)
    return {
        "output_tokens": metrics["output_tokens"],
        "decode_tokens_per_s": metrics["decode_tokens_per_s"],
        "gui_thread_cpu_us_per_token": (cpu1 - cpu0) * 1e6 / n,
        "send_cpu_ms": (first - cpu0) * 1e3,
        "stream_cpu_ms": (last - first) * 1e3,
        "end_cpu_ms": (cpu1 - last) * 1e3,
        "deliveries": counts["streamed"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starter", action="store_true", help="the real gemma-3-270m instead of the fake engine")
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--rate", type=float, default=60.0, help="fake engine tokens/s")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile the GUI thread (adds its own overhead)")
    ap.add_argument("--top", type=int, default=30, help="functions listed by the profile")
    ap.add_argument("--sort", default="tottime", help="pstats sort key")
    ap.add_argument("--events", action="store_true", help="time every event the GUI thread delivers, by kind")
    args = ap.parse_args()
    app = EventTimingApp([]) if args.events else QApplication([])
    app.setStyle("Fusion")
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    with fresh_paths() as paths:
        window = open_window(paths, args.starter, args.tokens, args.rate)
        one_answer(window, min(args.tokens, 16), None)  # warm up: first-use costs are not per token
        if args.events:
            app.on = True
        runs = [one_answer(window, args.tokens, profiler) for _ in range(args.runs)]
        if args.events:
            app.on = False
        window.close()
        window.store.close()
    result: dict[str, object] = {"engine": "starter" if args.starter else f"fake at {args.rate:g} tokens/s"}
    for key in runs[0]:
        result[key] = round(statistics.median(r[key] for r in runs), 1)
    n_tokens = sum(r["output_tokens"] for r in runs)
    result["stream_cpu_us_per_token"] = round(sum(r["stream_cpu_ms"] for r in runs) * 1e3 / n_tokens, 1)
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats(args.sort)
        rows = []
        for func, (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            rows.append((tt if args.sort == "tottime" else ct, func, nc, tt, ct))
        rows.sort(reverse=True)
        result["profile_note"] = "GUI thread CPU over all runs, us per output token (cProfile's own overhead included)"
        result["profile"] = [
            {
                "function": f"{Path(f[0]).name}:{f[1]}({f[2]})",
                "calls_per_token": round(nc / n_tokens, 3),
                "self_us_per_token": round(tt * 1e6 / n_tokens, 1),
                "total_us_per_token": round(ct * 1e6 / n_tokens, 1),
            }
            for _key, f, nc, tt, ct in rows[: args.top]
        ]
    if args.events:
        rows = sorted(app.table.items(), key=lambda kv: -kv[1][1])[: args.top]
        result["events_note"] = "GUI thread CPU by event delivered (self time), us per output token"
        result["events"] = [
            {
                "event": f"{kind} -> {receiver}",
                "per_token": round(count / n_tokens, 3),
                "self_us_per_token": round(spent * 1e6 / n_tokens, 1),
            }
            for (kind, receiver), (count, spent) in rows
        ]
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
