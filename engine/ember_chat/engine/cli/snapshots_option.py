"""`--no-kv-snapshots` of `ember-chat run` and `serve`: the saved conversation caches (KV snapshots) in the
data folder, within the settings' cap, as the window keeps them (engine/inference/kv/snapshots.py)."""

from __future__ import annotations

import argparse
import sys

from ember_chat.engine.inference.kv.snapshots import SnapshotStore, open_snapshot_store
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import SettingsFile


def add_snapshot_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-kv-snapshots",
        action="store_true",
        help="keep no saved conversation caches (KV snapshots); by default a long prompt's evaluated state is "
        "kept in the data folder, as the window does, and restored when the conversation comes back",
    )


def snapshot_store(args: argparse.Namespace, paths: AppPaths) -> SnapshotStore | None:
    """The store the window would make; None with --no-kv-snapshots or a cap of 0 (off)."""
    if args.no_kv_snapshots:
        return None
    cap_mb = SettingsFile(paths.settings_file).load().kv_snapshot_cap_mb  # (its problems: said by load_settings)
    return open_snapshot_store(paths.data_dir, cap_mb)


def close_snapshot_store(store: SnapshotStore | None) -> None:
    """After the service (the model has put its caches into the store): written and closed; what went
    wrong with them (a damaged file, a full disk) said on stderr, one line each."""
    if store is None:
        return
    store.close()
    for problem in store.problems:
        print(f"ember-chat: {problem}", file=sys.stderr)
