"""The GUI thread's longest stall while the KV snapshot store writes: a Qt event loop (offscreen) with a
1 ms timer runs while another thread puts snapshots of `--mb` MB (the size of an 8,192-token SmolLM2
conversation by default) into a store that keeps nothing in RAM, so its writer thread hashes and writes
each one to disk at once. Budget (issue 20): <= 50 ms.

    python -m bench.kv_write_stall --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from ember_chat.engine.inference.kv.snapshot_keys import SnapshotKey
from ember_chat.engine.inference.kv.snapshots import SnapshotStore


def longest_gap(app: object, busy: threading.Event | None, seconds: float) -> float:
    """The longest time between two event-loop turns (ms) while `busy` is set, or for `seconds`."""
    from PySide6.QtWidgets import QApplication

    assert isinstance(app, QApplication)
    gaps: list[float] = []
    last = time.perf_counter()
    t0 = last
    while (busy.is_set() if busy is not None else time.perf_counter() - t0 < seconds) or not gaps:
        app.processEvents()
        time.sleep(0.0005)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    return max(gaps) * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=189, help="size of each snapshot in MB")
    ap.add_argument("--writes", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication, QLabel

    app = QApplication.instance() or QApplication([])
    label = QLabel("Ember")
    label.show()
    state = os.urandom(args.mb * 2**20)
    with tempfile.TemporaryDirectory(prefix="ember-kv-stall-") as tmp:
        store = SnapshotStore(Path(tmp), (args.mb * args.writes + 512) * 2**20, ram_bytes=0)
        idle = longest_gap(app, None, 2.0)
        busy = threading.Event()
        busy.set()

        def engine() -> None:  # the engine thread's puts; the store's writer thread writes each one
            try:
                for i in range(args.writes):
                    store.put(SnapshotKey("model", "settings"), [i, *range(1, 8192)], state)
                    store.wait_idle()
            finally:
                busy.clear()

        t0 = time.perf_counter()
        worker = threading.Thread(target=engine, name="engine")
        worker.start()
        writing = longest_gap(app, busy, 0)
        worker.join()
        took = time.perf_counter() - t0
        files = len(list(Path(tmp).glob("*.kvsnap")))
        store.close()
    result = {
        "idle_longest_gap_ms": round(idle, 1),
        "writing_longest_gap_ms": round(writing, 1),
        "snapshot_mb": args.mb,
        "writes": args.writes,
        "files": files,
        "seconds": round(took, 2),
    }
    print(json.dumps(result) if args.json else result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
