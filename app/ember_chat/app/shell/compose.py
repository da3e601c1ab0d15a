"""The composition root (issue 29): the window's features built from the AppContext and the widgets the
window lays out, and what one feature says to another wired as signals, here and nowhere else. The
features keep the names the window has always given them (`window.models`, `window.chats`,
`window.compose`, …): `compose` sets them on the window, which keeps its frame (layout, menus, window state,
close)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication

from ember_chat.app.backups.dialog import WindowBackups
from ember_chat.app.chat_list.actions import ChatActions
from ember_chat.app.chat_list.undo import UndoActions
from ember_chat.app.compare.actions import CompareActions
from ember_chat.app.context import AppContext, Notifier
from ember_chat.app.conversation.attach import WindowAttachments
from ember_chat.app.conversation.compose import ComposerActions
from ember_chat.app.conversation.controller import ChatController
from ember_chat.app.conversation.last_answer import last_answer
from ember_chat.app.engine_link.bridge import EngineBridge
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.importing.dialog import ImportChats
from ember_chat.app.models.actions import BenchmarkWindow, ModelActions
from ember_chat.app.models.kv_caches import WindowKvCaches
from ember_chat.app.presets.actions import WindowPresets
from ember_chat.app.projects.actions import WindowProjects
from ember_chat.app.server.api_control import ApiServerControl
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.shell.menus import build_menus
from ember_chat.app.shell.navigation import set_tab_order
from ember_chat.app.shell.side_fit import SidePanelFit
from ember_chat.app.shell.store_watch import StoreWatch
from ember_chat.app.style.icons import themed_icon
from ember_chat.app.style.theme import apply_theme
from ember_chat.app.tools.actions import WindowTools
from ember_chat.app.tools.choices import BOX_ROOM, ComposerRow
from ember_chat.app.transcript.font_size import TranscriptFontSize
from ember_chat.app.voice.button_fit import VoiceButtonsFit
from ember_chat.app.voice.conversation import VoiceConversation
from ember_chat.app.voice.dictation import DictationControl
from ember_chat.app.voice.read_aloud import ReadAloud
from ember_chat.app.voice.speaker import Speaker
from ember_chat.app.voice.speech_choice import ChosenTranscriberSlot, SpeechChoice
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.models.starter import STARTER_ALIAS
from ember_chat.engine.storage.connections import ConnectionStore
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.model_settings import ModelSettingsStore
from ember_chat.engine.storage.secrets import TokenStore
from ember_chat.engine.storage.settings import SettingsFile
from ember_chat.engine.tools.builtin import BUILTIN_SOURCE


def app_context(
    store: ConversationStore,
    bridge: EngineBridge,
    library: ModelLibrary,
    settings_file: SettingsFile,
    connections: ConnectionStore,
    model_settings: ModelSettingsStore,
    data_dir: Path,
) -> AppContext:
    """What every feature is built from (context.py); the window its task runner and notifier live in
    takes them as its children."""
    return AppContext(
        store=store,
        bridge=bridge,
        library=library,
        settings_file=settings_file,
        settings=settings_file.load(),
        tasks=TaskRunner(),  # what the GUI thread must not wait on (see engine_link/tasks.py)
        notifier=Notifier(),
        connections=connections,
        model_settings=model_settings,
        data_dir=data_dir,
        url_opener=QDesktopServices.openUrl,  # the system browser (tests put a recorder here)
    )


def compose(
    window: MainWindow,
    startup_errors: Sequence[str] = (),
    hub_endpoint: str | None = None,
    tokens: TokenStore | None = None,
) -> Composition:
    """Builds the window's features, wires them, then starts the window (menus, the saved state, the chat
    open when Ember quit, what went wrong while starting). `startup_errors`: for the banner (a damaged
    chat database); `hub_endpoint`, `tokens`: the Model Manager's Hub and its sign-in."""
    parts = Composition(window, hub_endpoint, tokens or TokenStore())
    parts.start(list(startup_errors))
    return parts


class Composition(QObject):
    """The features of one window and the glue between them (a child of the window: it lives as long)."""

    def __init__(self, window: MainWindow, hub_endpoint: str | None, tokens: TokenStore) -> None:
        super().__init__(window)
        self.frame = w = window
        w.parts = self
        ctx = w.ctx
        ctx.notifier.error.connect(self.show_error)  # any feature's message, in the banner
        ctx.notifier.notice.connect(self.show_notice)
        config_dir = Path(ctx.settings_file.path).parent
        w.transcript.writer.math.use_tasks(ctx.tasks)  # formulas: the typesetter imported off the GUI thread
        w.models = ModelActions(  # the model loaded, the picker, the model dialogs (models/actions.py)
            ctx,
            model_bar=w.model_bar,
            after_stop=lambda action: w.controller.after_stop(action),  # (the parts below are built after it)
            context_length=lambda: w.side.params.context.value(),
            api_url=lambda: w.api.server.url if w.api.server is not None else None,
            benchmark=self._benchmark_dialog,
            tokens=tokens,
            downloads=w.downloads,
            hub_endpoint=hub_endpoint,
            dialog_parent=w,
        )
        w.font_size = TranscriptFontSize(ctx, w.transcript)  # View ▸ Bigger text / Smaller text
        w.welcome.load_starter.connect(lambda: w.models.load_model(STARTER_ALIAS))
        w.welcome.open_manager.connect(w.models.open_model_manager)
        w.welcome.import_file.connect(w.models.import_model_file)
        w.loading_panel.cancel.clicked.connect(w.models.unload_model)  # (cancels the load)
        w.model_bar.loading_shown.connect(w.loading_panel.title.setText)
        w.greeting.prompt_chosen.connect(w.composer.replace_draft)  # an example prompt, to send or change

        w.controller = ChatController(ctx.store, ctx.bridge, self._current_params)
        # the undo stack of the chat list's changes and the banner's Undo link (chat_list/undo.py)
        w.undo = UndoActions(ctx, w.controller, parent=w)
        w.attach = WindowAttachments(  # files and images in the chat (conversation/attach.py)
            ctx,
            config_dir,
            w.composer,
            w.side.params,
            w.controller,
            w.transcript,
            w.banner,
            model=lambda: w.model,
            drop_target=w,  # (files dropped anywhere on the window)
            drop_area=w.centre_stack,
        )
        w.chats = ChatActions(  # the chat list: open, search, organise, export (chat_list/actions.py)
            ctx,
            w.conversations,
            w.controller,
            w.undo,
            w.side.params,
            w.attach.store,
            dialog_parent=w,
            parent=w,
        )
        w.model_state_changed.connect(w.attach.on_model_state)  # (the chips counted with its tokenizer)
        w.compose = ComposerActions(  # sending and editing from the message box (conversation/compose.py)
            ctx,
            w.composer,
            w.controller,
            w.attach,
            w.banner,
            loading=lambda: w.models.loading,
            parent=w,
        )
        # dictation: the microphone beside the message box, Ctrl+Shift+Space (voice/dictation.py)
        speech = SpeechChoice(ctx)  # the model and language of Settings ▸ Voice, for all the window hears
        w.dictation = DictationControl(ctx.tasks, w.composer.editor, ctx.notifier.show_error, parent=w,
                                       make_transcriber=speech.make, model=lambda: speech.model,
                                       language=speech.language)  # fmt: skip
        w.composer.attachments.transcriber = ChosenTranscriberSlot(speech)

        def show_dictation_figures(d: DictationControl = w.dictation) -> None:
            m, t = d.metrics, d.transcriber
            w.side.metrics.show_dictation(d.microphone.is_open, m.real_time_factor, m.first_words_s, m.words_per_s,
                                          None if t is None else t.name, 0 if t is None else t.threads)  # fmt: skip

        w.dictation.figures_changed.connect(show_dictation_figures)
        w.composer.row.insertWidget(w.composer.row.indexOf(w.composer.button), w.dictation.button)
        w.composer.layout().addWidget(w.dictation.status_row)  # (the listening line, under the box)
        w.tools = WindowTools(  # MCP servers, built-in tools, the Tools button and each chat's choices
            ctx,
            config_dir,
            w,
            ComposerRow(w.composer, w.composer.attach_button, w.composer.editor, w.dictation.button),
            shown_chat=lambda: w.controller.conversation_id,
        )
        w.controller.tool_session_for = w.tools.session_for  # a chat's tools, asked before each answer
        w.controller.chat_created.connect(w.tools.choices.on_chat_created)  # (a new chat's go with it)
        w.controller.thread_shown.connect(w.tools.choices.on_thread_shown)
        w.presets = WindowPresets(  # presets.json, new-chat defaults, `/`
            ctx,
            config_dir,
            w.side.params,
            w.composer.editor,
            loaded_name=lambda: w.models.loaded_name if w.model is not None else None,
            open_chat=lambda: w.controller.conversation_id,
            generating=lambda: w.controller.generating,
            parent=w,
        )
        w.model_state_changed.connect(w.presets.on_model_state)
        w.controller.thread_shown.connect(w.presets.on_thread_shown)  # (before the transcript shows it)
        picker = w.models.picker
        w.projects = WindowProjects(  # projects: New project…, their settings and knowledge, new chats in them
            ctx,
            selected=lambda: (w.conversations.selected_folder(), w.conversations.selected_ids()),
            open_chat=lambda: w.controller.conversation_id,
            presets=lambda: [(p.id, p.name) for p in w.presets.library.presets()],
            start_with=w.presets.start_with,
            models=lambda: [str(picker.itemData(i)) for i in range(picker.count()) if picker.itemData(i)],
            loaded_model=lambda: w.models.loaded_name if w.model is not None else w.models.loading_name,
            load_model=w.models.load_model,
            tool_sources=lambda: [BUILTIN_SOURCE, *(s.name for s in w.tools.config.servers)],
            new_chat_tools=w.tools.choices.start_new_chat_with,
            reload=w.chats.reload_conversations,
            dialog_parent=w,
        )
        w.chats.projects = w.projects
        w.controller.project_for = w.projects.answering.turn_for  # its instructions and knowledge, for each answer
        w.transcript.attachments.why_not_open = w.projects.answering.why_not_open  # (a source's Open file)
        w.transcript.attachments.tasks = ctx.tasks  # (that check: off the GUI thread)
        w.side.metrics.project_why.made_at = w.store.organise.folder_created_at  # (a project told from a later one)
        w.controller.project_used.connect(w.side.metrics.show_project)  # (the side panel's why this answer)
        w.chats.relisted.connect(lambda: w.side.metrics.follow_project(w.projects.project_of_folder))  # (renamed)
        w.model_state_changed.connect(w.projects.on_model_state)  # (after the presets': the project's go over)
        w.controller.chat_created.connect(w.projects.on_chat_created)  # (into its folder; its tools: the choices')
        w.projects.new_chat_in.connect(w.composer.show_project)  # (the empty box says the new chat's project)
        w.chats.relisted.connect(w.projects.follow_new_chat)  # (renamed, deleted: said anew)
        w.compare = CompareActions(  # Compare… on a message (compare/actions.py)
            ctx,
            chat=w.controller,
            models=w.models,
            model=lambda: w.model,
            params=w.side.params,
            choices=w.model_bar.choices,
            colors=lambda: w.colors,  # (a theme switch replaces them)
            dialog_parent=w,
        )
        w.transcript.action.connect(w.compare.on_action)
        w.read_aloud = ReadAloud(ctx, Speaker(parent=w), w)  # an answer read aloud (voice/read_aloud.py)
        w.transcript.action.connect(w.read_aloud.on_action)
        w.read_aloud.reading_changed.connect(w.transcript.show_reading)
        for changed in (w.controller.thread_shown, w.controller.conversations_changed, w.undo.reload):
            changed.connect(w.read_aloud.stop_if_gone)  # (the answer read deleted, its chat in the Trash)
        w.undo.reload.connect(w.projects.reconcile)  # (a project deleted or undone: its watcher, its settings)
        w.controller.stream_began.connect(w.read_aloud.on_stream_began)
        w.controller.stream_appended.connect(w.read_aloud.on_stream_text)
        w.controller.stream_ended.connect(w.read_aloud.on_stream_ended)
        # a voice conversation: listen, send, read the answer, listen again (voice/conversation.py)
        c = w.controller
        w.voice = VoiceConversation(w.dictation, w.read_aloud, w.composer.submit, lambda: c.generating, c.stop, w)
        c.generating_changed.connect(w.voice.on_generating)
        w.composer.row.insertWidget(w.composer.row.indexOf(w.composer.button), w.voice.button)
        # in a narrow window both hide, before the Tools text shortens: the box keeps its room (shortcuts, menu stay)
        VoiceButtonsFit(
            w.composer,
            w.composer.row,
            w.composer.editor,
            (w.dictation.button, w.voice.button),
            widest=lambda b, t=w.tools.button: t.full_width() if b is t else 0,  # (the Tools text in full)
            box_room=BOX_ROOM,
        )
        w.composer.layout().addWidget(w.voice.indicator)
        w.api = ApiServerControl(ctx, w.statusBar(), w, preset=w.presets.for_api)  # the API server
        w.models.watch_api(w.api)  # (the model bar and the Model Manager say the models the API loaded)
        # the daily backup (a worker thread) and Settings ▸ Backups…
        w.backups = WindowBackups(ctx, w, w.controller.after_stop, self._show_restored_chats)
        w.backups.restoring.connect(w.compare.forget)  # (a comparison writes its answers by id)
        w.kv_caches = WindowKvCaches(ctx, w)  # Settings ▸ Conversation caches… (saved KV snapshots)
        w.controller.generating_changed.connect(w.kv_caches.on_generating)  # its problems: said after an answer
        w.importer = ImportChats(ctx, w.attach.store, w, w.banner.set_action)  # File ▸ Import chats…
        w.importer.chats_added.connect(w.chats.reload_conversations)
        w.importer.reveal.connect(w.chats.reveal)  # (the banner's Open and Show Archived)
        w.importer.show_view.connect(w.chats.show_view)
        w.importer.open_project.connect(w.projects.open_settings)  # (the banner's Project settings)
        self._wire()

    def start(self, startup_errors: list[str]) -> None:
        w = self.frame
        build_menus(w)
        w.side_fit = SidePanelFit(w, w.splitter, w.side, w.side_action)  # hides it on a narrow window
        set_tab_order(w)
        self._apply_icons()
        w.presets.apply_new_chat()
        w.chats.reload_conversations()
        w.projects.start()  # (each project's knowledge brought up to date, then watched)
        w.restore_state()
        w.chats.reopen(w.window_state.value("open_chat"))  # the chat open when Ember quit
        self.set_model_state(ModelState.NONE)
        if w.settings.api_server:
            w.api.apply()
        errors = startup_errors
        problems = [  # damaged files set aside, bad entries kept aside in their file
            *w.ctx.settings_file.take_problems(),
            *w.connections.take_problems(),
            *w.model_settings.take_problems(),
            *w.tools.take_problems(),
            *w.presets.take_problems(),
        ]
        if errors:
            self.show_error(" ".join(errors + problems))
        elif problems:
            self.show_notice(" ".join(problems))
        w.models.reload_models()  # after the stores have said what was wrong: it reads them on another thread

    def _benchmark_dialog(self) -> BenchmarkWindow:
        """Models ▸ Benchmark…: a new benchmark dialog, with today's models and connections."""
        from ember_chat.app.lab.benchmark_dialog import BenchmarkDialog

        ctx = self.frame.ctx
        return BenchmarkDialog(
            ctx.library,
            ctx.settings,
            ctx.data_dir,
            ctx.connections,
            ctx.model_settings,
            self.frame,
            service=ctx.bridge.service,  # each model measured with the engine to itself
        )

    def _wire(self) -> None:
        win = self.frame
        w = win.bridge
        # Bound methods of GUI-thread objects only: a lambda would run in the engine thread.
        m = win.models
        w.load_progress.connect(m.on_load_progress)
        w.loaded.connect(m.on_loaded)
        w.load_failed.connect(m.on_load_failed)
        w.unloaded.connect(m.on_unloaded)
        m.state_changed.connect(self.set_model_state)  # (first: the Model Manager follows what the window shows)
        m.progress.connect(win.loading_panel.progress.setValue)
        m.thinking_switch.connect(win.side.params.set_thinking_switch)
        m.pick_dropped.connect(win.compose.drop_queued)  # (a message sent meanwhile stays in the box)
        m.listed.connect(win.models_listed)
        m.load_settings_opened.connect(win.load_settings_opened)
        c = win.controller
        c.generating_changed.connect(win.composer.set_generating)
        c.generating_changed.connect(self._on_generating)
        c.error.connect(self._on_chat_error)
        c.streamed.connect(self._on_streamed)
        c.notice.connect(self.show_notice)
        c.retrying.connect(self._on_retrying)
        c.conversations_changed.connect(win.chats.on_conversations_changed)  # (only the open chat read again)
        c.delete_requested.connect(win.chats.organise.delete_message)  # (undoable)
        c.edit_requested.connect(win.compose.edit_message)
        win.font_size.resized.connect(c.refresh)  # View ▸ Bigger text: the thread written again at its size
        t, m = win.transcript, win.side.metrics  # what the controller says the views show
        c.thread_shown.connect(t.show_thread)
        c.jump_requested.connect(t.jump_to)
        c.thinking_toggled.connect(t.toggle_thinking)
        c.stream_began.connect(t.begin_stream)
        c.stream_resumed.connect(t.resume_stream)
        c.stream_rejoined.connect(t.rejoin_stream)
        c.stream_appended.connect(t.append_stream)
        c.call_streamed.connect(t.streaming.show_call)
        c.stream_ended.connect(t.end_stream)
        c.metrics_began.connect(m.begin)
        c.metrics_live.connect(m.update_live)
        c.metrics_prefill.connect(m.show_prefill)
        c.metrics_prefill.connect(t.streaming.show_prefill)  # (and in the answer's card)
        c.metrics_finished.connect(m.finish)
        t.action.connect(c._on_action)
        win.composer.send.connect(win.compose.send)
        win.model_state_changed.connect(win.compose.load_ended)  # (a message sent while a model loads)
        c.generating_changed.connect(win.compose.answer_ended)  # (and one sent while an answer streams)
        win.composer.attachments.settled.connect(win.compose.attachments_settled)  # (and its files counted)
        win.composer.stop.connect(self.stop)
        win.composer.cancel_edit.connect(win.compose.end_edit)
        ch = win.chats  # what showing another chat (or a new one, or none) does to the rest of the window
        ch.switching.connect(win.side.metrics.reset)  # "Current answer" was the other chat's
        ch.switched.connect(self._show_last_answer)  # then the opened chat's last answer, as it was made
        ch.edit_ends.connect(win.compose.end_edit)
        ch.leaving.connect(win.banner.leave_chat)
        ch.new_chat_opening.connect(win.presets.apply_new_chat)
        ch.new_chat_opening.connect(win.projects.on_new_chat_opening)  # (after the presets: a project's defaults)
        ch.switching.connect(win.projects.on_switching)
        ch.new_chat_opened.connect(lambda: win.composer.editor.setFocus())
        ch.shown_changed.connect(self.update_welcome)
        ch.deleting_all.connect(win.compare.forget)  # (a comparison writes its answers by id)
        # chats changed by another process (`ember-chat chats import`, a second window): the list reloads
        self.store_watch = StoreWatch(win, win.store, win.chats.changed_elsewhere)
        win.undo.attach_banner(win.banner)
        win.side.params.changed.connect(self._save_params)
        win.transcript.open_link.connect(self._open_link)  # only ever after the user's click
        win.transcript.link_hovered.connect(self._on_link_hovered)

    # ----- what one feature does to the others
    def set_model_state(self, state: ModelState) -> None:
        w = self.frame
        w.controller.model_ready = state is ModelState.READY
        if state is ModelState.READY and w.model is not None:
            w.controller.model_name = w.model.name  # (an answer's header: the engine's display name)
        if state is not ModelState.NONE:
            w.banner.end("model")  # "no model is loaded", or the last pick's error: over
        self.update_welcome()
        w.loading_panel.progress.setValue(0)
        w.model_bar.show_state(state, w.model if state is ModelState.READY else None, w.models.loading_name)
        local = w.model if state is ModelState.READY and w.model and not w.model.is_remote else None
        w.side.params.show_loaded_context(local.n_ctx if local else None)  # (said when the chat's differs)
        w.model_state_changed.emit(state)

    def show_error(self, message: str, cause: str = "") -> None:
        """In the banner, in place of what it said (and of the chat list's Undo link). `cause`: what ends
        the message (see Banner.end); without one it stays until dismissed."""
        self.frame.undo.banner_replaced()
        self.frame.banner.show_error(message, cause)

    def show_notice(self, message: str, cause: str = "") -> None:
        self.frame.undo.banner_replaced()
        self.frame.banner.show_notice(message, cause)

    def update_welcome(self) -> None:
        """The centre's page for the chat open (or none) and the model (see CentrePages.show_for)."""
        w = self.frame
        no_chat = w.controller.conversation_id is None
        w.centre_stack.show_for(no_chat, w.model, w.models.loading, w.models.loading_name)

    def stop(self) -> None:
        """Chat ▸ Stop answer, the message box's Stop."""
        w = self.frame
        w.voice.end()  # (Esc ends a voice conversation too: the microphone released, the reading stopped)
        w.read_aloud.stop()  # (and stops reading aloud: its Stop may be out of view)
        w.models.cancel_load()  # a pick still being worked out, a load in progress
        w.controller.stop()

    def set_theme(self, name: str) -> None:
        """View ▸ Theme: saved, the application's style, the transcript written again in its colours."""
        w = self.frame
        w.settings = w.settings.with_changes(theme=name)
        w.settings_file.save(w.settings)
        w.colors = apply_theme(QApplication.instance(), name)
        w.transcript.set_colors(w.colors)
        w.controller.refresh()
        self._apply_icons()

    def _apply_icons(self) -> None:
        """Icons in the theme's colours (the window's own set, resources/icons/ui)."""
        w = self.frame
        w.banner.set_colors(w.colors)
        w.composer.set_colors(w.colors)
        w.dictation.set_colors(w.colors)
        w.voice.set_colors(w.colors)
        w.conversations.set_colors(w.colors)
        w.side.metrics.chart.set_colors(w.colors)
        w.model_bar.tune.setIcon(themed_icon("settings", w.colors))

    def shutdown(self) -> None:
        """Stop the API server and a benchmark run, then the engine (cancel → join → close the model).
        Background tasks still out are dropped and interrupted, never waited for. Idempotent."""
        w = self.frame
        w.voice.shutdown()
        w.dictation.shutdown()  # (the microphone released)
        w.read_aloud.shutdown()  # silent; an engine still being made is dropped (join_background waits)
        w.projects.close()  # (indexing stopped, the watchers told to stop)
        w.tasks.shutdown()
        w.composer.attachments.shutdown()  # files still being read: their processes killed
        w.api.shutdown()
        w.models.shutdown_dialogs()
        w.controller.tools.close()  # tool calls still running are cancelled
        w.tools.close()  # every MCP server stopped
        w.compare.close()  # a comparison still running is stopped
        w.controller.quitting()
        w.bridge.close()  # (the answer in progress ends as a stopped one: saved whole, with its metrics)
        w.kv_caches.close()  # after the service: the model has put its caches into the store

    def close(self) -> None:
        """The window closed (and hidden): every feature stopped, and what reads the chat store let go of
        it, since the store is closed after the window."""
        w = self.frame
        self.shutdown()
        w.conversations.cancel_pending_search()
        w.transcript.slices.drop()  # (its background rendering reads the store too)
        w.models.close_manager()
        if w.downloads is not None:
            # running downloads pause (they come back next time); one stuck in a read is not waited for
            w.downloads.close(wait=False)

    def join_background(self, timeout: float) -> bool:
        """Wait until every background thread the window started has ended (tests, after close)."""
        w = self.frame
        joins = [w.tasks.join, w.api.join, w.side.params.json_answer.tasks.join, *w.models.joins()]
        joins.append(w.composer.attachments.readers.join)
        joins += [w.tools.join, w.controller.tools.tasks.join]
        joins.append(w.compare.join)
        joins.append(w.projects.join)
        joins.append(lambda t: w.read_aloud.speaker.join(round(t * 1000)))  # (making the speech engine)
        if w.downloads is not None:
            joins.append(w.downloads.wait_idle)
        return all([join(timeout) for join in joins])

    def _current_params(self) -> tuple[SamplingParams, str]:
        params = self.frame.side.params
        return params.params(), params.system_prompt.toPlainText()

    def _save_params(self) -> None:
        w = self.frame
        cid = w.controller.conversation_id
        if cid is not None:
            w.store.update_conversation(
                cid,
                params=w.side.params.to_dict(),
                system_prompt=w.side.params.system_prompt.toPlainText(),
            )

    def _show_last_answer(self, cid: int) -> None:
        """A chat opened: the side panel shows its last answer's figures and Why this answer (and the
        project's), as right after the answer (conversation/last_answer.py)."""
        w = self.frame
        try:
            chat = w.store.conversation(cid)
        except KeyError:
            return  # (gone meanwhile)
        project = w.projects.project_of_folder(chat.folder_id) if chat.folder_id is not None else None
        attachments = w.controller.attachments
        shown = last_answer(w.store, attachments.knowledge if attachments else None, chat, project)
        if shown is not None:
            w.side.metrics.show_saved(shown.metrics, shown.project, shown.used)

    def _show_restored_chats(self) -> bool:
        """A backup was restored: no chat from before it stays on screen, the message being written loses
        its files; says whether it had any (files kept in the database set aside: their ids name others
        here)."""
        w = self.frame
        w.undo.stack.clear()  # what the undo stack would reverse is in the chats set aside, not these
        w.undo.banner_replaced()
        if w.controller.conversation_id is not None:
            w.side.metrics.reset()
        w.controller.conversation_id = None
        w.compose.end_edit()
        chips = w.composer.attachments
        attached = bool(chips.items)
        chips.clear()
        w.presets.apply_new_chat()
        w.controller.refresh()
        w.chats.reload_conversations()
        self.update_welcome()
        return attached

    @Slot(str, float, int, int)
    def _on_retrying(self, reason: str, delay_s: float, attempt: int, attempts: int) -> None:
        w = self.frame
        w.banner.count_down(reason, delay_s, attempt, attempts, lambda: w.controller.generating)

    def _on_generating(self, on: bool) -> None:
        w = self.frame
        if on:
            w.banner.end("answer")  # the last answer's error: this one is on its way
        else:
            w.banner.stop_countdown()
        w.model_picker.setEnabled(True)
        w.statusBar().showMessage(w.tr("Generating…") if on else w.tr("Ready"), 0 if on else 3000)

    def _open_link(self, url: QUrl) -> None:
        self.frame.url_opener(url)

    def _on_link_hovered(self, url: str) -> None:
        w = self.frame
        if url.startswith(("http:", "https:", "mailto:")):
            w.statusBar().showMessage(w.tr("Opens in your browser: {url}").format(url=url))
        else:
            w.statusBar().clearMessage()

    def _on_streamed(self, _tokens: int) -> None:
        self.frame.banner.end("retry")  # the request retried is answering

    def _on_chat_error(self, message: str) -> None:
        self.show_error(message, cause="answer" if self.frame.controller.model_ready else "model")
