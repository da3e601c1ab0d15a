"""Formulas in the real window (offscreen): the longest event-loop stall while a streamed answer with
20 formulas (none typeset before) is finished, and while a chat whose answer has 20 other formulas
is opened, cold and again (from the cache). Budget: <= 50 ms stall.

    python -m bench.math_render [--formulas 20]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from bench.gui_stream import StallProbe, fresh_paths
from ember_chat.app.main import build_window
from ember_chat.app.transcript.render.math_images import SHARED

FORMS = (
    r"\frac{a_{%d}+b}{c-d}",
    r"\sum_{i=1}^{%d} i^2",
    r"\int_0^{%d} e^{-x^2}\,dx",
    r"\sqrt{b^2 - %d ac}",
    r"\begin{pmatrix} %d & b \\ c & d \end{pmatrix}",
    r"\alpha_{%d} \in \mathbb{R}",
    r"\lim_{x \to %d} \frac{\sin x}{x}",
    r"f(x) = %d \text{ if } x > 0",
)


def answer(n: int, salt: int) -> str:
    parts = []
    for i in range(n):
        latex = FORMS[i % len(FORMS)] % (salt * 100 + i)
        parts.append(f"Step {i}: $$ {latex} $$" if i % 4 == 0 else f"Step {i}: we get ${latex}$ here.")
    return "\n\n".join(parts)


def drain(window: object, probe: StallProbe) -> None:
    """Run the event loop until the transcript's background work is done (and a little after)."""
    loop = QEventLoop()

    def check() -> None:
        t = window.transcript
        if not t.rendering and not t.backfilling and not t.writer.math.pending:
            loop.quit()

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(check)
    timer.start()
    loop.exec()
    timer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--formulas", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="(JSON is always printed; as the other benchmarks)")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    with fresh_paths() as paths:
        window = build_window(paths)
        window.resize(1280, 800)
        window.show()
        window.centre_stack.setCurrentWidget(window.transcript)
        app.processEvents()
        t = window.transcript
        SHARED.get(SHARED.key("x", False, "#000000", 16.0, 1.0, 5.0))  # ziamath imported and its font read
        probe = StallProbe()
        probe.start()
        # 1. A streamed answer finishes: its Markdown and formulas replace the plain text in slices.
        text = answer(args.formulas, 1)
        t.begin_stream(10_000, "model")
        t.append_stream(text)
        app.processEvents()
        probe.max_gap = 0.0
        before = SHARED.typeset
        t.end_stream(text, None)
        drain(window, probe)
        finish_stall = probe.max_gap
        finish_typeset = SHARED.typeset - before
        # 2. A chat with 20 other formulas opened (cold), then opened again (from the cache).
        store = window.store
        cid = store.create_conversation("Maths").id
        q = store.add_message(cid, "user", "Show me the steps.")
        store.add_message(cid, "assistant", answer(args.formulas, 2), parent_id=q.id)
        other = store.create_conversation("Other").id
        stalls = []
        for target in (cid, other, cid):
            app.processEvents()
            probe.max_gap = 0.0
            probe.last = time.perf_counter()
            window.controller.open_conversation(target)
            drain(window, probe)
            stalls.append(probe.max_gap)
        print(
            json.dumps(
                {
                    "formulas": args.formulas,
                    "finish_streamed_longest_stall_ms": round(finish_stall * 1e3, 1),
                    "finish_streamed_typeset": finish_typeset,
                    "open_cold_longest_stall_ms": round(stalls[0] * 1e3, 1),
                    "open_cached_longest_stall_ms": round(stalls[2] * 1e3, 1),
                    "typeset_ms_mean": round(1e3 * SHARED.typeset_s / max(1, SHARED.typeset), 2),
                }
            )
        )
        window.close()
        window.join_background(30)
        window.store.close()


if __name__ == "__main__":
    main()
