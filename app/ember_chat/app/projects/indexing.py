"""A project's knowledge kept current in the window (`window.projects.indexing`): the engine's indexer
(engine/projects/indexer.py: incremental, each file read in a child process; the passages embedded with
the project's embedding model when it has one, loaded for the run) run off the GUI thread, one run at a
time per project, with its progress (files, pages, passages) said on the GUI thread;
pausing stops the run between files (or kills the read under way), resuming runs it again (it goes on
where it stopped: only new or changed files are read). The first run of a project after Ember starts
reads again the files skipped for a cause not their own (a reader that could not start or stopped
unexpectedly: indexer.Retry); `retry` reads the skipped files the user chose again (Try again).
A watcher (engine/projects/watch.py: stat-only polls) per project with knowledge to watch runs the
indexer again when files are added, changed or deleted, or when a source's own path goes or comes back
(a drive unplugged): the run says which sources are not there (`unreachable`; their passages are kept).
What the index holds (per source: files, pages, passages, the skipped files with their reasons, the
folders its last walk could not list, their files kept) is read off the GUI thread too (`read_state`;
while a run goes, its counts and those folders only).
Nothing here opens, changes or removes a user's file other than reading it through the indexer.

Built from the AppContext and the ProjectStore; the settings dialog and the chat list listen to its
signals. `close()` stops every run and watcher (the window's close); `join()` waits for them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from ember_chat.app.context import AppContext
from ember_chat.app.engine_link.gui_mailbox import GuiMailbox
from ember_chat.engine.errors import EmberError
from ember_chat.engine.projects.index import KnowledgeIndex, UnreadFolder
from ember_chat.engine.projects.indexer import Indexer, IndexProgress, IndexRun, Retry
from ember_chat.engine.projects.rankers import load_embedder
from ember_chat.engine.projects.records import KnowledgeSource, ProjectStore
from ember_chat.engine.projects.scan import ScanProblem, under
from ember_chat.engine.projects.watch import DEFAULT_INTERVAL_S, Changes, KnowledgeWatcher

INDEX_FILE = "knowledge.sqlite3"  # in the project's folder (ProjectStore.knowledge_folder)
PROGRESS_EVERY_S = 0.1  # a run's progress is said at most this often (and at its end)
WATCH_COLLECT_MS = 1000  # how often the GUI thread looks for what the watchers saw change


@dataclass
class SourceState:
    """What the index holds of one knowledge source: its files by state, their pages and passages."""

    files: int = 0
    indexed: int = 0
    pending: int = 0
    skipped: int = 0
    pages: int = 0
    passages: int = 0


@dataclass
class KnowledgeState:
    """A project's index as last read: per source id, its counts, the folders its last walk could not
    list (`unread`: their files kept) and (a full read) its skipped files. `skipped` is None for a read of
    the counts only (`read_state(counts_only=True)`: what a run's rows follow; the skipped files of a large
    index are many rows, read when the run is over)."""

    sources: dict[int, SourceState] = field(default_factory=dict)
    skipped: dict[int, list[tuple[str, str]]] | None = field(default_factory=dict)  # by source: (path, reason)
    unread: dict[int, list[UnreadFolder]] = field(default_factory=dict)  # by source


class ProjectIndexing(QObject):
    progress = Signal(int, object)  # folder id, IndexProgress (GUI thread)
    run_changed = Signal(int)  # folder id: a run started, ended or was paused
    finished = Signal(int, object)  # folder id, IndexRun of a run that ended (stopped or not)
    failed = Signal(int, str)  # folder id, why a run could not be made

    def __init__(self, ctx: AppContext, projects: ProjectStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.projects = projects
        self._stops: dict[int, threading.Event] = {}  # the runs under way, by project
        self._again: set[int] = set()  # a run was asked while one ran: run again after it
        self._retry: dict[int, set[str]] = {}  # skipped files the user asked to try again, by project: until read
        self._tried: set[int] = set()  # projects a run ended for since Ember started (their reader failures retried)
        self.paused: set[int] = set()  # projects whose indexing the user paused: until Ember restarts (see `pause`)
        self.last: dict[int, IndexProgress] = {}  # the last progress said, by project
        self.problems: dict[int, list[str]] = {}  # the last run's problems, by project
        self.results: dict[int, IndexRun] = {}  # the last run's outcome, by project
        self.unreachable: dict[int, dict[int, ScanProblem]] = {}  # by project, its sources not walked: by source id
        self._gone: set[int] = set()  # projects deleted: what their last run said is forgotten, not kept
        self._threads: list[threading.Thread] = []
        self._watchers: dict[int, KnowledgeWatcher] = {}
        self._seen: GuiMailbox[int] = GuiMailbox()  # folder ids whose files changed (watcher threads post)
        self._collect = QTimer(self)
        self._collect.setInterval(WATCH_COLLECT_MS)
        self._collect.timeout.connect(self._changed_on_disk)
        self.watch_interval_s = DEFAULT_INTERVAL_S  # between a watcher's polls
        self._closed = False

    def index_path(self, folder_id: int) -> Path:
        return self.projects.knowledge_folder(folder_id) / INDEX_FILE

    def running(self, folder_id: int) -> bool:
        return folder_id in self._stops

    # ----- runs
    def run(self, folder_id: int) -> None:
        """Bring the project's index up to date (a run under way goes on, and runs again after)."""
        if self._closed or folder_id in self.paused:
            return
        if folder_id in self._stops:
            self._again.add(folder_id)
            return
        try:
            project = self.projects.project(folder_id)
        except EmberError as exc:  # (the project went meanwhile)
            self.failed.emit(folder_id, str(exc))
            return
        sources = [s for s in project.sources if not s.paused]
        known = {s.id for s in project.sources}
        path = self.index_path(folder_id)
        embedding, library = project.embedding_model, self.ctx.library
        reading = {p: sid for p in self._retry.get(folder_id, ()) if (sid := _holder(p, sources)) is not None}
        retry = Retry(folder_id not in self._tried, frozenset(reading))
        stop = threading.Event()
        self._stops[folder_id] = stop

        def index(report: Callable[[IndexProgress], None]) -> IndexRun:
            embedder, problem = load_embedder(embedding, library.resolve)
            knowledge = KnowledgeIndex(path)
            try:  # (the files of sources removed from the project go: known)
                indexer = Indexer(knowledge, sources, embedder=embedder, retry=retry, known=known)
                run = indexer.run(_every(report, PROGRESS_EVERY_S), stop.is_set)
                run.embedding_problem = run.embedding_problem or problem
                return run
            finally:
                knowledge.close()
                if embedder is not None:
                    embedder.close()

        self.ctx.tasks.run_reporting(
            index,
            lambda p: self._progressed(folder_id, p),
            lambda result: self._ended(folder_id, result, reading=reading),
            lambda reason: self._ended(folder_id, None, reason),
            cancel=stop.set,
            own_thread=True,  # (a long run never holds up the window's short tasks)
        )
        self.run_changed.emit(folder_id)

    def pause(self, folder_id: int) -> None:
        """Stop indexing this project (between files; a read under way is killed) until `resume`, or until
        Ember restarts (as the Knowledge tab says): kept in memory only. To keep a source from being read for
        good, the user pauses the source (KnowledgeSource.paused, kept in the chat database); a project-wide
        pause is a "not now" (a laptop on battery, a large first index), and a setting kept by folder id
        outside the chat database would outlive the folder (a backup restored, the folder deleted)."""
        self.paused.add(folder_id)
        self._again.discard(folder_id)
        stop = self._stops.get(folder_id)
        if stop is not None:
            stop.set()
        self.run_changed.emit(folder_id)

    def resume(self, folder_id: int) -> None:
        self.paused.discard(folder_id)
        self.run(folder_id)
        self.run_changed.emit(folder_id)

    def _progressed(self, folder_id: int, progress: IndexProgress) -> None:
        self.last[folder_id] = progress
        self.progress.emit(folder_id, progress)

    def _forget(self, folder_id: int) -> None:
        for said in (self.last, self.problems, self.results, self.unreachable):
            said.pop(folder_id, None)

    def retry(self, folder_id: int, paths: Iterable[str]) -> None:
        """Read these skipped files again (the user's Try again), whatever the reason they were skipped:
        now, or after the run under way (kept until a run reads them through, a pause included; those of
        a paused source, or of one not there, until it is resumed or back: `retry_waiting`)."""
        self._retry.setdefault(folder_id, set()).update(paths)
        self.run(folder_id)

    def retry_waiting(self, folder_id: int) -> int:
        """How many files the user asked to try again wait for a run that can read them (their source is
        paused, or was not there at the last run)."""
        return 0 if self.running(folder_id) else len(self._retry.get(folder_id, ()))

    def _ended(
        self, folder_id: int, result: IndexRun | None, reason: str = "", reading: dict[str, int] | None = None
    ) -> None:
        self._stops.pop(folder_id, None)
        if result is not None and not result.stopped and reading is not None:  # (read through: tried)
            self._tried.add(folder_id)
            done = {p for p, sid in reading.items() if sid not in result.unreachable}
            try:  # (the rest waits for its source to be resumed or back; a source removed takes its own)
                sources = self.projects.project(folder_id).sources
            except EmberError:
                sources = ()
            left = {p for p in self._retry.get(folder_id, set()) - done if _holder(p, sources) is not None}
            if left:
                self._retry[folder_id] = left
            else:
                self._retry.pop(folder_id, None)
        if result is None:
            self.failed.emit(folder_id, reason)
        else:
            self.problems[folder_id] = [p.reason for p in result.problems]  # (each names its path)
            if result.embedding_problem:
                self.problems[folder_id].append(result.embedding_problem)
            self.results[folder_id] = result
            if not result.walked:  # (stopped in its walk: a source not reached yet is as the last run found it)
                self.unreachable.setdefault(folder_id, {}).update(result.unreachable)
            else:
                self.unreachable[folder_id] = dict(result.unreachable)
            self.finished.emit(folder_id, result)
        if folder_id in self._gone:  # (a run stopped as its project was deleted: nothing to show it in)
            self._forget(folder_id)
        self.run_changed.emit(folder_id)
        if folder_id in self._again:
            self._again.discard(folder_id)
            self.run(folder_id)

    # ----- what the index holds
    def read_state(
        self,
        folder_id: int,
        done: Callable[[KnowledgeState], None],
        owner: QObject,
        counts_only: bool = False,
        failed: Callable[[str], None] | None = None,
    ) -> None:
        """Read, off the GUI thread, what the index holds of each source; `done` on the GUI thread, unless
        `owner` (what `done` shows it in) was deleted meanwhile. `counts_only`: the counts of one grouped
        query, without the skipped files (see KnowledgeState). `failed`: why it could not be read (else
        said in the window's error banner)."""
        path = self.index_path(folder_id)
        key = f"project-knowledge-{folder_id}-{id(owner)}" + ("-counts" if counts_only else "")

        def read() -> KnowledgeState:
            state = KnowledgeState(skipped=None if counts_only else {})
            if not path.exists():
                return state
            knowledge = KnowledgeIndex(path)
            try:
                for sid, c in knowledge.counts_by_source().items():
                    state.sources[sid] = SourceState(c.files, c.indexed, c.pending, c.skipped, c.pages, c.passages)
                for folder in knowledge.unread_folders():
                    state.unread.setdefault(folder.source_id, []).append(folder)
                if state.skipped is not None:
                    for sid, file, reason in knowledge.skipped_files():
                        state.skipped.setdefault(sid, []).append((file, reason))
            finally:
                knowledge.close()
            return state

        tasks = self.ctx.tasks
        task = tasks.run(read, done, failed or self.ctx.notifier.show_error, key=key)
        owner.destroyed.connect(task.cancel)

    # ----- watching
    def watch_all(self) -> None:
        """Index every project once (incremental: quick when nothing changed) and watch its knowledge;
        projects gone stop being watched."""
        projects = self.projects.projects()
        ids = {p.folder_id for p in projects}
        for gone in set(self._watchers) - ids:
            self.unwatch(gone)
        for project in projects:
            if any(not s.paused for s in project.sources):
                self.watch(project.folder_id)
                self.run(project.folder_id)

    def reconcile(self, *_changed: object) -> None:
        """After the chat list changed (a folder deleted, an undo): a project gone (deleted with its
        folder, or with the folder above it) stops indexing and being watched; one back (undone) is
        watched and brought up to date again."""
        if self._closed:
            return
        projects = {p.folder_id: p for p in self.projects.projects()}
        for gone in set(self._watchers) - set(projects):
            self.unwatch(gone)
            stop = self._stops.get(gone)
            if stop is not None:  # (its run would write on into the index of a project that is gone)
                stop.set()
        for gone in {*self.last, *self.problems, *self.results, *self.unreachable, *self._stops} - set(projects):
            self._gone.add(gone)
            self._forget(gone)
        self._gone -= set(projects)  # (an undo brought it back)
        for folder_id, project in projects.items():
            if folder_id not in self._watchers and any(not s.paused for s in project.sources):
                self.watch(folder_id)
                if folder_id not in self.paused:
                    self.run(folder_id)

    def watch(self, folder_id: int) -> None:
        if self._closed or folder_id in self._watchers:
            return

        def sources() -> list[KnowledgeSource]:
            try:
                project = self.projects.project(folder_id)
            except EmberError:  # (its folder deleted: nothing to watch, unless an undo brings it back)
                return []
            return [s for s in project.sources if not s.paused]

        def changed(_changes: Changes) -> None:
            self._seen.post(folder_id)  # (the watcher's thread: the GUI thread's timer collects it)

        watcher = KnowledgeWatcher(sources, changed, self.watch_interval_s)
        self._watchers[folder_id] = watcher
        watcher.start()
        self._collect.start()

    def unwatch(self, folder_id: int) -> None:
        watcher = self._watchers.pop(folder_id, None)
        if watcher is not None:
            self._stop_later(watcher)
        if not self._watchers:
            self._collect.stop()

    def watching(self, folder_id: int) -> bool:
        return folder_id in self._watchers

    def _changed_on_disk(self) -> None:
        for folder_id in set(self._seen.collect()):
            if folder_id in self._watchers:
                self.run(folder_id)

    def _stop_later(self, watcher: KnowledgeWatcher) -> None:
        """The watcher told to stop, joined on a thread of its own (a walk under way may take a while)."""
        thread = threading.Thread(target=watcher.stop, name="ember-knowledge-watcher-stop", daemon=True)
        self._threads.append(thread)
        thread.start()

    # ----- closing
    def close(self) -> None:
        """Every run stopped and every watcher told to stop (the window closes)."""
        self._closed = True
        self._collect.stop()
        for stop in self._stops.values():
            stop.set()
        for folder_id in list(self._watchers):
            self.unwatch(folder_id)
        self._seen.close()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the watchers to end (the runs are the task runner's: its join waits for them)."""
        for thread in self._threads:
            thread.join(timeout)
        return not any(t.is_alive() for t in self._threads)


def _holder(path: str, sources: Iterable[KnowledgeSource]) -> int | None:
    """The id of the source whose walk finds the file `path` (itself, or a folder above it), if any."""
    return next((source.id for source in sources if under(path, [source.path])), None)


def _every(report: Callable[[IndexProgress], None], seconds: float) -> Callable[[IndexProgress], None]:
    """`report`, called at most every `seconds` (the GUI thread shows a run of small files in batches,
    not a label set a thousand times), and always for the run's last word (no file being read)."""
    last = [0.0]

    def throttled(progress: IndexProgress) -> None:
        now = time.monotonic()
        if progress.current is None or now - last[0] >= seconds:
            last[0] = now
            report(progress)

    return throttled
