"""A recording attached as a document (engine/speech/attachment.py), with real parts: espeak-ng's speech
transcribed by the shipped tiny English model into "[hh:mm:ss] words" lines (the word error rate under
test_speech's bound), progress, cancel, a damaged file, one over the limit, a missing model; then kept
as any document is: in the content-addressed store with its passages in FTS5, planned whole or by
retrieval, exported with its text (no path), imported, and gone with its chat."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.attachments import (
    RETRIEVAL,
    WHOLE,
    AttachmentKind,
    AttachmentStore,
    plan_turn,
    read_attachment_bytes,
)
from ember_chat.engine.attachments.imported import AttachmentImporter
from ember_chat.engine.errors import AttachmentError, EmberError
from ember_chat.engine.speech import AudioFileError, AudioLimits, SpeechModelError, Transcriber, TranscriptionCancelled
from ember_chat.engine.speech.attachment import AudioTranscription, TranscriberSlot, is_audio, stamp
from ember_chat.engine.speech.wer import word_error_rate
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.speech import TEXT, convert, speak

pytestmark = pytest.mark.slow

WER_BOUND = 0.15  # test_speech's bound (measured there: 6.5-8.1 % on these sentences)
LINE = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] (.+)$")


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return speak(TEXT, tmp_path_factory.mktemp("speech") / "meeting.wav")


@pytest.fixture(scope="module")
def slot() -> TranscriberSlot:
    return TranscriberSlot()


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[ConversationStore, AttachmentStore]]:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    chats = ConversationStore(paths.database)
    yield chats, AttachmentStore(paths, chats)
    chats.close()


def spoken(text: str) -> str:
    """The words of a transcript document: its lines without their times (and without its first line)."""
    return " ".join(LINE.match(line).group(4) for line in text.splitlines()[1:])  # type: ignore[union-attr]


def test_a_recording_becomes_a_document_with_times_and_progress(slot: TranscriberSlot, speech: Path) -> None:
    assert is_audio("a.WAV") and is_audio("b.m4a") and is_audio("c.opus") and not is_audio("d.txt")
    assert stamp(3.9) == "00:00:03" and stamp(3725) == "01:02:05"
    seen: list[float] = []
    job = AudioTranscription(slot)
    doc = job.read_path(speech, seen.append)
    assert doc.kind is AttachmentKind.AUDIO and doc.kind.is_text and doc.mime == "audio/wav"
    assert doc.name == "meeting.wav" and doc.size == speech.stat().st_size
    head, *lines = doc.text.splitlines()
    assert head.startswith("Transcript of meeting.wav (00:00:") and "tiny.en" in head
    assert len(lines) >= 3 and all(LINE.match(line) for line in lines), doc.text
    starts = [int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) for m in map(LINE.match, lines) if m]
    assert starts == sorted(starts) and starts[0] <= 1 and starts[-1] >= 10  # (about 20 s of speech)
    assert word_error_rate(TEXT, spoken(doc.text)) <= WER_BOUND, doc.text
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) >= 3 and 0 < seen[0] < 1


def test_each_container_is_transcribed(slot: TranscriberSlot, speech: Path, tmp_path: Path) -> None:
    wav = tmp_path / "short.wav"
    wav.write_bytes(speech.read_bytes())
    for container in ("mp3", "flac"):
        doc = AudioTranscription(slot).read_path(convert(wav, container))
        assert word_error_rate(TEXT, spoken(doc.text)) <= WER_BOUND, (container, doc.text)


def test_cancel_stops_it_at_the_next_segment(slot: TranscriberSlot, speech: Path) -> None:
    job = AudioTranscription(slot)
    seen: list[float] = []

    def report(done: float) -> None:
        seen.append(done)
        job.cancel()  # (the chip's ✕, from the GUI thread, while a segment is being told)

    with pytest.raises(TranscriptionCancelled, match="cancelled"):
        job.read_path(speech, report)
    assert len(seen) == 1 and job.cancelled
    before = AudioTranscription(slot)
    before.cancel()
    with pytest.raises(TranscriptionCancelled):  # (cancelled while it waited: it never starts)
        before.read_path(speech)


def test_bad_recordings_say_what_is_wrong(slot: TranscriberSlot, speech: Path, tmp_path: Path) -> None:
    data = speech.read_bytes()
    cut = tmp_path / "cut.wav"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(AudioFileError, match=r"cut\.wav is truncated: its header declares"):
        AudioTranscription(slot).read_path(cut)
    noise = tmp_path / "noise.mp3"
    noise.write_bytes(b"\x13\x37" * 5000)
    with pytest.raises(AudioFileError, match=r"noise\.mp3 (is not a sound file|holds no sound)"):
        AudioTranscription(slot).read_path(noise)
    with pytest.raises(AudioFileError, match=r"meeting\.wav is 0\.\d MB, over the limit of 0\.0 MB for a recording"):
        AudioTranscription(slot, AudioLimits(max_bytes=1000)).read_path(speech)
    with pytest.raises(EmberError, match=r"gone\.ogg no longer exists"):
        AudioTranscription(slot).read_path(tmp_path / "gone.ogg")
    with pytest.raises(AudioFileError, match=r"empty\.flac is empty"):
        (tmp_path / "empty.flac").touch()
        AudioTranscription(slot).read_path(tmp_path / "empty.flac")


def test_a_missing_model_is_said_each_time_and_found_once_installed(speech: Path) -> None:
    tries: list[int] = []

    def make() -> Transcriber:
        tries.append(1)
        if len(tries) < 3:
            raise SpeechModelError("The speech model tiny.en is not installed. Install it with: pip install …")
        return Transcriber()

    slot = TranscriberSlot(make)
    for _ in range(2):
        with pytest.raises(SpeechModelError, match="not installed"):
            AudioTranscription(slot).read_path(speech)
    assert AudioTranscription(slot).read_path(speech).text.count("[00:00:") >= 3
    assert slot.get() is slot.get() and len(tries) == 3  # (loaded once, then kept)


def test_kept_planned_exported_imported_and_gone_with_its_chat(
    slot: TranscriberSlot, speech: Path, stores: tuple[ConversationStore, AttachmentStore]
) -> None:
    chats, atts = stores
    doc = AudioTranscription(slot).read_path(speech)
    kept = atts.save(doc)
    assert kept.kind == "audio" and atts.text(kept) == doc.text
    assert atts.blob_path(doc.sha256).read_text(encoding="utf-8") == doc.text  # (named by the transcript's hash)
    assert atts.search([kept.id], "coffee milk")[0].text.count("coffee") >= 1  # its passages in FTS5
    conv = chats.create_conversation("c")
    msg = chats.add_message(conv.id, "user", "what time is the meeting?")
    atts.link(msg.id, [kept.id])
    ref = atts.ref(kept)
    whole = plan_turn([ref], "meeting", 10_000, lambda t: len(t.split()), atts)
    assert [i.mode for i in whole.items] == [WHOLE] and "Thursday" in whole.prompt_text
    tight = plan_turn([ref], "When is the meeting moved?", 40, lambda t: len(t.split()), atts)
    assert [i.mode for i in tight.items] == [RETRIEVAL]
    (entry,) = atts.export_entries([msg.id])[msg.id]
    assert entry["kind"] == "audio" and entry["text"] == doc.text and "path" not in entry
    assert str(speech.parent) not in repr(entry)  # (nothing names where the recording was)
    importer = AttachmentImporter(atts)
    msg2 = chats.add_message(chats.create_conversation("imported").id, "user", "again")
    importer.read([entry])(msg2.id)
    (back,) = atts.of_message(msg2.id)
    assert back.kind == "audio" and atts.text(back) == doc.text
    assert back.id == kept.id  # (the same text under the same name: one attachment, as any document's)
    chats.delete_conversation(conv.id)
    assert atts.prune() == 0 and atts.text(atts.get(back.id)) == doc.text  # (the imported chat still has it)
    chats.delete_conversation(msg2.conversation_id)
    assert atts.prune() == 1 and not atts.blob_path(doc.sha256).exists()


def test_two_threads_load_the_model_once() -> None:
    made: list[int] = []

    def make() -> Transcriber:
        made.append(1)
        return Transcriber()

    slot = TranscriberSlot(make)
    got: list[Transcriber] = []
    threads = [threading.Thread(target=lambda: got.append(slot.get())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and got[0] is got[1]


def test_where_no_transcriber_is_at_hand_a_recording_is_refused_saying_how_to_transcribe_it(speech: Path) -> None:
    with pytest.raises(AttachmentError, match=r"meeting\.wav is a recording: .*ember-chat transcribe FILE"):
        read_attachment_bytes("meeting.wav", speech.read_bytes())  # (ember-chat run --attach, the API's parts)


def test_the_same_recording_under_another_name_keeps_its_own_transcript(
    slot: TranscriberSlot, speech: Path, stores: tuple[ConversationStore, AttachmentStore]
) -> None:
    _, atts = stores
    data = speech.read_bytes()
    first = atts.save(AudioTranscription(slot).read_bytes("monday.wav", data))
    again = AudioTranscription(slot).read_bytes("tuesday.wav", data)
    second = atts.save(again)
    # (the blob was named by the recording's hash: the second kept monday.wav's text, its index tuesday's)
    assert atts.text(second) == again.text and again.text.startswith("Transcript of tuesday.wav ")
    assert atts.text(first).startswith("Transcript of monday.wav ") and first.sha256 != second.sha256
