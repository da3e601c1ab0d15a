"""A microphone for tests and screenshots: the real Microphone class with the device left out. Opening it
opens nothing; PCM (16-bit mono at `rate` Hz: espeak-ng's 22050 by default) goes in through feed_pcm, where
QAudioSource's buffers go, so the conversion, the resampling and everything after it are the real ones."""

from __future__ import annotations

from PySide6.QtMultimedia import QAudioFormat

from ember_chat.app.voice.microphone import LOST, Microphone


def pcm_format(rate: int) -> QAudioFormat:
    """16-bit mono PCM at `rate` Hz."""
    fmt = QAudioFormat()
    fmt.setSampleRate(rate)
    fmt.setChannelCount(1)
    fmt.setSampleFormat(QAudioFormat.SampleFormat.Int16)
    return fmt


class InjectedMicrophone(Microphone):
    """A Microphone whose device is the test: `open` opens nothing (PCM at `rate` Hz, 16-bit mono
    comes through feed_pcm, as QAudioSource's buffers do)."""

    def __init__(self, rate: int = 22_050) -> None:
        super().__init__()
        self.rate = rate

    def open(self) -> bool:
        self._format = pcm_format(self.rate)
        self._source = object()  # type: ignore[assignment]  # (is_open: no device behind it)
        self.opened_changed.emit(True)
        return True

    def close(self) -> None:
        if self._source is not None:
            self._source = None
            self.opened_changed.emit(False)

    def unplug(self) -> None:
        """What _on_state does when the device stops with an error."""
        self.close()
        self.failed.emit(LOST.format(name="Test microphone"))
