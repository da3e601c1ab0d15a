"""The microphone for dictation (issue 33): Qt Multimedia's QAudioSource, asked for 16 kHz mono 16-bit
(what Whisper reads) or, where the device cannot give that, its own format converted here. Each buffer
it gives is handed on as 16 kHz mono float32 samples (`pcm` → `samples`), the boundary the tests feed
with espeak-ng speech instead of a device.

The device is opened only while listening: `stop()` closes it at once (the system's "microphone in
use" indicator goes off with it). No microphone, permission refused, a device unplugged mid-recording:
`failed` says what happened and what to do, in a sentence for the window."""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QCoreApplication, QIODevice, QObject, Qt, Signal
from PySide6.QtMultimedia import QAudioDevice, QAudioFormat, QAudioSource, QMediaDevices, QtAudio

from ember_chat.engine.speech import SAMPLE_RATE

NO_MICROPHONE = (
    "No microphone was found, so Ember cannot listen. Connect one (or switch it on in the system's sound "
    "settings) and click the microphone again."
)
PERMISSION_DENIED = (
    "Ember may not use the microphone: the system refused it. Allow Ember in the system's privacy settings "
    "(Microphone), then click the microphone again."
)
ASKED = "Ember asked the system for the microphone: answer its question (Allow), then click the microphone again."
CANNOT_OPEN = (
    "The microphone {name} could not be opened ({why}). Check that no other program holds it, or choose "
    "another input in the system's sound settings, then click the microphone again."
)
LOST = (
    "The microphone {name} stopped giving sound (unplugged?): listening stopped, and the words heard so far "
    "are in the message box. Connect it again and click the microphone to go on."
)
# QAudio's errors in words
_WHY = {
    QtAudio.Error.OpenError: "the device would not open",
    QtAudio.Error.IOError: "the device stopped answering",
    QtAudio.Error.UnderrunError: "no data",
    QtAudio.Error.FatalError: "the audio system failed",
}


def pcm_to_samples(data: bytes, fmt: QAudioFormat) -> np.ndarray:
    """A buffer of the device's PCM as 16 kHz mono float32 in -1..1: channels averaged, resampled
    (linear: speech keeps its words; Whisper's own front end filters anyway)."""
    kind = fmt.sampleFormat()
    dtype = {
        QAudioFormat.SampleFormat.Int16: np.int16,
        QAudioFormat.SampleFormat.Int32: np.int32,
        QAudioFormat.SampleFormat.UInt8: np.uint8,
        QAudioFormat.SampleFormat.Float: np.float32,
    }.get(kind)
    if dtype is None:
        raise ValueError(f"unsupported sample format {kind}")
    size = np.dtype(dtype).itemsize * max(1, fmt.channelCount())
    raw = np.frombuffer(data[: len(data) - len(data) % size], dtype=dtype)
    if kind == QAudioFormat.SampleFormat.Int16:
        samples = raw.astype(np.float32) / 32768.0
    elif kind == QAudioFormat.SampleFormat.Int32:
        samples = raw.astype(np.float32) / 2147483648.0
    elif kind == QAudioFormat.SampleFormat.UInt8:
        samples = (raw.astype(np.float32) - 128.0) / 128.0
    else:
        samples = raw.astype(np.float32)
    channels = max(1, fmt.channelCount())
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    rate = fmt.sampleRate()
    if rate > 0 and rate != SAMPLE_RATE and samples.size:
        count = round(samples.size * SAMPLE_RATE / rate)
        samples = np.interp(np.arange(count) * (rate / SAMPLE_RATE), np.arange(samples.size), samples)
    return samples.astype(np.float32, copy=False)


def wanted_format() -> QAudioFormat:
    fmt = QAudioFormat()
    fmt.setSampleRate(SAMPLE_RATE)
    fmt.setChannelCount(1)
    fmt.setSampleFormat(QAudioFormat.SampleFormat.Int16)
    return fmt


def microphone_permission() -> Qt.PermissionStatus:
    """The system's answer for the microphone (Granted on Linux, which has no such permission). Not
    asked yet (macOS, Windows): the system's question is put to the user now, and Undetermined returned
    (Qt would otherwise open the device and get silence)."""
    try:
        from PySide6.QtCore import QMicrophonePermission
    except ImportError:  # (a Qt before 6.5: no permissions API)
        return Qt.PermissionStatus.Granted
    app = QCoreApplication.instance()
    if app is None or not sys.platform.startswith(("darwin", "win")):
        return Qt.PermissionStatus.Granted
    status = app.checkPermission(QMicrophonePermission())
    if status == Qt.PermissionStatus.Undetermined:
        app.requestPermission(QMicrophonePermission(), lambda _answer: None)  # (the next click reads the answer)
    return status


class Microphone(QObject):
    """Listens while open. `samples(np.ndarray)`: 16 kHz mono float32, each buffer the device gave;
    `failed(str)`: it could not open or it stopped (closed by then); `opened_changed(bool)`."""

    samples = Signal(object)
    failed = Signal(str)
    opened_changed = Signal(bool)

    def __init__(
        self,
        inputs: Callable[[], list[QAudioDevice]] = QMediaDevices.audioInputs,
        default_input: Callable[[], QAudioDevice] = QMediaDevices.defaultAudioInput,
        permission: Callable[[], Qt.PermissionStatus] = microphone_permission,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._inputs, self._default_input, self._permission = inputs, default_input, permission
        self._source: QAudioSource | None = None
        self._io: QIODevice | None = None
        self._format = wanted_format()
        self.device_name = ""

    @property
    def is_open(self) -> bool:
        return self._source is not None

    def open(self) -> bool:
        """Start listening on the system's default input; False (and `failed` said why) if it cannot."""
        if self._source is not None:
            return True
        permission = self._permission()
        if permission == Qt.PermissionStatus.Denied:
            self.failed.emit(self.tr(PERMISSION_DENIED))
            return False
        if permission == Qt.PermissionStatus.Undetermined:
            self.failed.emit(self.tr(ASKED))
            return False
        if not self._inputs():
            self.failed.emit(self.tr(NO_MICROPHONE))
            return False
        device = self._default_input()
        if device.isNull():
            device = self._inputs()[0]
        self.device_name = device.description()
        fmt = wanted_format()
        if not device.isFormatSupported(fmt):
            fmt = device.preferredFormat()  # (converted in pcm_to_samples)
        self._format = fmt
        source = QAudioSource(device, fmt, self)
        source.setBufferSize(SAMPLE_RATE * 2 // 5)  # ~0.2 s at 16 kHz: partials need no more
        io = source.start()
        if io is None or source.error() != QtAudio.Error.NoError:
            why = _WHY.get(source.error(), "unknown error")
            source.deleteLater()
            self.failed.emit(self.tr(CANNOT_OPEN).format(name=self.device_name, why=why))
            return False
        self._source, self._io = source, io
        io.readyRead.connect(self._read)
        source.stateChanged.connect(self._on_state)
        self.opened_changed.emit(True)
        return True

    def close(self) -> None:
        """Stop listening and release the device at once (what was buffered is handed on first)."""
        source = self._source
        if source is None:
            return
        self._read()
        self._source, self._io = None, None
        source.stateChanged.disconnect(self._on_state)
        source.stop()
        source.deleteLater()
        self.opened_changed.emit(False)

    def _read(self) -> None:
        if self._io is not None:
            self.feed_pcm(bytes(self._io.readAll().data()))

    def feed_pcm(self, data: bytes) -> None:
        """A buffer of PCM in the open device's format, handed on as samples (tests feed speech here)."""
        if data:
            self.samples.emit(pcm_to_samples(data, self._format))

    def _source_error(self) -> QtAudio.Error:
        return self._source.error() if self._source is not None else QtAudio.Error.NoError

    def _on_state(self) -> None:
        """The source's state changed (its argument is not taken: PySide cannot convert QtAudio.State
        for a Python slot on every Qt); stopped with an error: the device is gone."""
        source = self._source
        if (
            source is None
            or source.state() != QtAudio.State.StoppedState
            or self._source_error() == QtAudio.Error.NoError
        ):
            return
        self.close()
        self.failed.emit(self.tr(LOST).format(name=self.device_name))
