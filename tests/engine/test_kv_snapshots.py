"""The KV snapshot store (engine/inference/kv/snapshots.py) on real files in tmp_path: RAM tier, disk tier
written by one background writer (atomic, checksummed), the cap with least-recently-used eviction,
superseding of prefix snapshots, lazy opening, damaged files refused, unwritable folders skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.kv.snapshot_files import MAGIC
from ember_chat.engine.inference.kv.snapshot_keys import SnapshotKey, SnapshotMatch, cache_settings_key, model_identity
from ember_chat.engine.inference.kv.snapshots import SnapshotStore

KEY = SnapshotKey("model-a", "settings-1")
OTHER = SnapshotKey("model-b", "settings-1")
WRITER = "ember-kv-snapshots"
N = SnapshotStore.MIN_TOKENS


def toks(n: int, start: int = 0) -> list[int]:
    return list(range(start, start + n))


def blob(size: int, fill: int) -> bytes:
    return bytes((fill + i) % 251 for i in range(size))


def writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WRITER]


def files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.kvsnap")) if directory.exists() else []


@pytest.fixture
def make_store() -> Iterator[Callable[..., SnapshotStore]]:
    made: list[SnapshotStore] = []

    def make(directory: Path | None, cap_bytes: int = 2**30, ram_bytes: int = 2**20) -> SnapshotStore:
        store = SnapshotStore(directory, cap_bytes, ram_bytes)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
    assert writers() == []  # every writer thread joined


def best(store: SnapshotStore, tokens: list[int], key: SnapshotKey = KEY) -> SnapshotMatch:
    match = store.best(key, tokens)
    assert match is not None
    return match


# ----- identities


def test_model_identity_changes_with_size_mtime_and_the_ends_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(os.urandom(3 * 2**20))
    first = model_identity(path)
    assert model_identity(path) == first
    st = path.stat()

    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # the last MiB, same size, same mtime
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert model_identity(path) != first

    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert model_identity(path) == first  # the same file again
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert model_identity(path) != first


def test_cache_settings_key_names_what_changes_the_cache_and_the_module_imports_no_llama_cpp(
    tiny_model: Path,
) -> None:
    import llama_cpp

    base = cache_settings_key(LoadConfig(tiny_model, n_ctx=2048), 5)
    assert base == cache_settings_key(LoadConfig(tiny_model, n_ctx=2048, threads=1), 5)  # threads do not matter
    assert llama_cpp.__version__ in base
    others = {
        cache_settings_key(LoadConfig(tiny_model, n_ctx=4096), 5),
        cache_settings_key(LoadConfig(tiny_model, n_ctx=2048), 3),
        cache_settings_key(LoadConfig(tiny_model, n_ctx=2048, kv_cache_type="q8_0"), 5),
        cache_settings_key(LoadConfig(tiny_model, n_ctx=2048, flash_attn=not LoadConfig.flash_attn), 5),
    }
    assert base not in others and len(others) == 4
    code = "import sys, ember_chat.engine.inference.kv.snapshots; print('llama_cpp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"  # the app's cold start does not pay for llama.cpp here


# ----- the RAM tier


def test_best_finds_the_longest_shared_prefix_of_the_same_key(make_store: Callable[..., SnapshotStore]) -> None:
    store = make_store(None)
    store.put(KEY, toks(N + 50), b"state-a")
    store.put(KEY, toks(N + 10, start=10_000), b"state-b")
    store.put(OTHER, toks(N + 100), b"state-other")

    match = best(store, [*toks(N + 50), 7, 8])
    assert (match.shared, match.source, match.tokens) == (N + 50, "ram", tuple(toks(N + 50)))
    assert store.load(match) == b"state-a"

    diverging = toks(N + 50)
    diverging[N + 20] = -1
    assert best(store, diverging).shared == N + 20
    assert best(store, toks(N + 30)).shared == N + 30  # a question shorter than the snapshot
    assert store.best(KEY, toks(N - 1)) is None  # too little shared to be worth restoring
    assert store.best(SnapshotKey("model-a", "settings-2"), toks(N + 50)) is None
    assert best(store, toks(N + 100), OTHER).shared == N + 100
    assert store.usage() == (3, len(b"state-a") + len(b"state-b") + len(b"state-other"))


def test_short_conversations_are_not_kept_and_a_prefix_is_superseded(
    make_store: Callable[..., SnapshotStore],
) -> None:
    store = make_store(None)
    store.put(KEY, toks(N - 1), b"short")
    assert store.usage() == (0, 0)

    store.put(KEY, toks(N), b"turn-1")
    store.put(OTHER, toks(N), b"other-model")
    store.put(KEY, toks(N + 40), b"turn-2")  # the same chat one answer later
    branch = [*toks(N + 10), *toks(30, start=9000)]
    store.put(KEY, branch, b"a-branch")  # diverges from turn-2: both kept
    assert store.usage() == (3, len(b"other-model") + len(b"turn-2") + len(b"a-branch"))
    match = best(store, toks(N + 20))
    assert store.load(match) == b"turn-2" and match.shared == N + 20
    assert store.load(best(store, toks(N))) == b"turn-2"  # a tie: the most recently used


def test_a_ram_only_store_drops_the_least_recently_used_over_its_budget(
    make_store: Callable[..., SnapshotStore],
) -> None:
    store = make_store(None, ram_bytes=2500)
    for i in range(3):
        store.put(KEY, toks(N, start=i * 1000), blob(1000, i))
    assert store.usage() == (2, 2000)
    assert store.best(KEY, toks(N, start=0)) is None
    best(store, toks(N, start=1000))  # now the most recently used
    store.put(KEY, toks(N, start=3000), blob(1000, 3))
    assert store.best(KEY, toks(N, start=2000)) is None
    assert store.load(best(store, toks(N, start=1000))) == blob(1000, 1)
    assert store.flush(timeout=5) and writers() == []  # nothing to write, no thread


# ----- the disk tier


def test_the_least_recently_used_go_to_disk_and_come_back_verified(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    folder = tmp_path / "kv-snapshots"
    store = make_store(folder, ram_bytes=2500)
    for i in range(3):
        store.put(KEY, toks(N, start=i * 1000), blob(1000, i))
    assert store.wait_idle(timeout=10)
    assert len(files(folder)) == 1 and not list(folder.glob(".*"))  # no temporary file left
    first = best(store, toks(N, start=0))
    assert first.source == "disk" and store.load(first) == blob(1000, 0)
    assert [best(store, toks(N, start=i * 1000)).source for i in (1, 2)] == ["ram", "ram"]
    count, size = store.usage()
    assert count == 3 and size == 2000 + files(folder)[0].stat().st_size


def test_a_restart_finds_the_snapshots_and_close_flushes_and_joins(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    folder = tmp_path / "kv"
    store = make_store(folder)
    store.put(KEY, toks(N + 5), blob(5000, 9))
    store.put(OTHER, toks(N + 6), blob(3000, 4))
    assert files(folder) == []  # kept in RAM until there is a reason to write
    store.close()
    assert writers() == [] and len(files(folder)) == 2

    again = make_store(folder)
    match = best(again, [*toks(N + 5), 1, 2, 3])
    assert (match.source, match.shared) == ("disk", N + 5)
    assert again.load(match) == blob(5000, 9)
    assert again.usage() == (2, sum(p.stat().st_size for p in files(folder)))
    assert again.problems == []


def test_nothing_is_read_before_the_first_best_or_usage(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    folder = tmp_path / "kv"
    first = make_store(folder)
    first.put(KEY, toks(N), blob(100, 1))
    first.close()
    damaged = folder / ("0" * 40 + ".kvsnap")
    damaged.write_bytes(b"not a snapshot at all")

    store = make_store(folder)
    store.put(OTHER, toks(N), blob(50, 2))  # into RAM: no reason to look at the folder
    assert damaged.exists() and store.problems == [] and writers() == []

    assert store.usage() == (2, 50 + files(folder)[0].stat().st_size)  # opened now: the damaged file went
    assert not damaged.exists() and len(store.problems) == 1
    assert damaged.name in store.problems[0] and "removed" in store.problems[0]


def _one_file_on_disk(folder: Path, make_store: Callable[..., SnapshotStore]) -> Path:
    store = make_store(folder)
    store.put(KEY, toks(N), blob(4000, 3))
    assert store.flush(timeout=10)
    [path] = files(folder)
    return path


def test_a_truncated_file_is_refused_and_removed(tmp_path: Path, make_store: Callable[..., SnapshotStore]) -> None:
    folder = tmp_path / "kv"
    path = _one_file_on_disk(folder, make_store)
    path.write_bytes(path.read_bytes()[:-100])
    store = make_store(folder)
    assert store.best(KEY, toks(N)) is None
    assert not path.exists() and "damaged" in store.problems[0]

    # truncated after it was found (another process, a failing disk): refused when loaded
    path = _one_file_on_disk(folder, make_store)
    store = make_store(folder)
    match = best(store, toks(N))
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size - 1)
    assert store.load(match) is None
    assert not path.exists() and len(store.problems) == 1 and path.name in store.problems[0]
    assert store.best(KEY, toks(N)) is None and store.usage() == (0, 0)


def _head_only_file(head: bytes) -> bytes:
    """A snapshot file whose header is `head` (valid for its length), no tokens, no state, a zero digest."""
    return MAGIC + len(head).to_bytes(4, "little") + head + b"\0" * 32


SURROGATE_HEAD = json.dumps({"format": 1, "model": "\ud800", "settings": "s", "tokens": 0, "state": 0}).encode()
DEEP_HEAD = b"[" * 60_000  # valid JSON's start, too deep for the parser


@pytest.mark.parametrize("head", [SURROGATE_HEAD, DEEP_HEAD], ids=["lone-surrogate", "deep-nesting"])
def test_a_header_that_breaks_the_parser_is_damaged_not_raised(
    tmp_path: Path, make_store: Callable[..., SnapshotStore], head: bytes
) -> None:
    folder = tmp_path / "kv"
    good = _one_file_on_disk(folder, make_store)
    bad = folder / ("0" * 40 + ".kvsnap")
    bad.write_bytes(_head_only_file(head))
    store = make_store(folder)
    match = best(store, toks(N))  # opening the folder: the bad file removed, the good one found
    assert match.source == "disk" and store.load(match) == blob(4000, 3)
    assert not bad.exists() and len(store.problems) == 1 and "damaged" in store.problems[0]
    assert best(store, toks(N)).ident == match.ident and len(store.problems) == 1  # (opened once)

    # damaged so after it was found: refused when loaded
    store = make_store(folder)
    match = best(store, toks(N))
    good.write_bytes(_head_only_file(head))
    assert store.load(match) is None
    assert not good.exists() and len(store.problems) == 1 and "damaged" in store.problems[0]
    assert store.best(KEY, toks(N)) is None and store.usage() == (0, 0)


def test_a_file_that_cannot_be_read_is_left_with_the_same_sentence_at_opening_and_at_load(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    folder = tmp_path / "kv"
    good = _one_file_on_disk(folder, make_store)
    unreadable = folder / ("1" * 40 + ".kvsnap")
    unreadable.mkdir()  # (not a file: opening it fails, for root too)
    store = make_store(folder)
    match = best(store, toks(N))  # the folder opened: the unreadable one left, and said
    [at_opening] = store.problems
    good.unlink()
    good.mkdir()
    assert store.load(match) is None and good.is_dir()
    [_, at_load] = store.problems
    assert at_opening.replace(str(unreadable), "PATH") == at_load.replace(str(good), "PATH")
    assert "could not be read" in at_load and "evaluated again" in at_load


def test_a_flipped_byte_fails_the_checksum(tmp_path: Path, make_store: Callable[..., SnapshotStore]) -> None:
    folder = tmp_path / "kv"
    path = _one_file_on_disk(folder, make_store)
    data = bytearray(path.read_bytes())
    data[-1000] ^= 0x01  # inside the state
    path.write_bytes(bytes(data))

    store = make_store(folder)
    match = best(store, toks(N))
    assert match.source == "disk"
    assert store.load(match) is None and store.load(match) is None
    assert not path.exists() and len(store.problems) == 1 and "damaged" in store.problems[0]
    assert store.usage() == (0, 0)

    # a flipped byte in the token list: the file no longer matches its name, refused when opening
    path = _one_file_on_disk(folder, make_store)
    data = bytearray(path.read_bytes())
    tokens_6_7_8 = b"\x06\x00\x00\x00\x07\x00\x00\x00\x08\x00\x00\x00"  # int32, little-endian
    data[data.index(tokens_6_7_8) + 4] ^= 0x01  # token 7 becomes 6
    path.write_bytes(bytes(data))
    store = make_store(folder)
    assert store.usage() == (0, 0) and not path.exists() and len(store.problems) == 1


def test_an_unwritable_folder_skips_the_snapshot_with_one_sentence(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    parent = tmp_path / "readonly"
    parent.mkdir()
    parent.chmod(0o500)
    try:
        folder = parent / "kv"
        if os.access(parent, os.W_OK):  # root ignores permissions: a file where the folder should be
            folder.write_bytes(b"")
        store = make_store(folder, ram_bytes=0)
        store.put(KEY, toks(N), blob(100, 1))
        store.put(KEY, toks(N, start=500), blob(100, 2))
        assert store.wait_idle(timeout=10)
        assert len(store.problems) == 1 and "be saved" in store.problems[0]  # (said once: at opening)
        assert str(folder) in store.problems[0]
        assert store.usage() == (0, 0) and store.best(KEY, toks(N)) is None
        assert store.flush(timeout=10)  # nothing left to write
    finally:
        parent.chmod(0o700)


def test_an_almost_full_disk_skips_the_snapshot(tmp_path: Path, make_store: Callable[..., SnapshotStore]) -> None:
    folder = tmp_path / "kv"
    store = make_store(folder)
    store.FREE_MARGIN_BYTES = 2**62  # more than any disk has free: this one is "almost full"
    store.put(KEY, toks(N), blob(100, 1))
    assert not store.flush(timeout=10)
    assert files(folder) == [] and len(store.problems) == 1 and "almost full" in store.problems[0]


def test_the_cap_evicts_the_least_recently_used_files(tmp_path: Path, make_store: Callable[..., SnapshotStore]) -> None:
    folder = tmp_path / "kv"
    probe = make_store(tmp_path / "probe")
    probe.put(KEY, toks(N), blob(2000, 0))
    assert probe.flush(timeout=10)
    one = files(tmp_path / "probe")[0].stat().st_size  # every file below has this size

    store = make_store(folder, cap_bytes=3 * one, ram_bytes=0)
    for i in range(3):
        store.put(KEY, toks(N, start=i * 1000), blob(2000, i))
        assert store.wait_idle(timeout=10)
    assert len(files(folder)) == 3
    best(store, toks(N, start=0))  # used: no longer the least recently used
    store.put(KEY, toks(N, start=3000), blob(2000, 3))
    assert store.wait_idle(timeout=10)
    assert store.usage() == (3, 3 * one)
    assert store.best(KEY, toks(N, start=1000)) is None
    assert store.load(best(store, toks(N, start=0))) == blob(2000, 0)

    store.set_cap(one)
    assert store.wait_idle(timeout=10)
    assert store.usage() == (1, one) and len(files(folder)) == 1
    assert store.load(best(store, toks(N, start=0))) == blob(2000, 0)

    store.set_cap(one - 1)  # a snapshot larger than the cap is not written, and the user is told
    assert store.wait_idle(timeout=10) and files(folder) == []
    store.put(KEY, toks(N, start=5000), blob(2000, 5))
    assert store.wait_idle(timeout=10)
    assert files(folder) == [] and "larger than the space" in store.problems[-1]


def test_a_cap_lowered_while_closed_is_enforced_when_the_folder_is_opened(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    folder = tmp_path / "kv"
    store = make_store(folder)
    for i in range(4):
        store.put(KEY, toks(N, start=i * 1000), blob(2000, i))
    store.close()
    paths = files(folder)
    assert len(paths) == 4
    one = paths[0].stat().st_size
    for age, path in enumerate(sorted(paths)):  # the first in name order: the least recently used
        os.utime(path, ns=(10**18 + age * 10**9, 10**18 + age * 10**9))

    again = make_store(folder, cap_bytes=2 * one)  # the setting lowered while Ember was closed
    assert again.usage()[0] in (2, 4)  # opened now: what is over the cap goes on the writer
    assert again.wait_idle(timeout=10) and again.usage() == (2, 2 * one)
    assert files(folder) == sorted(paths)[2:]  # the two most recently used kept
    assert again.problems == []


def test_a_superseded_snapshot_on_disk_is_deleted(tmp_path: Path, make_store: Callable[..., SnapshotStore]) -> None:
    folder = tmp_path / "kv"
    store = make_store(folder)
    store.put(KEY, toks(N), blob(500, 1))
    assert store.flush(timeout=10)
    [old] = files(folder)
    store.put(KEY, toks(N + 20), blob(600, 2))
    assert store.flush(timeout=10)
    [new] = files(folder)
    assert new != old and store.usage() == (1, new.stat().st_size)

    # a store that has not opened the folder yet supersedes the file when it does
    later = make_store(folder)
    later.put(KEY, toks(N + 40), blob(700, 3))
    assert later.flush(timeout=10)
    [newest] = files(folder)
    assert newest not in (old, new) and later.usage() == (1, newest.stat().st_size)


def test_clear_removes_files_of_earlier_runs_and_stale_temporaries(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    folder = tmp_path / "kv"
    _one_file_on_disk(folder, make_store)
    stale = folder / ".crashed-write.kvsnap-tmp"
    stale.write_bytes(b"half a snapshot")
    os.utime(stale, (1, 1))
    fresh = folder / ".another-process-writing.kvsnap-tmp"
    fresh.write_bytes(b"being written")

    store = make_store(folder)
    assert store.usage()[0] == 1
    assert not stale.exists() and fresh.exists()  # another Ember may be writing that one
    match = best(store, toks(N))
    store.clear()
    assert files(folder) == [] and store.usage() == (0, 0)
    assert store.load(match) is None and store.problems == []  # gone, not damaged


def test_clear_while_another_thread_puts(tmp_path: Path, make_store: Callable[..., SnapshotStore]) -> None:
    folder = tmp_path / "kv"
    store = make_store(folder, ram_bytes=3000)
    done = threading.Event()
    failures: list[BaseException] = []

    def engine() -> None:
        try:
            for i in range(150):
                store.put(KEY if i % 2 else OTHER, toks(N + i % 7, start=i * 1000), blob(1000, i))
                store.best(KEY, toks(N, start=(i - 1) * 1000))
        except BaseException as exc:  # (reported by the main thread)
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=engine)
    thread.start()
    clears = 0
    try:
        while not done.is_set() or clears == 0:
            store.clear()
            store.usage()
            clears += 1
    finally:
        thread.join()
    assert failures == []
    assert store.flush(timeout=10)
    count, size = store.usage()
    assert count == len(files(folder)) and size == sum(p.stat().st_size for p in files(folder))
    store.clear()
    assert store.wait_idle(timeout=10)
    assert store.usage() == (0, 0) and not any(folder.glob("*")) and store.problems == []  # (no folder: all right)


def test_the_same_conversation_put_again_before_the_folder_is_opened_keeps_one_file(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    folder = tmp_path / "kv"
    path = _one_file_on_disk(folder, make_store)
    store = make_store(folder)
    store.put(KEY, toks(N), blob(4000, 3))  # restored, answered nothing new, put again at model unload
    match = best(store, toks(N + 1))
    assert match.source == "ram" and store.usage() == (1, path.stat().st_size)  # one snapshot, its file
    assert store.flush(timeout=10)
    assert files(folder) == [path] and store.load(best(store, toks(N))) == blob(4000, 3)
