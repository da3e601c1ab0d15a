"""The window's presets: the preset library (presets.json) and where it applies.

- A new chat starts from the loaded model's default preset, else the default preset for new chats,
  over the app's defaults (the built-in Default names nothing: the app's defaults exactly).
- Loading a model applies its default preset to the new chat on screen; an open chat keeps its own
  values (saved with it, as every change in the side panel is), which win when it is reopened.
- The side panel's picker shows which preset the chat's values are, and applies one (saved with the
  chat); "Presets…" opens the library (Settings ▸ Presets…).
- `/` typed in an empty message box opens the saved prompts (popup.py).
- The window's API server answers with the loaded model's default preset (`for_api`, asked on the
  server's threads: it reads only the library, which is thread-safe, and a key set here).

Built from the context and what it drives (the side panel's parameters with their picker, the message
box's editor) plus what it asks of the chat on screen and the loaded model, as callables; the composition
connects the window's model state and the conversation's thread_shown to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from ember_chat.app.context import AppContext
from ember_chat.app.qt.settings_page import show_settings_page
from ember_chat.app.side_panel.params_panel import ParamsPanel
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.storage.presets import PRESET_PARAMS, Preset, PresetError, PresetLibrary, model_key

if TYPE_CHECKING:
    from ember_chat.app.presets.dialog import PresetsDialog
    from ember_chat.app.presets.popup import PromptPopup


class WindowPresets(QObject):
    def __init__(
        self,
        ctx: AppContext,
        config_dir: Path,
        params: ParamsPanel,
        editor: QPlainTextEdit,
        *,
        loaded_name: Callable[[], str | None],
        open_chat: Callable[[], int | None],
        generating: Callable[[], bool],
        parent: QWidget,
    ) -> None:
        """`params`: the side panel's parameters (and their preset picker); `editor`: the message box, where
        `/` opens the saved prompts; `loaded_name`: the loaded model's name (None while none is loaded);
        `open_chat`: the chat on screen's id (None: a new chat); `generating`: whether an answer streams;
        `parent`: what the library dialog stays over."""
        super().__init__(parent)
        self.ctx = ctx
        self.params = params
        self.editor = editor
        self._loaded_name = loaded_name
        self._open_chat = open_chat
        self._generating = generating
        self.dialog_parent = parent
        self.library = PresetLibrary(config_dir)
        self.dialog: PresetsDialog | None = None  # the library dialog, kept while open (and for tests)
        self.popup: PromptPopup | None = None  # the saved prompts popup, while open (and for tests)
        self._served: str | None = None  # the loaded model's key (read by the API server's threads)
        self._applied: str | None = None  # the preset the new chat on screen was last started from
        picker = params.preset_picker
        picker.chosen.connect(self.use_in_chat)
        picker.manage.connect(self.open_dialog)
        params.changed.connect(self.sync_picker)
        editor.installEventFilter(self)

    def take_problems(self) -> list[str]:
        self.library.presets()  # (reads the file: a damaged one is set aside and said)
        return self.library.take_problems()

    # ----- which preset
    def loaded_key(self) -> str | None:
        name = self._loaded_name()
        return model_key(name, self.ctx.library.models_dir) if name else None

    def for_new_chat(self) -> Preset:
        return self.library.for_model(self.loaded_key())

    def for_api(self) -> Preset | None:
        """The served model's default preset (the API server asks at each request, on its thread)."""
        return self.library.model_default(self._served)

    # ----- applying
    def apply_new_chat(self) -> None:
        """The side panel for a new chat: its preset over the app's defaults."""
        s = self.ctx.settings
        preset = self.for_new_chat()
        self._applied = preset.id
        self.params.set_params(
            preset.sampling(s.sampling_params()), preset.system_prompt_over(s.system_prompt), s.context_length
        )
        self.sync_picker()

    def start_with(self, preset_id: str | None, context_length: int | None) -> None:
        """The new chat on screen starts from this preset (a project's default; None, or one deleted since:
        the values it has) and this context length (None: the one it has)."""
        s, panel = self.ctx.settings, self.params
        preset = self.library.get(preset_id) if preset_id else None
        if preset is not None:
            self._applied = preset.id
            sampling, system = preset.sampling(s.sampling_params()), preset.system_prompt_over(s.system_prompt)
        else:
            sampling, system = panel.params(), panel.system_prompt.toPlainText()
        panel.set_params(sampling, system, context_length or panel.context.value())
        self.sync_picker()

    def use_in_chat(self, preset_id: str) -> None:
        """The picker's choice: the preset's values in the side panel, saved with the open chat."""
        preset = self.library.get(preset_id)
        if preset is None:
            self.ctx.notifier.show_error(self.tr("That preset no longer exists (it was deleted); choose another one."))
            self.sync_picker()
            return
        s, panel = self.ctx.settings, self.params
        current = panel.params()
        chosen = replace(
            preset.sampling(s.sampling_params()),
            response_format=current.response_format,
            speculative=current.speculative,  # (a preset does not set it: the chat keeps its choice)
        )
        panel.set_params(chosen, preset.system_prompt_over(s.system_prompt), panel.context.value())
        panel.changed.emit()  # saved with the chat (the window's _save_params), and the picker follows

    def matches(self, preset: Preset) -> bool:
        """Whether the side panel holds exactly what this preset gives over the app's defaults."""
        s, panel = self.ctx.settings, self.params
        want, have = preset.sampling(s.sampling_params()), panel.params()
        if any(getattr(want, name) != getattr(have, name) for name in PRESET_PARAMS):
            return False
        if preset.thinking is not None and panel.think.isEnabled() and have.thinking != preset.thinking:
            return False
        return panel.system_prompt.toPlainText() == preset.system_prompt_over(s.system_prompt)

    def sync_picker(self) -> None:
        presets = self.library.presets()
        first = self.for_new_chat()  # when several match, the one a new chat would start from
        ordered = sorted(presets, key=lambda p: p.id != first.id)
        current = next((p.id for p in ordered if self.matches(p)), None)
        self.params.preset_picker.set_presets([(p.id, p.name) for p in presets], current)

    def on_thread_shown(self, *_shown: object) -> None:
        self.sync_picker()  # another chat (its own values), or the same one

    def on_model_state(self, state: str) -> None:
        if self.dialog is not None and state != ModelState.LOADING:  # an open library names the model there is
            self.dialog.set_model(self._model_label())
        if state != ModelState.READY:
            return
        self._served = self.loaded_key()
        if self._open_chat() is None and self.for_new_chat().id != self._applied:
            # the new chat on screen starts from this model's preset (values typed into it before the load,
            # or given on the command line, stay when the model has no preset of its own)
            self.apply_new_chat()
        else:
            self.sync_picker()  # an open chat keeps its own values

    # ----- the library dialog
    def open_dialog(self) -> PresetsDialog:
        """Settings ▸ Presets…: the library (one at a time, raised if open)."""
        from ember_chat.app.presets.dialog import PresetsDialog

        if self.dialog is None:
            self.dialog = PresetsDialog(self.library, self._chat_values, self._model_label(), self.dialog_parent)
            self.dialog.changed.connect(self._library_changed)
        else:
            self.dialog.set_model(self._model_label())
        show_settings_page(self.dialog_parent, "presets", self.dialog)  # Settings ▸ Presets (kept while it lives)
        return self.dialog

    def _model_label(self) -> tuple[str, str] | None:
        key = self.loaded_key()
        return (key, self._loaded_name() or key) if key else None

    def _chat_values(self) -> tuple[str, str, dict[str, object], bool | None]:
        """(a name for it, system prompt, parameters, thinking) of the chat on screen, for a new preset."""
        panel = self.params
        params = panel.params()
        cid = self._open_chat()
        title = self.ctx.store.conversation(cid).title if cid is not None else self.tr("New preset")
        values = {name: getattr(params, name) for name in PRESET_PARAMS}
        return title, panel.system_prompt.toPlainText(), values, params.thinking

    def _library_changed(self) -> None:
        if self._open_chat() is None and not self._generating():
            self.apply_new_chat()  # the new chat on screen follows a new default
        else:
            self.sync_picker()

    # ----- `/` in an empty message box
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.editor and event.type() == QEvent.Type.KeyPress:
            key = event if isinstance(event, QKeyEvent) else None
            plain = key is not None and not key.modifiers() & (
                Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier
            )
            if key is not None and plain and key.text() == "/" and not self.editor.toPlainText():
                self.open_prompts()
                return True
        return super().eventFilter(watched, event)

    def open_prompts(self) -> PromptPopup:
        from ember_chat.app.presets.popup import PromptPopup

        if self.popup is not None:
            self.popup.close()
        editor = self.editor
        try:
            prompts = [p for p in self.library.presets() if p.system_prompt.strip()]
        except PresetError as exc:  # (reading never raises; kept for a library that could)
            self.ctx.notifier.show_error(str(exc))
            prompts = []
        popup = PromptPopup(prompts, editor)
        popup.inserted.connect(self._insert)
        popup.dismissed.connect(self._typed_back)
        popup.closed.connect(lambda: setattr(self, "popup", None))
        self.popup = popup
        popup.show_above(editor)
        return popup

    def _typed_back(self, typed: str) -> None:
        """The popup closed with no prompt inserted: what was typed is the start of the message."""
        editor = self.editor
        if not editor.toPlainText():
            editor.insertPlainText(typed)

    def _insert(self, text: str) -> None:
        editor = self.editor
        editor.insertPlainText(text)
        editor.setFocus()
