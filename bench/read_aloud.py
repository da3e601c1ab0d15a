"""Read-aloud latency (issue 33; budget: the first sentence starts being spoken <= 300 ms after it has
streamed): an answer streamed in 4-character pieces every 20 ms (about 50 tokens/s) into the window's
read-aloud path (app/voice/read_aloud.ReadAloud with "Read answers aloud as they stream" on), timed from
the piece that finishes the first sentence arriving to the text-to-speech engine's state becoming
Speaking. Cold: the engine is made by that first sentence (the first read of a session); warm: it was
made before. Each engine in its own process with a time limit (speech-dispatcher without a sound server
can hang; it is then reported, not waited for).

    python -m bench.read_aloud [--engines mock,speechd] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_LOGGING_RULES", "qt.multimedia.symbolsresolver.warning=false")

ANSWER = (
    "Sure, here is the short version. The loop reads each line once, so it runs in linear time. "
    "Here is the code:\n```python\nfor line in f:\n    total += len(line)\n```\n"
    "That is all it takes. Does that help?"
)
PIECE_CHARS = 4
PIECE_MS = 20
BUDGET_MS = 300.0


def one_run(engine: str, warm: bool) -> float:
    """Milliseconds from the piece finishing the first sentence to the engine speaking it."""
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtTextToSpeech import QTextToSpeech
    from PySide6.QtWidgets import QApplication

    from ember_chat.app.context import Notifier
    from ember_chat.app.voice.read_aloud import ReadAloud
    from ember_chat.app.voice.speaker import Speaker
    from ember_chat.engine.storage.settings import Settings

    _app = QApplication.instance() or QApplication([])
    speaker = Speaker(engine)
    ctx = SimpleNamespace(settings=Settings(read_aloud_streaming=True), notifier=Notifier())
    reader = ReadAloud(ctx, speaker)  # type: ignore[arg-type]  # (it reads only these two)
    marks: dict[str, float] = {}
    loop = QEventLoop()

    def made() -> None:
        tts = speaker.engine()
        assert tts is not None
        tts.stateChanged.connect(state)
        if warm:
            loop.quit()
        elif tts.state() == QTextToSpeech.State.Speaking:  # (cold: _made said the first sentence)
            state(tts.state())

    def state(s: QTextToSpeech.State) -> None:
        if s == QTextToSpeech.State.Speaking and "speaking" not in marks:
            marks["speaking"] = time.perf_counter()
            loop.quit()

    speaker.engine_made.connect(made)
    if warm:  # (made on its thread: waited for here, before the stream)
        speaker.engine()
        QTimer.singleShot(30_000, loop.quit)
        loop.exec()
        if speaker.engine() is None:
            raise RuntimeError(f"no engine {engine}")
    pieces = [ANSWER[i : i + PIECE_CHARS] for i in range(0, len(ANSWER), PIECE_CHARS)]
    reader.on_stream_began(1)

    def feed() -> None:
        if not pieces:
            reader.on_stream_ended()
            return
        piece = pieces.pop(0)
        before = time.perf_counter()
        reader.on_stream_text(piece)
        if speaker.reading is not None and "complete" not in marks:  # (the first sentence was handed over)
            marks["complete"] = before
            tts = speaker.engine()
            if tts is not None and tts.state() == QTextToSpeech.State.Speaking:  # (it said so inside say())
                marks["speaking"] = time.perf_counter()
                loop.quit()
                return
        QTimer.singleShot(PIECE_MS, feed)

    QTimer.singleShot(0, feed)
    QTimer.singleShot(10_000, loop.quit)
    loop.exec()
    reader.stop()
    if "speaking" not in marks or "complete" not in marks:
        raise RuntimeError(f"the engine {engine} never said it was speaking")
    return (marks["speaking"] - marks["complete"]) * 1000


def child(engine: str, mode: str, runs: int) -> dict[str, object]:
    times = [one_run(engine, warm=mode == "warm") for _ in range(runs)]
    return {f"{mode}_median_ms": round(statistics.median(times), 2), f"{mode}_max_ms": round(max(times), 2)}


def measure(engine: str, mode: str, runs: int) -> dict[str, object]:
    """One engine, one mode, in a child process with a time limit."""
    command = [sys.executable, "-m", "bench.read_aloud", "--child", engine, "--mode", mode, "--runs", str(runs)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return {f"{mode}_error": "no answer in 60 s (speech-dispatcher without a sound server hangs)"}
    if done.returncode != 0:
        return {f"{mode}_error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="mock,speechd")
    ap.add_argument("--runs", type=int, default=5, help="runs per process (speech-dispatcher: 1 each)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="warm", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.mode, args.runs)))
        return
    results: dict[str, dict[str, object]] = {}
    for engine in args.engines.split(","):
        # warm first: with speech-dispatcher, a later process may find the daemon stuck (no sound server)
        runs = 1 if engine == "speechd" else args.runs
        figures = {**measure(engine, "warm", runs), **measure(engine, "cold", runs)}
        worst = [v for k, v in figures.items() if k.endswith("_max_ms") and isinstance(v, float)]
        figures["within_budget"] = bool(worst) and max(worst) <= BUDGET_MS
        results[engine] = figures
    stream = {"piece_chars": PIECE_CHARS, "piece_ms": PIECE_MS}
    print(json.dumps({"budget_ms": BUDGET_MS, "stream": stream, "engines": results, "cpus": os.cpu_count()}, indent=2))


if __name__ == "__main__":
    main()
