"""Backup and restore of a big chat database: a ~100 MB database is built here (chats of realistic prose,
its full-text index included), then backed up with BackupManager (SQLite's online backup API), restored
into the live connection (the current one copied aside first, included in restore_s), and opened in the
real window (offscreen) whose daily backup of it runs at start, while a 1 ms GUI timer measures the
longest gap between its ticks (the window must not freeze: budget <= 50 ms, as for streaming).

Prints JSON: db_bytes, backup_s, backup_bytes, restore_s, window_daily_s (window shown to daily backup
written) and window_stall_ms (the longest GUI stall from the window shown until then).

    python -m bench.backup --mb 100 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from ember_chat.engine.storage.backups import BackupManager
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths

_WORDS = (
    "the a model answer question river heron budget harbour schedule report kernel thread memory token "
    "context window prompt cache layer weight quantized decode prefill latency python function string "
    "reverse explain photosynthesis light energy plant sugar water carbon oxygen because therefore and "
    "with from into about under over between during before after while which where when how why"
)
WORDS = _WORDS.split()


def build_database(path: Path, megabytes: float, seed: int = 7) -> int:
    """Chats of 20 messages (~2 KB each), 10 chats a transaction, until the file holds `megabytes`; its size."""
    rng = random.Random(seed)
    store = ConversationStore(path)
    db, lock = store.shared_connection()
    target = megabytes * 1024 * 1024
    chat = 0
    try:
        while path.stat().st_size + _wal(path) < target:
            with lock:
                db.execute("BEGIN")
                for _ in range(10):
                    chat += 1
                    cur = db.execute(
                        "INSERT INTO conversations (title, created_at, updated_at) VALUES (?, ?, ?)",
                        (f"Chat {chat}", time.time(), time.time()),
                    )
                    cid = cur.lastrowid
                    parent = None
                    for i in range(20):
                        text = " ".join(rng.choice(WORDS) for _ in range(330))
                        cur = db.execute(
                            "INSERT INTO messages (conversation_id, parent_id, role, content, created_at)"
                            " VALUES (?, ?, ?, ?, ?)",
                            (cid, parent, "user" if i % 2 == 0 else "assistant", text, time.time()),
                        )
                        parent = cur.lastrowid
                    db.execute("UPDATE conversations SET active_leaf = ? WHERE id = ?", (parent, cid))
                db.execute("COMMIT")
            with lock:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()
    return path.stat().st_size


def _wal(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def measure_engine(paths: AppPaths) -> dict[str, float]:
    store = ConversationStore(paths.database)
    try:
        manager = BackupManager(store, folder=paths.data_dir / "bench-backups")
        t0 = time.perf_counter()
        info = manager.backup()
        backup_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        manager.restore(info)
        restore_s = time.perf_counter() - t0
    finally:
        store.close()
    return {"backup_s": backup_s, "backup_bytes": info.size, "restore_s": restore_s}


def measure_window(paths: AppPaths) -> dict[str, float]:
    """The window opened on the big database; its daily backup runs at start while the probe ticks."""
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from bench.gui_stream import StallProbe
    from ember_chat.app.main import build_window

    app = QApplication.instance() or QApplication([])
    window = build_window(paths)
    window.resize(1280, 800)
    probe = StallProbe()
    loop = QEventLoop()
    window.backups.backed_up.connect(lambda _info: loop.quit())
    QTimer.singleShot(600_000, loop.quit)
    window.show()
    probe.start()
    t0 = time.perf_counter()
    loop.exec()
    daily_s = time.perf_counter() - t0
    tail = QEventLoop()  # 100 ms more, so the probe ticks after the last piece of work
    QTimer.singleShot(100, tail.quit)
    tail.exec()
    probe.timer.stop()
    made = [b for b in window.backups.manager.backups() if b.reason == "daily"]
    window.close()
    window.join_background(60)
    window.store.close()
    app.processEvents()
    if not made:
        raise SystemExit("the window made no daily backup")
    return {"window_daily_s": daily_s, "window_stall_ms": probe.max_gap * 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of the database to build (MB)")
    ap.add_argument("--no-window", action="store_true", help="skip the window's daily backup measurement")
    ap.add_argument("--json", action="store_true", help="(JSON is always printed; kept for symmetry)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = AppPaths(Path(tmp) / "data", Path(tmp) / "config")
        paths.data_dir.mkdir(parents=True)
        out: dict[str, float] = {"db_bytes": build_database(paths.database, args.mb)}
        out.update(measure_engine(paths))
        if not args.no_window:
            out.update(measure_window(paths))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
