"""Saved conversation caches (KV snapshots): a conversation's llama.cpp sequence state, kept so that a chat
that comes back (switched to again, reopened after a restart, an API client resending its history) has
its prompt restored instead of evaluated again.

The latest snapshots stay in RAM (up to `ram_bytes`); the least recently used go to disk, one file each
(`<directory>/<sha1>.kvsnap`, written by ONE background thread: a temporary file, fsync, os.replace; a
header, the token list, the state, and a sha256 over all of them), within `cap_bytes` (least recently
used files deleted). A snapshot belongs to a `SnapshotKey` (the model file and the load settings that
change the cache; snapshot_keys.py); `best()` finds the one of a key that shares the longest token
prefix with a prompt.

Nothing here raises on a damaged file, a full disk or an unwritable folder: the snapshot is not used
(or not kept), the file is removed, and a sentence for the user goes to `problems`. Opening is lazy:
the folder is read at the first `best()`/`usage()` (or when something must be written), so a restart
with gigabytes of snapshots starts as fast as without. Every method is thread-safe.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ember_chat.engine.inference.kv.prefix import common_prefix
from ember_chat.engine.inference.kv.snapshot_files import (
    DIGEST_BYTES,
    UNREADABLE,
    Damaged,
    damaged_sentence,
    file_head,
    folder_problem,
    read_state,
    scan_folder,
    snapshot_ident,
    unlink,
    unreadable_sentence,
    unsaved_sentence,
    write_temporary,
)
from ember_chat.engine.inference.kv.snapshot_keys import SnapshotKey, SnapshotMatch
from ember_chat.engine.storage.paths import KV_SNAPSHOT_FOLDER, KV_SNAPSHOT_SUFFIX
from ember_chat.engine.storage.privacy import drop_conversation_caches

log = logging.getLogger(__name__)

_MIB = 2**20


@dataclass(eq=False)
class _Entry:
    ident: str
    key: SnapshotKey
    tokens: tuple[int, ...]
    state: bytes | None = None  # in RAM
    disk: int = 0  # the file's size, when it is on disk
    queued: bool = False  # the writer has it to write


@dataclass(frozen=True)
class SnapshotUsage:
    """The snapshots by where they are: RAM (not yet written: at the latest when Ember quits) and disk.
    One that is both (written, or found on disk, while its state is still held) counts as on disk."""

    ram_count: int = 0
    ram_bytes: int = 0
    disk_count: int = 0
    disk_bytes: int = 0


class SnapshotStore:
    MIN_TOKENS = 256  # shorter conversations are not worth a snapshot
    FREE_MARGIN_BYTES = 256 * _MIB  # a snapshot that would leave less free disk space than this is skipped

    def __init__(self, directory: Path | None, cap_bytes: int, ram_bytes: int = 512 * _MIB) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.problems: list[str] = []
        self.blocked: str | None = None  # why snapshots cannot be saved there (found at opening), for the user
        self._said: set[str] = set()
        self._cap = max(0, cap_bytes)
        self._ram = max(0, ram_bytes)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # the writer's jobs and its being busy
        self._open_lock = threading.Lock()
        self._opened = self.directory is None
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._jobs: deque[tuple[str, str]] = deque()  # ("write" | "delete", ident), ("cap" | "stop", "")
        self._busy = False
        self._writer: threading.Thread | None = None
        self._generation = 0  # clear() makes what the writer was doing obsolete
        self._failures = 0
        self._closed = False

    # ----- the engine's side

    def put(self, key: SnapshotKey, tokens: Sequence[int], state: bytes) -> None:
        """Keep a conversation's state (in RAM; returns at once). A snapshot of the same key whose tokens
        are a prefix of these is superseded; RAM over budget sends the least recently used to disk."""
        if len(tokens) < self.MIN_TOKENS or not state:
            return
        toks = tuple(tokens)
        entry = _Entry(snapshot_ident(key.model, key.settings, toks), key, toks, bytes(state))
        with self._lock:
            if self._closed:
                return
            for old in list(self._entries.values()):
                if old.key == key and len(old.tokens) <= len(toks) and toks[: len(old.tokens)] == old.tokens:
                    self._remove_locked(old)
            self._entries[entry.ident] = entry
            self._spill_locked()

    def best(self, key: SnapshotKey, tokens: Sequence[int]) -> SnapshotMatch | None:
        """The snapshot of this key sharing the longest token prefix (at least MIN_TOKENS) with `tokens`;
        ties: the one in RAM, then the most recently used. Marks it recently used."""
        if len(tokens) < self.MIN_TOKENS:
            return None
        self._ensure_open()
        toks = tuple(tokens)
        with self._lock:
            chosen: _Entry | None = None
            most = self.MIN_TOKENS - 1
            for entry in reversed(self._entries.values()):
                if entry.key != key:
                    continue
                shared = common_prefix(entry.tokens, toks)
                if shared > most or (
                    shared == most and chosen is not None and chosen.state is None and entry.state is not None
                ):
                    chosen, most = entry, shared
            if chosen is None:
                return None
            self._entries.move_to_end(chosen.ident)
            return SnapshotMatch(chosen.tokens, most, "ram" if chosen.state is not None else "disk", chosen.ident)

    def load(self, match: SnapshotMatch) -> bytes | None:
        """The match's state; None when it is gone, or its file is damaged (then removed, and said)."""
        with self._lock:
            entry = self._entries.get(match.ident)
            if entry is None:
                return None
            self._entries.move_to_end(entry.ident)
            if entry.state is not None:
                return entry.state
            if not entry.disk or self.directory is None:
                return None
        path = self._path(entry.ident)
        try:
            with path.open("rb") as fh:
                state = read_state(fh, entry.key.model, entry.key.settings, entry.tokens)
        except FileNotFoundError:  # removed by hand, or by another Ember sharing the folder
            self._forget(entry, None)
            return None
        except Damaged as exc:
            self._forget(entry, str(exc))
            return None
        except OSError as exc:
            with self._lock:
                self._report_locked(unreadable_sentence(path, exc))
            return None
        except Exception:  # whatever else the file's contents raise: damaged, never the caller's problem
            log.debug("damaged KV snapshot %s", path, exc_info=True)
            self._forget(entry, UNREADABLE)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used, for the next run's order too
        return state

    # ----- the window's and the app's side

    def usage(self) -> tuple[int, int]:
        """(count, bytes) of the snapshots: files on disk plus those only in RAM."""
        self._ensure_open()
        with self._lock:
            return len(self._entries), sum(e.disk or len(e.state or b"") for e in self._entries.values())

    def tiers(self) -> SnapshotUsage:
        """What usage() counts, RAM and disk apart (for the window: RAM-only snapshots have no file yet)."""
        self._ensure_open()
        with self._lock:
            ram = [len(e.state) for e in self._entries.values() if not e.disk and e.state is not None]
            disk = [e.disk for e in self._entries.values() if e.disk]
        return SnapshotUsage(len(ram), sum(ram), len(disk), sum(disk))

    def clear(self) -> None:
        """Delete every snapshot, in RAM and on disk (files of earlier runs too, and the temporary files of
        writes that crashed or are under way: a write under way is dropped, its file was this one's)."""
        with self._lock:
            self._generation += 1
            self._entries.clear()
            self._jobs = deque(job for job in self._jobs if job[0] == "stop")
            if self.directory is not None:
                drop_conversation_caches(self.directory)
            self._opened = True  # (an opening under way sees the generation change and keeps nothing)
            self._changed.notify_all()

    def set_cap(self, cap_bytes: int) -> None:
        """The disk space snapshots may take; files beyond it are deleted (least recently used first)."""
        with self._lock:
            self._cap = max(0, cap_bytes)
            if self.directory is not None and not self._closed:
                self._queue_locked(("cap", ""))

    def flush(self, timeout: float | None = None) -> bool:
        """Move every RAM snapshot to disk and wait for the writer; True when all were written."""
        if self.directory is None:
            return True
        with self._lock:
            if self._closed:
                return not any(e.state is not None for e in self._entries.values())
            failures = self._failures
            for entry in self._entries.values():
                self._send_to_disk_locked(entry)
        idle = self.wait_idle(timeout)
        with self._lock:
            return idle and self._failures == failures

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until the writer has done what it was given (without giving it more); True when it has."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._jobs and not self._busy, timeout)

    def close(self, flush: bool = True) -> None:
        """Flush (at most 10 s; not with flush=False: what is only in RAM is dropped) and join the writer
        (at most 10 s). Later puts are ignored; clear() still deletes the files."""
        if flush:
            self.flush(timeout=10)
        with self._lock:
            self._closed = True
            writer = self._writer
            if writer is not None:
                self._jobs.appendleft(("stop", ""))
                self._changed.notify_all()
        if writer is not None:
            writer.join(timeout=10)

    # ----- inside (the _locked methods are called with self._lock held)

    def _path(self, ident: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{ident}{KV_SNAPSHOT_SUFFIX}"

    def _report_locked(self, sentence: str) -> None:
        if sentence not in self._said:
            self._said.add(sentence)
            self.problems.append(sentence)
            log.warning("%s", sentence)

    def _forget(self, entry: _Entry, damage: str | None) -> None:
        with self._lock:
            if self._entries.get(entry.ident) is not entry:
                return  # cleared, superseded or replaced meanwhile: its file is not this entry's to judge
            del self._entries[entry.ident]
            if damage is not None:
                self._report_locked(damaged_sentence(self._path(entry.ident), damage))

    def _remove_locked(self, entry: _Entry) -> None:
        if self._entries.get(entry.ident) is entry:
            del self._entries[entry.ident]
            if entry.disk:
                self._queue_locked(("delete", entry.ident))

    def _send_to_disk_locked(self, entry: _Entry) -> None:
        if entry.state is None or entry.queued:
            return
        if entry.disk:  # already there (found on disk when the folder was opened)
            entry.state = None
        else:
            entry.queued = True
            self._queue_locked(("write", entry.ident))

    def _spill_locked(self) -> None:
        over = sum(len(e.state) for e in self._entries.values() if e.state is not None and not e.queued)
        over -= self._ram
        for entry in list(self._entries.values()):
            if over <= 0:
                return
            if entry.state is None or entry.queued:
                continue
            over -= len(entry.state)
            if self.directory is None:
                del self._entries[entry.ident]
            else:
                self._send_to_disk_locked(entry)

    def _queue_locked(self, job: tuple[str, str]) -> None:
        self._jobs.append(job)
        if self._writer is None and not self._closed:
            self._writer = threading.Thread(target=self._run, name="ember-kv-snapshots", daemon=True)
            self._writer.start()
        self._changed.notify_all()

    def _enforce_cap_locked(self) -> None:
        total = sum(e.disk for e in self._entries.values())
        for entry in list(self._entries.values()):  # least recently used first
            if total <= self._cap:
                return
            if entry.disk:
                total -= entry.disk
                del self._entries[entry.ident]
                unlink(self._path(entry.ident))

    # ----- opening the folder

    def _ensure_open(self) -> None:
        if self._opened:
            return
        with self._open_lock:
            if self._opened:
                return
            with self._lock:
                generation = self._generation
            try:
                found, problems = scan_folder(self.directory) if self.directory is not None else ([], [])
                blocked = folder_problem(self.directory, self.FREE_MARGIN_BYTES) if self.directory else None
            except Exception:  # (scan_folder says what it can; nothing may make every best() fail again)
                log.exception("KV snapshots: reading %s", self.directory)
                found, problems, blocked = [], [], None
            if blocked is not None:
                problems.append(blocked)
            self.blocked = blocked
            with self._lock:
                for sentence in problems:
                    self._report_locked(sentence)
                if generation == self._generation:
                    merged: OrderedDict[str, _Entry] = OrderedDict()
                    for file in sorted(found, key=lambda f: f.mtime_ns):  # the oldest: the least recently used
                        current = self._entries.get(file.ident)
                        if current is not None:  # put before the folder was opened: that file is its own
                            current.disk = file.size
                        else:
                            key = SnapshotKey(file.model, file.settings)
                            merged[file.ident] = _Entry(file.ident, key, file.tokens, disk=file.size)
                    merged.update(self._entries)
                    self._entries = merged
                    self._supersede_all_locked()
                self._opened = True
                on_disk = sum(e.disk for e in self._entries.values())
                if self.directory is not None and not self._closed and on_disk > self._cap:
                    self._queue_locked(("cap", ""))  # (a cap lowered while Ember was closed)

    def _supersede_all_locked(self) -> None:
        groups: dict[SnapshotKey, list[_Entry]] = {}
        for entry in self._entries.values():
            groups.setdefault(entry.key, []).append(entry)
        for group in groups.values():
            group.sort(key=lambda e: len(e.tokens))
            for i, entry in enumerate(group):
                n = len(entry.tokens)
                if any(len(o.tokens) > n and o.tokens[:n] == entry.tokens for o in group[i + 1 :]):
                    self._remove_locked(entry)

    # ----- the writer thread

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._jobs:
                    self._changed.wait()
                kind, ident = self._jobs.popleft()
                self._busy = True
            try:
                if kind == "stop":
                    return
                self._ensure_open()
                if kind == "write":
                    self._write(ident)
                elif kind == "delete":
                    with self._lock:
                        current = self._entries.get(ident)
                        if current is None or not current.disk:  # (not re-written since)
                            unlink(self._path(ident))
                else:
                    with self._lock:
                        self._enforce_cap_locked()
            except Exception:  # one snapshot must never stop the writer
                log.exception("KV snapshot writer")
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _write(self, ident: str) -> None:
        assert self.directory is not None
        with self._lock:
            entry = self._entries.get(ident)
            if entry is None or entry.state is None:
                return
            if entry.disk:
                entry.state, entry.queued = None, False
                return
            generation, state, cap = self._generation, entry.state, self._cap
        head = file_head(entry.key.model, entry.key.settings, entry.tokens, len(state))
        size = len(head) + len(state) + DIGEST_BYTES
        tmp, problem = write_temporary(self.directory, head, state, cap, self.FREE_MARGIN_BYTES)
        with self._lock:
            ours = generation == self._generation and self._entries.get(ident) is entry
            if tmp is not None and ours:
                try:
                    os.replace(tmp, self._path(ident))
                except OSError as exc:
                    problem = unsaved_sentence(self.directory, exc)
                else:
                    entry.disk, entry.state, entry.queued, tmp = size, None, False, None
                    self._enforce_cap_locked()
            if tmp is not None:
                unlink(tmp)
            if problem is not None:
                self._failures += 1
                if self.blocked is None:  # (else its cause was said when the store opened)
                    self._report_locked(problem)
                if ours:
                    del self._entries[ident]


def open_snapshot_store(data_dir: Path, cap_mb: int) -> SnapshotStore | None:
    """The store of saved conversation caches in the data folder (the window's and the command line's:
    `<data_dir>/kv-snapshots`, nothing read until it is first asked), within `cap_mb` MB; None when the
    cap is 0 (off)."""
    return SnapshotStore(Path(data_dir) / KV_SNAPSHOT_FOLDER, cap_mb * _MIB) if cap_mb > 0 else None
