"""POST /v1/audio/transcriptions on a real `ember-chat serve` server (127.0.0.1), called by the official
openai client (client.audio.transcriptions.create) with espeak-ng speech made at test time: every
response_format, the segments' times, language, prompt; the server's guards (API key, body size
limit); bad uploads (damaged, empty, not multipart, unknown fields and formats) answered with 400s
naming what is wrong; the model loaded once for the server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest

from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.serve import transcriptions_route
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.serve.sink import ClientGone
from ember_chat.engine.serve.transcriptions_route import API_LIMITS, MAX_PARTS, SpeechModels, transcribe
from ember_chat.engine.speech import Transcriber
from ember_chat.engine.speech.wer import word_error_rate
from tests.helpers.api_support import WAIT_S, assert_error
from tests.helpers.speech import SENTENCES, convert, silent_flac, speak

pytestmark = pytest.mark.slow

TEXT = " ".join(SENTENCES[:3])
WER_BOUND = 0.15  # as tests/engine/test_speech.py measured for the shipped model
KEY = "sk-speech-test"
PATH = "/v1/audio/transcriptions"


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return speak(TEXT, tmp_path_factory.mktemp("api-speech") / "speech.wav")


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    service = EngineService()  # (no chat model: transcription needs none)
    server = ApiServer(service, ServerConfig(port=0, api_key=KEY, max_body_bytes=2_000_000))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        service.close()


@pytest.fixture
def client(server: ApiServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url, api_key=KEY, max_retries=0, timeout=WAIT_S) as c:
        yield c


def post(server: ApiServer, files: dict[str, tuple[str, bytes]] | None, data: dict[str, str], key: str = KEY,
         content: bytes | None = None, headers: dict[str, str] | None = None) -> httpx2.Response:  # fmt: skip
    url = server.url.removesuffix("/v1") + PATH
    auth = {"Authorization": f"Bearer {key}", **(headers or {})}
    if content is not None:
        return httpx2.post(url, content=content, headers=auth, timeout=WAIT_S)
    return httpx2.post(url, files=files, data=data, headers=auth, timeout=WAIT_S)


def test_the_openai_client_transcribes(server: ApiServer, client: openai.OpenAI, speech: Path, tmp_path: Path) -> None:
    with speech.open("rb") as f:
        plain = client.audio.transcriptions.create(model="whisper-1", file=f)
    assert word_error_rate(TEXT, plain.text) <= WER_BOUND, plain.text
    mp3 = convert(Path(shutil.copy(speech, tmp_path / "speech.wav")), "mp3")
    with mp3.open("rb") as f:
        verbose = client.audio.transcriptions.create(model="tiny.en", file=f, language="en", prompt="coffee, Thursday",
                                                     response_format="verbose_json",
                                                     timestamp_granularities=["segment"])  # fmt: skip
    assert word_error_rate(TEXT, verbose.text) <= WER_BOUND, verbose.text
    assert verbose.language == "en" and verbose.duration == pytest.approx(9.0, abs=3.0)
    segments = verbose.segments or []
    assert segments and segments[0].start < 1.0 and segments[-1].end <= verbose.duration + 0.5
    assert [s.start for s in segments] == sorted(s.start for s in segments)
    assert all(s.tokens and s.text.strip() for s in segments)
    with speech.open("rb") as f:
        text = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="text")
    assert isinstance(text, str) and word_error_rate(TEXT, text) <= WER_BOUND
    assert server.speech_models() == ["tiny.en"]  # (whisper-1 is it: loaded once)


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_subtitles(server: ApiServer, speech: Path, fmt: str) -> None:
    response = post(server, {"file": ("speech.wav", speech.read_bytes())}, {"model": "whisper-1",
                                                                           "response_format": fmt})  # fmt: skip
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    lines = response.text.splitlines()
    if fmt == "vtt":
        assert lines[0] == "WEBVTT" and lines[2].startswith("00:00:00.") and " --> 00:00:" in lines[2]
    else:
        assert lines[0] == "1" and lines[1].startswith("00:00:00,") and " --> 00:00:" in lines[1]
    assert word_error_rate(TEXT, " ".join(line for line in lines if "-->" not in line and not line.isdigit()
                                          and line != "WEBVTT")) <= WER_BOUND  # fmt: skip


def test_bad_uploads_are_400s(server: ApiServer, speech: Path) -> None:
    wav = speech.read_bytes()
    message = assert_error(post(server, {"file": ("cut.wav", wav[: len(wav) // 2])}, {"model": "whisper-1"}), 400,
                           "file", "invalid_audio")  # fmt: skip
    assert message.startswith("cut.wav is truncated")
    message = assert_error(post(server, {"file": ("x.mp3", b"")}, {"model": "whisper-1"}), 400, "file")
    assert "x.mp3 is empty" in message
    message = assert_error(post(server, {"file": ("n.ogg", b"\x00\x01garbage" * 50)}, {"model": "whisper-1"}), 400,
                           "file")  # fmt: skip
    assert message.startswith("n.ogg ")
    assert "multipart/form-data" in assert_error(post(server, None, {}, content=b'{"file": "x"}',
                                                      headers={"Content-Type": "application/json"}), 400)  # fmt: skip
    form = b'--B\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--B--\r\n'
    no_file = post(server, None, {}, content=form, headers={"Content-Type": "multipart/form-data; boundary=B"})
    assert "no `file` part" in assert_error(no_file, 400, "file")
    as_text = post(server, None, {}, content=form.replace(b'name="model"', b'name="file"'),
                   headers={"Content-Type": "multipart/form-data; boundary=B"})  # fmt: skip
    assert "not a text field" in assert_error(as_text, 400, "file")
    assert_error(post(server, {"file": ("s.wav", wav)}, {"model": "whisper-1", "response_format": "xml"}), 400,
                 "response_format")  # fmt: skip
    assert_error(post(server, {"file": ("s.wav", wav)}, {"model": "whisper-1", "stream": "true"}), 400, "stream")
    assert_error(post(server, {"file": ("s.wav", wav)}, {"model": "whisper-1", "timestamp_granularities[]": "word"}),
                 400, "timestamp_granularities[]")  # fmt: skip
    assert_error(post(server, {"file": ("s.wav", wav)}, {"model": "whisper-1", "temperature": "nan"}), 400,
                 "temperature")  # fmt: skip
    german = post(server, {"file": ("s.wav", wav)}, {"model": "whisper-1", "language": "de"})
    assert "English only" in assert_error(german, 400, "language")
    assert_error(post(server, {"file": ("s.wav", wav)}, {"model": "large-v9"}), 404, "model", "model_not_found")


def test_the_guards(server: ApiServer, speech: Path) -> None:
    wav = speech.read_bytes()
    assert_error(post(server, {"file": ("s.wav", wav)}, {"model": "whisper-1"}, key="wrong"), 401)
    big = wav * (2_000_000 // len(wav) + 1)
    message = assert_error(post(server, {"file": ("big.wav", big)}, {"model": "whisper-1"}), 413)
    assert "2,000,000 bytes" in message


def test_the_apis_limits_refuse_what_would_take_gigabytes(server: ApiServer) -> None:
    # 31 minutes of silence is a 350 KB FLAC; it would be 119 MB of samples (three hours: 690 MB)
    quiet = silent_flac(31 * 60)
    assert len(quiet) < 400_000
    message = assert_error(post(server, {"file": ("quiet.flac", quiet)}, {"model": "whisper-1"}), 400, "file",
                           "invalid_audio")  # fmt: skip
    assert (
        message == "quiet.flac holds 31 min 00 s of sound, over the limit of 30 min 00 s for one recording. Split it."
    )
    assert API_LIMITS.max_bytes == 25 * 1024 * 1024  # (OpenAI's; this server's body limit is lower still)


def test_a_form_of_many_parts_is_refused_at_the_first_part_over(server: ApiServer) -> None:
    part = b'--B\r\nContent-Disposition: form-data; name="x"\r\n\r\ny\r\n'
    body = part * 30_000 + b"--B--\r\n"
    response = post(server, None, {}, content=body, headers={"Content-Type": "multipart/form-data; boundary=B"})
    # (the parser stopped at part 33, not after reading all 30,000)
    assert assert_error(response, 400) == f"The form has {MAX_PARTS + 1} parts or more; at most {MAX_PARTS}."


def form(wav: bytes, model: str = "whisper-1") -> tuple[bytes, str]:
    """A multipart body as OpenAI's clients send it, and its Content-Type."""
    body = (b'--B\r\nContent-Disposition: form-data; name="model"\r\n\r\n' + model.encode() + b"\r\n"
            b'--B\r\nContent-Disposition: form-data; name="file"; filename="s.wav"\r\n'
            b"Content-Type: audio/wav\r\n\r\n" + wav + b"\r\n--B--\r\n")  # fmt: skip
    return body, "multipart/form-data; boundary=B"


def test_requests_over_the_transcribing_bound_are_told_to_retry(speech: Path) -> None:
    models = SpeechModels(transcribing=1)
    body, content_type = form(speech.read_bytes())
    assert models.slots.acquire(blocking=False)  # (one request decoding or transcribing)
    with pytest.raises(ApiError) as busy:
        transcribe(body, content_type, models, lambda: False)
    assert busy.value.status == 503 and busy.value.code == "server_busy" and busy.value.headers == {"Retry-After": "2"}
    assert models.loaded() == []  # (refused before its model was loaded or its file decoded)
    models.slots.release()
    bad, _ = form(b"\x00\x01garbage" * 50)
    for _ in range(2):  # (a refused file gives its slot back)
        with pytest.raises(ApiError) as refused:
            transcribe(bad, content_type, models, lambda: False)
        assert refused.value.status == 400
    name, reply = transcribe(body, content_type, models, lambda: False)
    assert name == "tiny.en" and word_error_rate(TEXT, json.loads(reply.body)["text"]) <= WER_BOUND


def test_a_client_that_hangs_up_stops_the_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def transcribed(*_args: object, **_kwargs: object) -> None:
        pytest.fail("ten minutes were decoded and handed to the model after the client hung up")

    monkeypatch.setattr(Transcriber, "transcribe", transcribed)
    body, content_type = form(silent_flac(600))
    with pytest.raises(ClientGone):
        transcribe(body, content_type, SpeechModels(), lambda: True)


def test_the_names_of_one_model_load_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []

    def load(name: str, threads: int | None = None) -> Transcriber:
        loads.append(name)
        return Transcriber(name, threads)

    monkeypatch.setattr(transcriptions_route, "Transcriber", load)
    models = SpeechModels()
    got = [models.get(name) for name in ("whisper-1", "tiny", "tiny.en")]
    assert loads == ["tiny.en"] and got[0] is got[1] is got[2] and models.loaded() == ["tiny.en"]
