"""The Knowledge tab of a project's settings: its files and folders, each with its state (files, pages,
passages, the files skipped and why), added (Add folder…, Add files…), removed (only forgotten: the files
on disk are never touched), paused and resumed; a path that came with an imported chat shows paused, with
a warning, until the user confirms it. Below, the project's embedding model and reranker (saved at once;
pickers of the models installed that can do it: model_choice.py), the indexing's progress and its
Pause/Resume.

It acts through the ProjectStore (the list) and ProjectIndexing (the runs, and what the index holds,
read off the GUI thread); it opens no file itself."""

from __future__ import annotations

import os
from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.projects import knowledge_questions, knowledge_rows
from ember_chat.app.projects.indexing import KnowledgeState, ProjectIndexing, SourceState
from ember_chat.app.projects.model_choice import ModelChoice, ModelUses
from ember_chat.app.projects.skipped_files import skipped_files_dialog
from ember_chat.app.qt.plain_text import plain_tooltip
from ember_chat.engine.errors import EmberError
from ember_chat.engine.projects.index import UnreadFolder
from ember_chat.engine.projects.indexer import IndexProgress, IndexRun
from ember_chat.engine.projects.records import KnowledgeSource, Project, ProjectStore
from ember_chat.engine.projects.scan import ScanProblem

SOURCE_ID = Qt.ItemDataRole.UserRole
REREAD_MS = 250  # during a run, the rows' counts are read again from the index this long after the last read


class KnowledgePanel(QWidget):
    def __init__(
        self,
        projects: ProjectStore,
        indexing: ProjectIndexing,
        folder_id: int,
        models: Sequence[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        """`models`: the models installed, offered as the project's embedding model and reranker (until
        `narrow` says which can be)."""
        super().__init__(parent)
        self.projects = projects
        self.indexing = indexing
        self.folder_id = folder_id
        self.state = KnowledgeState()
        self.picker: QFileDialog | None = None  # Add folder… / Add files…, while open
        self.skipped_list: QDialog | None = None  # Show skipped files, while open
        self.question: QMessageBox | None = None  # a whole home or drive added, or sources removed: while asked
        note = QLabel(
            self.tr(
                "Every chat in this project can use these files. They are read where they are, never copied, "
                "changed or deleted; Remove only takes them out of the project. Changes on this tab take effect "
                "at once (Cancel does not undo them)."
            )
        )
        note.setWordWrap(True)
        self.sources = QTreeWidget()
        self.sources.setHeaderLabels([self.tr("File or folder"), self.tr("State")])
        self.sources.setRootIsDecorated(False)
        self.sources.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.sources.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.sources.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.sources.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.sources.header().setStretchLastSection(False)
        self.sources.setAccessibleName(self.tr("Knowledge"))
        self.sources.setAccessibleDescription(self.tr("The files and folders of this project, with their state"))
        self.sources.itemSelectionChanged.connect(self._update_buttons)
        self.add_folder = QPushButton(self.tr("Add folder…"))
        self.add_files = QPushButton(self.tr("Add files…"))
        self.remove = QPushButton(self.tr("Remove"))
        self.remove.setToolTip(self.tr("Takes it out of the project; the files on disk are not touched."))
        self.pause_source = QPushButton(self.tr("Pause"))
        self.confirm = QPushButton(self.tr("Confirm"))
        self.confirm.setToolTip(self.tr("Index this path from an imported chat: you checked it is one you want read."))
        self.show_skipped = QPushButton(self.tr("Show skipped files…"))
        self.add_folder.clicked.connect(self._pick_folder)
        self.add_files.clicked.connect(self._pick_files)
        self.remove.clicked.connect(self.remove_selected)
        self.pause_source.clicked.connect(self.toggle_selected)
        self.confirm.clicked.connect(self.confirm_selected)
        self.show_skipped.clicked.connect(self.open_skipped)
        buttons = QHBoxLayout()
        for b in (self.add_folder, self.add_files, self.remove, self.pause_source, self.confirm):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.show_skipped)
        self.add_problems = QLabel()  # what Add folder…/Add files… could not add, kept until the next add
        self.add_problems.setWordWrap(True)
        self.add_problems.setTextFormat(Qt.TextFormat.PlainText)  # (paths: never markup)
        self.add_problems.setStyleSheet("color: palette(link);")
        self.add_problems.hide()
        self.progress_text = QLabel()
        self.progress_text.setWordWrap(True)
        self.progress_text.setTextFormat(Qt.TextFormat.PlainText)  # (names of files in a folder: never markup)
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setMaximumHeight(8)
        self.progress_bar.setAccessibleName(self.tr("Indexing progress"))
        self.pause_indexing = QPushButton()
        self.pause_indexing.setToolTip(
            self.tr(
                "Stops indexing this project until you resume it or Ember restarts. To keep a file or folder "
                "from being read for good, select it and Pause."
            )
        )
        self.pause_indexing.clicked.connect(self.toggle_indexing)
        self.reread = QTimer(self)  # during a run, the index's counts read again now and then: the rows follow it
        self.reread.setSingleShot(True)
        self.reread.setInterval(REREAD_MS)
        self.reread.timeout.connect(self._read_counts)
        self.counting = False  # a read of the counts is out (one at a time: the window's workers are shared)
        self._asked = 0  # reads of the index's state asked (whole or counts), in order: each result's number
        self._shown = 0  # the number of the read whose counts are shown: an older one's come back later are not
        project = self._project()
        self.embedding = ModelChoice(
            self.tr("None: passages are found by their words (BM25)"),
            models,
            project.embedding_model if project is not None else None,
        )
        self.embedding.setAccessibleName(self.tr("Embedding model"))
        self.embedding.setAccessibleDescription(
            self.tr("A model that finds passages by meaning too; the passages are embedded again when it changes")
        )
        self.embedding.activated.connect(self._embedding_chosen)
        self.reranker = ModelChoice(
            self.tr("None: passages keep the order they were found in"),
            models,
            project.reranker if project is not None else None,
        )
        self.reranker.setAccessibleName(self.tr("Reranker"))
        self.reranker.setAccessibleDescription(
            self.tr("A model that reads the question with each passage found and puts the best first")
        )
        self.reranker.activated.connect(self._reranker_chosen)
        ranked = QFormLayout()
        ranked.addRow(self.tr("&Embedding model:"), self.embedding)
        ranked.addRow(self.tr("&Reranker:"), self.reranker)
        run = QHBoxLayout()
        run.addWidget(self.progress_text, 1)
        run.addWidget(self.pause_indexing)
        layout = QVBoxLayout(self)
        layout.addWidget(note)
        layout.addWidget(self.sources, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.add_problems)
        layout.addLayout(ranked)
        layout.addLayout(run)
        layout.addWidget(self.progress_bar)
        indexing.progress.connect(self._on_progress)
        indexing.run_changed.connect(self._on_run_changed)
        indexing.finished.connect(self._on_finished)
        indexing.failed.connect(self._on_failed)
        self.refresh()

    # ----- the list
    def listed(self) -> list[KnowledgeSource]:
        try:
            return list(self.projects.project(self.folder_id).sources)
        except EmberError:
            return []

    def refresh(self) -> None:
        """The list as the store has it, with what the index held when last read; the index read again."""
        self._fill()
        self._read_all()
        self._show_run()

    def _read_all(self) -> None:
        """The index's state read again whole: its counts and skipped files."""
        self._asked += 1
        asked = self._asked
        self.reread.stop()
        self.indexing.read_state(self.folder_id, lambda state: self._state_read(state, asked), self)

    def _state_read(self, state: KnowledgeState, asked: int) -> None:
        """A whole read: its skipped files shown; its counts too unless a read asked after it came back first."""
        if asked > self._shown:
            self._shown = asked
            self.state = state
        else:
            self.state = KnowledgeState(self.state.sources, state.skipped, self.state.unread)
        self._fill()

    def _read_counts(self) -> None:
        """During a run, its counts only (one grouped query; the skipped files are read when it is over),
        never while the read before is still out."""
        if self.counting or not self.indexing.running(self.folder_id):
            return
        self.counting = True
        self._asked += 1
        asked = self._asked

        def read(state: KnowledgeState) -> None:
            self.counting = False
            if asked > self._shown:  # (else a read asked after it came back first: its counts are newer)
                self._shown = asked
                self.state = KnowledgeState(state.sources, self.state.skipped, state.unread)
                self._fill()

        self.indexing.read_state(self.folder_id, read, self, counts_only=True, failed=self._counts_failed)

    def _counts_failed(self, _reason: str) -> None:
        """(The run's end reads the whole state again, and says why if it still cannot be read.)"""
        self.counting = False

    def _fill(self) -> None:
        """The items' state said again in place (the current item, the selection and the scroll kept);
        the list built again only when its sources changed (added, removed)."""
        listed = self.listed()
        items = [self.sources.topLevelItem(i) for i in range(self.sources.topLevelItemCount())]
        shown = [(int(item.data(0, SOURCE_ID)), item.text(0)) for item in items]
        if shown != [
            (s.id, knowledge_rows.shown(s.path)) for s in listed
        ]:  # (an id can be used again: a folder taking its source's place)
            chosen = set(self.selected_ids())
            self.sources.clear()
            items = []
            for source in listed:
                item = QTreeWidgetItem([knowledge_rows.shown(source.path), ""])  # (an imported chat's: any name)
                item.setData(0, SOURCE_ID, source.id)
                item.setToolTip(0, plain_tooltip(item.text(0)))
                self.sources.addTopLevelItem(item)
                item.setSelected(source.id in chosen)
                items.append(item)
        away = self.unreachable()
        for item, source in zip(items, listed, strict=True):
            item.setText(1, self.state_text(source))
            problem = away.get(source.id)
            unread = self.unread_folders(source)
            tip = (
                knowledge_rows.shown(problem.reason)
                if problem is not None
                else knowledge_rows.state_tip(item.text(1), unread)
            )
            item.setToolTip(1, plain_tooltip(tip))
            warn = source.from_import or problem is not None or bool(unread)
            item.setData(1, Qt.ItemDataRole.ForegroundRole, self.palette().link() if warn else None)
        self._update_buttons()

    def state_text(self, source: KnowledgeSource) -> str:
        """What the source's row says of it (knowledge_rows.py), from what the panel last read."""
        return knowledge_rows.state_text(
            source,
            self.state.sources.get(source.id, SourceState()),
            paused=source.paused or self.folder_id in self.indexing.paused,  # (the source, or the project's indexing)
            problem=self.unreachable().get(source.id),
            unread=self.unread_folders(source),
            running=self.indexing.running(self.folder_id),
        )

    def unread_folders(self, source: KnowledgeSource) -> list[UnreadFolder]:
        """The folders of this source its last walk could not list (permission denied, an I/O error),
        their files kept (its own path not there or unreadable is said as `unreachable`)."""
        own = os.path.abspath(source.path)
        return [f for f in self.state.unread.get(source.id, []) if f.path != own]

    def unreachable(self) -> dict[int, ScanProblem]:
        """The sources the last run could not walk (not there, or that cannot be read), by id: the run
        and the watcher found it off the GUI thread."""
        return self.indexing.unreachable.get(self.folder_id, {})

    def selected_ids(self) -> list[int]:
        return [int(item.data(0, SOURCE_ID)) for item in self.sources.selectedItems()]

    def _selected(self) -> list[KnowledgeSource]:
        ids = set(self.selected_ids())
        return [s for s in self.listed() if s.id in ids]

    def _update_buttons(self) -> None:
        chosen = self._selected()
        self.remove.setEnabled(bool(chosen))
        self.confirm.setVisible(any(s.from_import for s in self.listed()))
        self.confirm.setEnabled(any(s.from_import for s in chosen))
        plain = [s for s in chosen if not s.from_import]
        self.pause_source.setEnabled(bool(plain))
        self.pause_source.setText(self.tr("Resume") if plain and all(s.paused for s in plain) else self.tr("Pause"))
        self.show_skipped.setEnabled(bool(self.skipped_files()))  # (of the sources listed: one removed has none)

    def _project(self) -> Project | None:
        try:
            return self.projects.project(self.folder_id)
        except EmberError:
            return None

    def narrow_models(self, uses: ModelUses) -> None:
        """The models installed are known for what they can do: each picker offers those that can."""
        self.embedding.narrow(uses.embedding)
        self.reranker.narrow(uses.reranker)

    def _embedding_chosen(self) -> None:
        """Saved at once, as the list is; the index's passages are embedded with it (off the GUI thread)."""
        try:
            self.projects.update(self.folder_id, embedding_model=self.embedding.currentData())
        except EmberError as exc:
            self._said(str(exc))
            return
        self._changed()

    def _reranker_chosen(self) -> None:
        """Saved at once; the next answers' passages are reordered by it (the index stays as it is)."""
        try:
            self.projects.update(self.folder_id, reranker=self.reranker.currentData())
        except EmberError as exc:
            self._said(str(exc))

    # ----- what the buttons do
    def _pick_folder(self) -> None:
        self._pick(QFileDialog.FileMode.Directory, self.tr("Add a folder to the project"))

    def _pick_files(self) -> None:
        self._pick(QFileDialog.FileMode.ExistingFiles, self.tr("Add files to the project"))

    def _pick(self, mode: QFileDialog.FileMode, title: str) -> None:
        dialog = QFileDialog(self, title)
        dialog.setFileMode(mode)
        if mode == QFileDialog.FileMode.Directory:
            dialog.setOption(QFileDialog.Option.ShowDirsOnly)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.filesSelected.connect(self.add_paths)
        dialog.destroyed.connect(lambda: setattr(self, "picker", None))
        self.picker = dialog
        dialog.open()

    def add_paths(self, paths: Sequence[str], *, asked: bool = False) -> None:
        """Add these files or folders; each that cannot be is said (below the buttons, until the next add:
        one inside a folder of the project is refused), the others are added (nothing added: no run). A
        folder around sources of the project takes their place: said there too (their files are not
        read again, only given to it). A whole home folder, disk or drive among them is asked about first
        (unless `asked`): Add adds them all, Cancel none."""
        broad = None if asked else next(filter(None, map(knowledge_questions.broad_folder_question, paths)), None)
        if broad is not None:
            listed = list(paths)
            self._ask(
                knowledge_questions.question_box(
                    self,
                    self.tr("Add a whole folder"),
                    broad,
                    self.tr("Add"),
                    lambda: self.add_paths(listed, asked=True),
                )
            )
            return
        problems, added = [], 0
        for path in paths:
            try:
                covered = self.projects.covered(self.folder_id, path)
                source = self.projects.add_source(self.folder_id, path)
                added += 1
            except EmberError as exc:
                problems.append(str(exc))
                continue
            for inner in covered:
                problems.append(
                    self.tr(
                        "{inner} is inside {folder}: it was taken out of the list, its files are read from there."
                    ).format(inner=inner.path, folder=source.path)
                )
        self.add_problems.setText("\n".join(problems))  # (one a line)
        self.add_problems.setVisible(bool(problems))
        if added:
            self._changed()

    def remove_selected(self) -> None:
        """Remove: the sources selected taken out of the project; asked first when what was read of them
        (as the panel last read it) would be forgotten."""
        chosen = self._selected()
        held = [self.state.sources.get(s.id, SourceState()) for s in chosen]
        if not any(h.indexed or h.passages for h in held):
            self.remove_sources([s.id for s in chosen])
            return
        project = self._project()
        text = knowledge_questions.remove_question(
            [knowledge_rows.shown(s.path) for s in chosen],
            knowledge_rows.shown(project.name) if project is not None else "",
            sum(h.passages for h in held),
        )
        ids = [s.id for s in chosen]
        self._ask(
            knowledge_questions.question_box(
                self, self.tr("Remove"), text, self.tr("Remove"), lambda: self.remove_sources(ids), destructive=True
            )
        )

    def remove_sources(self, ids: Sequence[int]) -> None:
        """These sources (those still listed) taken out of the project at once; the files on disk untouched."""
        for source in (s for s in self.listed() if s.id in ids):
            try:
                self.projects.remove_source(source.id)
            except EmberError as exc:
                self._said(str(exc))
        self._changed()

    def _ask(self, box: QMessageBox) -> None:
        """`box` shown without blocking (one question at a time: a newer one takes the place of the last)."""
        if self.question is not None:
            self.question.close()
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.destroyed.connect(lambda: setattr(self, "question", None) if self.question is box else None)
        self.question = box
        box.open()

    def toggle_selected(self) -> None:
        plain = [s for s in self._selected() if not s.from_import]
        paused = not all(s.paused for s in plain)
        for source in plain:
            self.projects.set_paused(source.id, paused)
        self._changed()

    def confirm_selected(self) -> None:
        """The imported paths selected: confirmed by the user, indexed from now on."""
        problems, confirmed = [], 0
        for source in self._selected():
            if source.from_import:
                try:  # (checked as a path added is: one inside a folder of the project is refused, said as Add's)
                    self.projects.set_paused(source.id, False)
                    confirmed += 1
                except EmberError as exc:
                    problems.append(str(exc))
        self.add_problems.setText("\n".join(problems))  # (one a line)
        self.add_problems.setVisible(bool(problems))
        if confirmed:
            self._changed()

    def _changed(self) -> None:
        """The sources changed: the index follows (a run, the watcher), the list shows it."""
        if any(not s.paused for s in self.listed()):
            self.indexing.watch(self.folder_id)
        self.indexing.run(self.folder_id)
        self.refresh()

    def _said(self, text: str) -> None:
        self.progress_text.setText(text)

    # ----- the indexing
    def toggle_indexing(self) -> None:
        if self.folder_id in self.indexing.paused:
            self.indexing.resume(self.folder_id)
        else:
            self.indexing.pause(self.folder_id)

    def _show_run(self) -> None:
        k, fid = self.indexing, self.folder_id
        paused = fid in k.paused
        self.pause_indexing.setText(self.tr("Resume indexing") if paused else self.tr("Pause indexing"))
        self.pause_indexing.setEnabled(paused or k.running(fid))
        self.progress_bar.setVisible(k.running(fid))
        last, result = k.last.get(fid), k.results.get(fid)
        if paused:
            self.progress_text.setText(
                self.tr("Indexing is paused until Ember restarts; what is indexed is used meanwhile.")
            )
        elif k.running(fid):
            self._on_progress(fid, last or IndexProgress(0, 0, 0, 0, None))
        elif k.problems.get(fid):
            # (one note a line: two link loops run together read as one sentence)
            self.progress_text.setText("\n".join(k.problems[fid][:5]) + self._retry_waiting())
        elif result is not None and result.stopped:
            self.progress_text.setText(self.tr("Indexing stopped before the end; it goes on at the next change."))
        elif result is not None:
            self.progress_text.setText(self.tr("Up to date.") + self._retry_waiting())

    def _on_progress(self, folder_id: int, p: IndexProgress) -> None:
        if folder_id != self.folder_id:
            return
        if not self.reread.isActive() and not self.counting:  # (the rows' counts follow the run, as this line does)
            self.reread.start()
        self.progress_text.setText(knowledge_rows.progress_text(p))
        self.progress_bar.setRange(0, max(p.files_total, 1))
        self.progress_bar.setValue(p.files_done)

    def _on_run_changed(self, folder_id: int) -> None:
        if folder_id == self.folder_id:
            self._show_run()
            self._fill()

    def _on_finished(self, folder_id: int, result: IndexRun) -> None:
        if folder_id != self.folder_id:
            return
        if not result.stopped and not result.problems:
            self.progress_text.setText(knowledge_rows.finished_text(result) + self._retry_waiting())
        self._read_all()

    def _retry_waiting(self) -> str:
        """What Try again could not read yet: said after the run's own sentence (or nothing)."""
        n = self.indexing.retry_waiting(self.folder_id)
        if not n:
            return ""
        if n == 1:
            return " " + self.tr(
                "1 file to try again waits for its folder to be resumed or to be back: it is read then."
            )
        return " " + self.tr(
            "{n} files to try again wait for their folder to be resumed or to be back: they are read then."
        ).format(n=f"{n:,}")

    def _on_failed(self, folder_id: int, reason: str) -> None:
        if folder_id == self.folder_id:
            self.progress_text.setText(self.tr("Indexing stopped: {reason}").format(reason=reason))

    # ----- the skipped files
    def skipped_files(self) -> list[tuple[str, str]]:
        """(path, reason) of the skipped files of the sources listed (the state read may still hold those
        of a source just removed: not shown, nor offered to Try again), and of the folders their last walk
        could not list (Try again walks them again)."""
        listed = self.listed()
        ids = {s.id for s in listed}
        skipped = self.state.skipped or {}
        rows = [item for sid, items in skipped.items() if sid in ids for item in items]
        for source in listed:
            for folder in self.unread_folders(source):
                rows.append((folder.path + os.sep, knowledge_rows.unread_reason(folder)))
        return sorted(rows)

    def open_skipped(self) -> None:
        dialog = skipped_files_dialog(self.skipped_files(), self, self.retry_skipped)  # (a model: opens at once)
        dialog.destroyed.connect(lambda: setattr(self, "skipped_list", None))
        self.skipped_list = dialog
        dialog.open()

    def retry_skipped(self, paths: Sequence[str]) -> None:
        """Try again: these skipped files read again now (or after the run under way), with progress."""
        self.indexing.retry(self.folder_id, paths)
        self._show_run()
