"""Chat list benchmark: 5,000 chats (each with a question) in 40 folders, in the real window
(offscreen). Each operation runs from the event loop while a 1 ms timer ticks; the longest gap between
ticks is the operation's GUI stall (budget <= 50 ms):

open (the list built from the store), filter (typing in the search box, then clearing it), move (50
chats to another folder), undo (Ctrl+Z of that move), delete (a chat to the Trash), collapse (a
folder, saved), switch (open another chat).

    python -m bench.chat_list --json               # 5,000 chats
    python -m bench.chat_list --chats 500 --json   # a quick check
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from bench.gui_stream import StallProbe
from ember_chat.app.main import build_window
from ember_chat.app.qt.gc_guard import MainThreadGc
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths

BUDGET_MS = 50.0
WORDS = ["harbour", "lantern", "orchid", "granite", "meadow", "cobalt", "saffron", "tundra"]


def seed(db: Path, chats: int, folders: int) -> None:
    """`chats` chats (a question each, a distinct word per chat for the search) spread over `folders`
    folders (one in four in no folder, every tenth folder nested in the one before it)."""
    store = ConversationStore(db)
    try:
        ids = [store.organise.create_folder(f"Folder {i:02}").id for i in range(folders - folders // 10)]
        for i in range(folders // 10):
            ids.append(store.organise.create_folder(f"Sub {i:02}", parent_id=ids[i * 9]).id)
        by_folder: dict[int, list[int]] = {}
        for i in range(chats):
            conv = store.create_conversation(f"Chat {i:05} about the {WORDS[i % len(WORDS)]}")
            store.add_message(conv.id, "user", f"Question {i} on the {WORDS[i % len(WORDS)]} token{i}x")
            if i % 4:
                by_folder.setdefault(ids[i % len(ids)], []).append(conv.id)
        for fid, members in by_folder.items():
            store.organise.move_chats(members, fid)
    finally:
        store.close()


def measure(op: Callable[[], None], settle_ms: int = 250, done: Callable[[], bool] | None = None) -> float:
    """Run `op` from the event loop with the stall probe ticking; the longest gap in ms, until `done`
    (or `settle_ms` after the op)."""
    probe = StallProbe()
    loop = QEventLoop()
    deadline = time.perf_counter() + 30.0

    def check() -> None:
        if (done is None or done()) or time.perf_counter() > deadline:
            QTimer.singleShot(settle_ms, loop.quit)
        else:
            QTimer.singleShot(5, check)

    def run() -> None:
        op()
        check()

    probe.start()
    QTimer.singleShot(20, run)
    loop.exec()
    probe.timer.stop()
    return probe.max_gap * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=5000)
    parser.add_argument("--folders", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each operation (the worst is kept)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    collector = MainThreadGc(app)  # noqa: F841 - as the app runs (app/main.py): collections on the GUI thread
    with tempfile.TemporaryDirectory() as tmp:
        paths = AppPaths(Path(tmp) / "data", Path(tmp) / "config")
        paths.data_dir.mkdir(parents=True)
        t0 = time.perf_counter()
        seed(paths.database, args.chats, args.folders)
        seed_s = time.perf_counter() - t0
        w = build_window(paths)
        w.resize(1280, 800)
        w.show()
        app.processEvents()
        lst = w.conversations
        folders = w.store.organise.folders()
        stalls: dict[str, float] = {}

        def worst(name: str, op: Callable[[], None], done: Callable[[], bool] | None = None) -> None:
            stalls[name] = round(max(measure(op, done=done) for _ in range(args.repeat)), 1)

        worst("open", w.chats.reload_conversations)
        hits = lambda: lst.mode == "hits"  # noqa: E731
        worst("filter", lambda: (lst.search.clear(), lst.search.setText("token42x")), done=hits)
        worst("filter_clear", lambda: lst.search.setText("token42x") or lst.search.clear(),
              done=lambda: lst.mode == "chats")  # fmt: skip
        lst.search.clear()
        app.processEvents()
        ids = [c.id for c in w.store.conversations()[:50]]
        targets = iter(folders * args.repeat)
        worst("move_50", lambda: w.chats.organise.move(ids, next(targets).id))
        worst("undo", w.undo.undo_last)
        victims = iter(w.store.conversations()[100:])
        worst("delete", lambda: w.chats.organise.trash([next(victims).id]))
        flips = iter([True, False] * args.repeat)
        index = lst.folder_index(folders[0].id)
        worst("collapse", lambda: lst.list.setExpanded(index, not next(flips)))
        convs = iter(w.store.conversations()[200:])
        worst("switch", lambda: w.chats.open_conversation(next(convs).id))
        rows = len(lst.chat_ids())
        w.close()
        w.join_background(10.0)
    result = {
        "chats": args.chats,
        "folders": len(folders),
        "rows_listed": rows,
        "seed_s": round(seed_s, 1),
        "stall_ms": stalls,
        "longest_stall_ms": max(stalls.values()),
        "budget_ms": BUDGET_MS,
        "within_budget": max(stalls.values()) <= BUDGET_MS,
    }
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
