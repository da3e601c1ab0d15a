"""The speech model and language chosen in Settings ▸ Voice (settings.json's dictation_model and
dictation_language), for all the window hears: dictation, the voice conversation (which listens through
the dictation) and recordings attached (their TranscriberSlot). A model changed in Settings is loaded at
the next use; one still loaded serves what is already running."""

from __future__ import annotations

from ember_chat.app.context import AppContext
from ember_chat.engine.core.speech_catalog import WHISPER_LANGUAGES, SpeechModel, model_languages
from ember_chat.engine.speech import KNOWN_MODELS, SpeechModelError, Transcriber, locate
from ember_chat.engine.speech.attachment import TranscriberSlot


class SpeechChoice:
    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx

    @property
    def model(self) -> str:
        return self.ctx.settings.dictation_model

    def language(self) -> str | None:
        """The language spoken (None: Whisper detects it; an English-only model is told English)."""
        return self.ctx.settings.dictation_language or None

    def make(self) -> Transcriber:
        """The chosen model, loaded (a worker thread calls it: about a second)."""
        return Transcriber(self.model, models_dir=self.ctx.library.models_dir)

    def installed(self) -> list[SpeechModel]:
        """The models here: the shipped tiny.en when the starter set is installed, and the Hub models whose
        download finished (their files checked: a damaged one is left out)."""
        found = []
        for model in KNOWN_MODELS:
            try:
                locate(model.name, self.ctx.library.models_dir)
            except SpeechModelError:
                continue
            found.append(model)
        return found


def languages_of(model: str) -> list[tuple[str, str]]:
    """(code, name) of the languages `model` understands, by name."""
    return sorted(((code, WHISPER_LANGUAGES[code]) for code in model_languages(model)), key=lambda p: p[1])


class ChosenTranscriberSlot(TranscriberSlot):
    """The attachments' slot: the chosen model (loaded again when another is chosen) and language."""

    def __init__(self, choice: SpeechChoice) -> None:
        super().__init__(choice.make)
        self.choice = choice
        self._loaded_for = ""

    def get(self) -> Transcriber:
        with self._lock:
            if self._transcriber is None or self._loaded_for != self.choice.model:
                self._transcriber = None  # (a failed load keeps no model chosen before)
                self._loaded_for = self.choice.model
                self._transcriber = self._make()
            return self._transcriber

    def language(self) -> str | None:
        return self.choice.language()
