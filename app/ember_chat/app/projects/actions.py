"""The window's projects (`window.projects`): New project…, a folder made a project and back, Project
settings…, and a new chat started while a project (or a chat in it) is selected: it goes into that project
when its first message makes it, and starts with the project's defaults (its preset, context length and
model when installed; its tools, which its Tools button shows before the chat is made). Deleting a
project's folder asks first (chat_list/organise.py), and so does turning it back into a plain folder (that
cannot be undone); its knowledge is kept current by `self.indexing` (indexing.py). One settings dialog is
open at a time: it closes when its project goes (deleted, undone, made a plain folder), and changes typed
in it and not saved are then said dropped (a project gone cannot keep its settings); the window closing
asks first about them (`ask_before_quit`: Discard / Keep editing, which keeps the window open).

Built from the AppContext and callables for what it asks of the rest of the window (what the chat list
has selected, the chat shown, the presets and a new chat's panel set from one, the models installed and
the one loaded, loading one, the tool sources, the new chat's tools set, the chat list read again): it
imports no other feature."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QDialog, QMessageBox, QWidget

from ember_chat.app.context import AppContext
from ember_chat.app.projects.answering import ProjectAnswering
from ember_chat.app.projects.dialog import ProjectSettingsDialog
from ember_chat.app.projects.indexing import ProjectIndexing
from ember_chat.app.projects.model_choice import ModelUses, installed_uses
from ember_chat.app.qt.name_dialog import name_dialog
from ember_chat.app.qt.plain_text import plain_message
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.errors import EmberError
from ember_chat.engine.projects.records import Project, ProjectStore

DEFAULT_ICON = "🗂"  # before the name of a project that has no icon of its own


class WindowProjects(QObject):
    new_chat_in = Signal(str)  # the project the new chat on screen goes into ("" when none)

    def __init__(
        self,
        ctx: AppContext,
        *,
        selected: Callable[[], tuple[int | None, list[int]]],
        open_chat: Callable[[], int | None],
        presets: Callable[[], list[tuple[str, str]]],
        start_with: Callable[[str | None, int | None], None],
        models: Callable[[], Sequence[str]],
        loaded_model: Callable[[], str | None],
        load_model: Callable[[str], None],
        tool_sources: Callable[[], Sequence[str]],
        new_chat_tools: Callable[[frozenset[str] | None], None],
        reload: Callable[[], None],
        dialog_parent: QWidget,
    ) -> None:
        """`selected`: the folder selected alone in the chat list (or None) and the chats selected;
        `presets`: the preset library's (id, name); `start_with`: the new chat's side panel set from a
        preset (None: as it is) and a context length (None: as it is); `new_chat_tools`: the tool servers
        the new chat on screen starts with (None: the last choices), kept with it when it is made."""
        super().__init__(dialog_parent)
        self.ctx = ctx
        self.store = ProjectStore(ctx.store)
        self._selected = selected
        self._presets = presets
        self._start_with = start_with
        self._open_chat = open_chat
        self._models = models
        self._loaded_model = loaded_model
        self._load_model = load_model
        self._tool_sources = tool_sources
        self._new_chat_tools = new_chat_tools
        self._reload = reload
        self.dialog_parent = dialog_parent
        self.indexing = ProjectIndexing(ctx, self.store, self)
        self.answering = ProjectAnswering(ctx.store, self.store, ctx.library, self.indexing.index_path)  # for answers
        self.settings_dialog: ProjectSettingsDialog | None = None  # while open (and for tests)
        self.question: QDialog | None = None  # the name asked for a new project, while open
        self.dropped_note: QMessageBox | None = None  # "its changes not saved were dropped", while shown
        self.new_chat_folder: int | None = None  # where the new chat on screen goes when made
        self.new_chat_made: float | None = None  # that folder's made time (a deleted folder's id is given again)

    # ----- which project
    def is_project(self, folder_id: int) -> bool:
        return self.store.is_project(folder_id)

    def icons(self) -> dict[int, str]:
        """Each project's folder id and the icon shown before its name."""
        return {p.folder_id: p.icon or DEFAULT_ICON for p in self.store.projects()}

    def project_of_folder(self, folder_id: int) -> Project | None:
        """The project this folder is, or is in (a subfolder of a project's folder)."""
        with contextlib.suppress(EmberError, KeyError):
            folder = self.ctx.store.organise.folder(folder_id)
            for fid in (folder.id, folder.parent_id):
                if fid is not None and self.store.is_project(fid):
                    return self.store.project(fid)
        return None

    def selected_folder(self) -> int | None:
        """The folder a new chat goes into: the folder selected, else the selected (or open) chat's, when
        it is (in) a project; None otherwise."""
        folder, ids = self._selected()
        if folder is None:
            cid = ids[0] if len(ids) == 1 else self._open_chat()
            with contextlib.suppress(KeyError, sqlite3.Error):
                folder = self.ctx.store.conversation(cid).folder_id if cid is not None else None
        if folder is None or self.project_of_folder(folder) is None:
            return None
        return folder

    # ----- the chat list's entries
    def new_project(self, name: str | None = None, parent_id: int | None = None) -> Project | None:
        """A new folder made a project, named `name` or what the user types (the dialog stays open, with
        what was typed and why under it, for a name refused: one another project has); its settings open
        (once the name's dialog has closed: the focus is theirs)."""
        if name is None:
            label = self.tr("Name of the project:")
            dialog = name_dialog(self.dialog_parent, self.tr("New project"), label, "", lambda text: chosen(text))

            def chosen(text: str) -> str | None:
                made = self._create(text, parent_id)
                if isinstance(made, str):
                    return made
                if made is not None:  # (opened once the window-modal name dialog is gone, not under it)
                    dialog.finished.connect(
                        lambda: QTimer.singleShot(0, self, lambda: self.open_settings(made.folder_id))
                    )
                return None

            self._ask(dialog)
            return None
        made = self._create(name, parent_id)
        if isinstance(made, str):
            self.ctx.notifier.show_error(made)
            return None
        if made is not None:
            self.open_settings(made.folder_id)
        return made

    def _create(self, name: str, parent_id: int | None) -> Project | str | None:
        """The project made; or why it was not; None when the folder to make it in is gone (said)."""
        try:
            project = self.store.create(name, parent_id)
        except EmberError as exc:
            if parent_id is not None and self._gone(parent_id):
                self.ctx.notifier.show_error(self.tr("The folder to make it in is gone: no project was made."))
                self._reload()
                return None  # (a name dialog closes: no name would do)
            return str(exc)
        self._reload()
        return project

    def _gone(self, folder_id: int) -> bool:
        try:
            self.ctx.store.organise.folder(folder_id)
        except EmberError:
            return True
        return False

    def make_project(self, folder_id: int) -> None:
        try:
            self.store.make_project(folder_id)
        except EmberError as exc:
            self.ctx.notifier.show_error(str(exc))
            return
        self._reload()
        self.open_settings(folder_id)

    def unmake(self, folder_id: int, confirmed: bool = False) -> None:
        """Back to a plain folder, once the user has said yes (or `confirmed`): its chats stay; its
        instructions, defaults, knowledge list and index are forgotten (the files on disk are not touched)."""
        if not confirmed:
            self._ask_unmake(folder_id)
            return
        try:
            name = self.store.project(folder_id).name
            self.indexing.pause(folder_id)
            self.indexing.unwatch(folder_id)
            self.store.unmake(folder_id)
        except EmberError as exc:
            self.ctx.notifier.show_error(str(exc))
            return
        self.indexing.paused.discard(folder_id)
        self._close_settings_of_gone(plain_folder=True)
        self._reload()
        self.ctx.notifier.show_notice(
            self.tr(
                "“{name}” is a plain folder again; its chats stay in it, and the files on disk were not touched."
            ).format(name=name)
        )

    def _ask_unmake(self, folder_id: int) -> None:
        try:
            name = self.store.project(folder_id).name
        except EmberError as exc:
            self.ctx.notifier.show_error(str(exc))
            return
        text = self.tr(
            "Turn “{name}” back into a plain folder? Its instructions, its defaults, its list of knowledge and "
            "Ember's index of that knowledge are forgotten, and this cannot be undone. Its chats stay in the "
            "folder, and the files on disk are not touched."
        ).format(name=name)
        box = plain_message(
            QMessageBox(
                QMessageBox.Icon.Question,
                self.tr("Turn back into a plain folder"),
                text,
                QMessageBox.StandardButton.Cancel,
                self.dialog_parent,
            )
        )
        turn = box.addButton(self.tr("Turn into a plain folder"), QMessageBox.ButtonRole.DestructiveRole)
        turn.clicked.connect(lambda: self.unmake(folder_id, True))
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self._ask(box)

    def reconcile(self, *changed: object) -> None:
        """After the chat list changed (a folder deleted, an undo): the indexing follows, and the settings
        of a project gone close."""
        self.indexing.reconcile(*changed)
        self._close_settings_of_gone()

    def _close_settings_of_gone(self, plain_folder: bool = False) -> None:
        """The settings of a project gone (deleted; `plain_folder`: made one) close; changes typed there
        and not saved are said dropped."""
        dialog = self.settings_dialog
        if dialog is None or self.store.is_project(dialog.folder_id):
            return
        edited, name = dialog.edited(), dialog.opened.name
        dialog.discard()
        if not edited:
            return
        gone = (
            self.tr("“{name}” is a plain folder again; the changes not saved in its settings were dropped.")
            if plain_folder
            else self.tr("The project “{name}” was deleted; the changes not saved in its settings were dropped.")
        )
        self._say_dropped(gone.format(name=name))

    def _say_dropped(self, text: str) -> None:
        """A note beside the window (the banner says what was done, with its Undo: not covered over)."""
        if self.dropped_note is not None:
            self.dropped_note.close()
        box = plain_message(
            QMessageBox(
                QMessageBox.Icon.Information,
                self.tr("Project settings closed"),
                text,
                QMessageBox.StandardButton.Ok,
                self.dialog_parent,
            )
        )
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def gone() -> None:
            if self.dropped_note is box:
                self.dropped_note = None

        box.destroyed.connect(gone)
        self.dropped_note = box
        box.setWindowModality(Qt.WindowModality.NonModal)  # (the window stays usable: the banner's Undo)
        box.show()

    def open_settings(self, folder_id: int) -> None:
        """Project settings… (kept open beside the window: an index may take a while)."""
        try:
            project = self.store.project(folder_id)
        except EmberError as exc:
            self.ctx.notifier.show_error(str(exc))
            return
        shown = self.settings_dialog
        if shown is not None:
            shown.raise_()
            shown.activateWindow()
            if shown.folder_id != folder_id:  # (typed changes are never dropped unasked: as Esc or Cancel)
                shown.leave(then=lambda: self.open_settings(folder_id))
            return
        tools = self._tool_sources()
        dialog = ProjectSettingsDialog(
            self.store,
            self.indexing,
            project,
            models=self._models(),
            presets=self._presets(),
            tool_sources=tools,
            parent=self.dialog_parent,
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.saved.connect(lambda _fid: self._reload())

        def gone() -> None:  # (deferred: another project's dialog may be open by then)
            if self.settings_dialog is dialog:
                self.settings_dialog = None

        dialog.finished.connect(gone)  # (closed: another may open at once, before this one is deleted)
        dialog.destroyed.connect(gone)
        self.settings_dialog = dialog
        dialog.show()

        def known(uses: ModelUses) -> None:  # (which models installed embed, which rerank: their headers read)
            if self.settings_dialog is dialog:
                dialog.knowledge.narrow_models(uses)

        library = self.ctx.library
        self.ctx.tasks.run(lambda: installed_uses(library), known, self.ctx.notifier.show_error, key="project-models")

    def _ask(self, dialog: QDialog) -> None:
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "question", None))
        self.question = dialog
        dialog.open()

    # ----- a new chat in a project
    def on_new_chat_opening(self) -> None:
        """A new chat shows (after the presets gave it the new-chat defaults): when a project or a chat
        in one is selected, it is that project's, with its defaults."""
        self.new_chat_folder = self.selected_folder()
        folder = self.new_chat_folder
        self.new_chat_made = None if folder is None else self.ctx.store.organise.folder_created_at(folder)
        project = self.new_chat_project()
        self._new_chat_tools(frozenset(project.tools) if project is not None and project.tools else None)
        self.new_chat_in.emit(project.name if project is not None else "")
        if project is None:
            return
        self.apply_defaults(project)
        model = project.model
        if model and model in self._models() and model != self._loaded_model():
            self._load_model(model)

    def follow_new_chat(self) -> None:
        """The chat list read again (a rename, a delete, an undo): the new chat on screen goes into its
        project as it is now — said by name — or into none when its folder is gone (its id may be another's)."""
        folder = self.new_chat_folder
        if folder is None:
            return
        if self.ctx.store.organise.folder_created_at(folder) != self.new_chat_made:
            self.new_chat_folder = self.new_chat_made = None
        project = self.new_chat_project()
        self.new_chat_in.emit(project.name if project is not None else "")

    def new_chat_project(self) -> Project | None:
        return None if self.new_chat_folder is None else self.project_of_folder(self.new_chat_folder)

    def apply_defaults(self, project: Project) -> None:
        """The side panel for the new chat: the project's preset and context length over what it holds."""
        self._start_with(project.preset, project.context_length)

    def on_model_state(self, state: str) -> None:
        """A model loaded for the new chat on screen: the presets gave it the model's preset; the
        project's defaults go back over it."""
        if state == ModelState.READY and self._open_chat() is None:
            project = self.new_chat_project()
            if project is not None:
                self.apply_defaults(project)

    def on_switching(self) -> None:
        """Another chat shows: the new chat's project is forgotten (a new chat asks again)."""
        self.new_chat_folder = self.new_chat_made = None
        self._new_chat_tools(None)
        self.new_chat_in.emit("")

    def on_chat_created(self, conversation_id: int) -> None:
        """The new chat's first message made it: into the project's folder (its tools went with it from
        its Tools button: `new_chat_tools`)."""
        project = self.new_chat_project()
        folder = self.new_chat_folder
        self.new_chat_folder = self.new_chat_made = None
        self.new_chat_in.emit("")  # (made: no longer a new chat)
        if project is None or folder is None:
            return
        try:
            self.ctx.store.organise.move_chats([conversation_id], folder)  # (not undone: it was made there)
        except (EmberError, KeyError, sqlite3.Error) as exc:
            self.ctx.notifier.show_error(
                self.tr("The new chat could not be put in the project “{name}”: {reason}").format(
                    name=project.name, reason=exc
                )
            )

    # ----- the window
    def start(self) -> None:
        """At launch: each project's knowledge brought up to date and watched."""
        try:
            self.indexing.watch_all()
        except (EmberError, sqlite3.Error) as exc:
            self.ctx.notifier.show_error(str(exc))

    def ask_before_quit(self, quit_: Callable[[], None]) -> bool:
        """The window is closing: with changes not saved in the settings open, ask first (Discard /
        Keep editing) and say True (the close waits); Discard then calls `quit_` again, which goes through."""
        dialog = self.settings_dialog
        if dialog is None or not dialog.edited():
            return False
        dialog.leave(then=quit_)
        return True

    def close(self) -> None:
        if self.settings_dialog is not None:  # (the window closes: asked first, `ask_before_quit`)
            self.settings_dialog.discard()
        self.indexing.close()
        self.answering.close()  # (the kept models closed on a thread of their own)

    def join(self, timeout: float | None = None) -> bool:
        return self.indexing.join(timeout) and self.answering.join(timeout)
