"""Read aloud (issue 33): the speaker action on an answer reads it (a second click, on its Stop, stops
at once), and with Settings ▸ Voice ▸ "Read answers aloud as they stream" each answer is read
sentence by sentence while it streams, each sentence said as soon as it is finished (the text work:
engine/speech/read_aloud.py). Built from the app's context and a Speaker; the shell wires the
transcript's actions and the conversation's stream signals to it (shell/compose.py), and shows
`reading_changed` on the transcript (the answer read has Stop in place of its speaker)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from ember_chat.app.context import AppContext
from ember_chat.app.voice.speaker import Speaker
from ember_chat.engine.core.reasoning import split_thinking
from ember_chat.engine.speech.read_aloud import SentenceStream, speakable_sentences

SPEAK = "speak"  # the transcript's action verb (render/message.py)
TEST_SENTENCE = "This is how Ember reads its answers aloud."


class ReadAloud(QObject):
    reading_changed = Signal(object)  # the answer read now (its message id), or None

    def __init__(self, ctx: AppContext, speaker: Speaker, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.speaker = speaker
        self._stream: SentenceStream | None = None  # the answer streaming, read as it comes
        self._stream_id: int | None = None
        self.stream_always = False  # read every answer as it streams (a voice conversation: voice/conversation.py)
        speaker.reading_changed.connect(self._reading_changed)  # (Stop: toggle() drops the stream too)
        speaker.problem.connect(ctx.notifier.show_error)
        self.apply_settings()

    def apply_settings(self) -> None:
        """The voice, rate and pitch of the settings now (Settings ▸ Voice changed them)."""
        s = self.ctx.settings
        self.speaker.configure(s.read_aloud_voice, s.read_aloud_rate, s.read_aloud_pitch)

    # ----- the speaker action
    def on_action(self, verb: str, message_id: int, _arg: int) -> None:
        if verb == SPEAK:
            self.toggle(message_id)

    def toggle(self, message_id: int) -> None:
        """Read the answer `message_id`, or stop when it is being read."""
        if self.speaker.reading == message_id:
            self.stop()
            return
        self._stream = None
        answer = split_thinking(self.ctx.store.message(message_id).content).answer
        self.speaker.speak(message_id, speakable_sentences(answer))

    def stop(self) -> None:
        """Stop at once (and stop reading the answer streaming, if it is the one read)."""
        self._stream = None
        self.speaker.stop()

    def stop_if_gone(self, *_: object) -> None:
        """The answer read was deleted, or its chat moved to the Trash: reading stops (its Stop is no
        longer on screen to click)."""
        reading, store = self.speaker.reading, self.ctx.store
        if not reading:  # (None, or 0: Settings' test sentence)
            return
        try:
            gone = store.conversation(store.message(reading).conversation_id).deleted_at is not None
        except KeyError:
            gone = True
        if gone:
            self.stop()

    def shutdown(self) -> None:
        """The window closes: silent, and an engine still being made is let go (join: Speaker.join)."""
        self._stream = None
        self.speaker.shutdown()

    def test_voice(self) -> None:
        """Settings ▸ Voice ▸ Test voice."""
        self._stream = None
        self.speaker.speak(0, [self.tr(TEST_SENTENCE)])

    # ----- an answer streaming
    def on_stream_began(self, message_id: int, _model: object = None) -> None:
        if self.ctx.settings.read_aloud_streaming or self.stream_always:
            self._stream, self._stream_id = SentenceStream(), message_id

    def on_stream_text(self, text: str) -> None:
        if self._stream is not None and self._stream_id is not None:
            self.speaker.add(self._stream_id, self._stream.feed(text))

    def on_stream_ended(self, *_ended: object) -> None:
        if self._stream is not None and self._stream_id is not None:
            self.speaker.add(self._stream_id, self._stream.finish(), more=False)
        self._stream = None

    def _reading_changed(self, message_id: int | None) -> None:
        self.reading_changed.emit(message_id)
