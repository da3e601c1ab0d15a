"""Files built to be slow or to inflate, sent to Ember's API server as `file` content parts with the
official `openai` client (tests/hostile/slow_or_inflating_files.py): each is a 400 saying which limit
stopped it, read in a child process that is gone afterwards; an HTML section Python's parser asserts
on is read, not a 500; a client that hangs up ends its file's reader at once. The server's limits are
short here (its ServerConfig, from settings.json in the window and `ember-chat serve`)."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from pytestqt.qtbot import QtBot

from ember_chat.engine.attachments import Limits
from ember_chat.engine.attachments.kinds import MB
from ember_chat.engine.attachments.reader_turns import MAX_READERS
from ember_chat.engine.core.params import LoadConfig
from tests.helpers.api_client import served_client
from tests.helpers.attachment_files import reading_processes
from tests.hostile.slow_or_inflating_files import (
    docx_zip_bomb,
    pdf_flate_bomb,
    quadratic_html,
    unknown_section_html,
)

WAIT_S = 120.0
READ_S = 2.0  # the server's time limit for one file here (60 s by default)
MEMORY_MB = 400  # its memory limit for one file (2 GB by default)
SLOW_HTML = 400_000  # repeats of `a </x `: 2.4 MB, minutes for Python's parser


@pytest.fixture(scope="module")
def client(tiny_model: Any) -> Iterator[openai.OpenAI]:
    with served_client(LoadConfig(tiny_model, n_ctx=4096, threads=1), "tiny", WAIT_S, Limits(max_seconds=READ_S)) as c:
        yield c


@pytest.fixture(autouse=True)
def no_reader_left(qtbot: QtBot) -> Iterator[None]:
    yield
    qtbot.waitUntil(lambda: not reading_processes(), timeout=10_000)


def _file(name: str, data: bytes) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "file", "file": {"filename": name, "file_data": f"data:application/octet-stream;base64,{encoded}"}}


def _ask(client: openai.OpenAI, *parts: dict[str, Any]) -> Any:
    messages: Any = [{"role": "user", "content": [{"type": "text", "text": "What does it say?"}, *parts]}]
    return client.chat.completions.create(model="tiny", messages=messages, max_tokens=2, temperature=0)


def _refused(client: openai.OpenAI, part: dict[str, Any]) -> str:
    with pytest.raises(openai.BadRequestError) as caught:
        _ask(client, part)
    assert caught.value.status_code == 400 and caught.value.param == "messages"
    return caught.value.message


def test_html_that_python_parses_in_quadratic_time_is_a_400_at_the_time_limit(client: openai.OpenAI) -> None:
    said = _refused(client, _file("page.html", quadratic_html(SLOW_HTML)))
    assert "messages[0].content[1]: page.html took longer than 2 seconds to read" in said
    assert "attachment_read_seconds" in said


def test_an_html_section_python_asserts_on_is_read_not_a_500(client: openai.OpenAI) -> None:
    response = _ask(client, _file("section.html", unknown_section_html()))
    (report,) = response.model_extra["ember"]["attachments"]
    assert report["name"] == "section.html" and report["kind"] == "html" and report["mode"] == "whole"


def test_a_pdf_whose_stream_inflates_is_refused(client: openai.OpenAI) -> None:
    # under pypdf's 75 MB cap: parsed op by op until the time limit
    said = _refused(client, _file("inflating.pdf", pdf_flate_bomb(8 * MB)))
    assert "inflating.pdf took longer than 2 seconds to read" in said
    # over it: the pinned pypdf stops decompressing (older versions inflated it all in memory)
    said = _refused(client, _file("bomb.pdf", pdf_flate_bomb(300 * MB)))
    assert "bomb.pdf" in said and ("cannot be read as a PDF" in said or "needs more than" in said), said


def test_a_docx_zip_bomb_under_the_unpacked_size_check_stops_at_the_memory_limit(tiny_model: Any) -> None:
    limits = Limits(max_seconds=WAIT_S, max_memory_bytes=MEMORY_MB * MB)  # (the memory limit, not the clock)
    with served_client(LoadConfig(tiny_model, n_ctx=512, threads=1), "tiny", WAIT_S, limits) as client:
        said = _refused(client, _file("bomb.docx", docx_zip_bomb(40 * MB)))
    assert f"bomb.docx needs more than {MEMORY_MB}.0 MB of memory to read" in said
    assert "attachment_read_memory_mb" in said


def test_a_client_that_hangs_up_ends_its_file_s_reader(tiny_model: Any, qtbot: QtBot) -> None:
    """A client that gives up (its timeout) while its file is read, on a server whose time limit is
    long: the server sees the connection go and kills the reader, instead of parsing on for minutes."""
    errors: list[BaseException] = []
    config = LoadConfig(tiny_model, n_ctx=512, threads=1)
    with served_client(config, "tiny", 8.0, Limits(max_seconds=600.0)) as impatient:

        def ask() -> None:
            try:
                _ask(impatient, _file("slow.html", quadratic_html(SLOW_HTML)))
            except openai.APIError as exc:
                errors.append(exc)

        thread = threading.Thread(target=ask)
        thread.start()
        try:
            qtbot.waitUntil(lambda: bool(reading_processes()), timeout=30_000)  # it is being read
            thread.join(60)
            assert [type(e) for e in errors] == [openai.APITimeoutError]  # the client gave up…
            qtbot.waitUntil(lambda: not reading_processes(), timeout=10_000)  # …and its reader is gone
        finally:
            thread.join(60)


def test_many_slow_files_at_once_are_read_a_few_at_a_time(client: openai.OpenAI, qtbot: QtBot) -> None:
    """More requests with a slow file than MAX_READERS: never more readers than the API's share at once
    (each holds up to the memory limit), and each file still gets its whole time limit once its turn
    comes (they wait less than the server's file_turn_wait_s)."""
    said: list[str] = []

    def ask(n: int) -> None:
        with pytest.raises(openai.BadRequestError) as caught:
            _ask(client, _file(f"slow-{n}.html", quadratic_html(SLOW_HTML)))
        said.append(caught.value.message)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(MAX_READERS + 2)]
    most = [0]

    def all_answered() -> bool:
        most[0] = max(most[0], len(reading_processes()))
        return not any(t.is_alive() for t in threads)

    for t in threads:
        t.start()
    try:
        qtbot.waitUntil(all_answered, timeout=120_000)
    finally:
        for t in threads:
            t.join(60)
    assert 0 < most[0] <= MAX_READERS - 1  # (the API's share: one is always left for the window)
    assert len(said) == len(threads) and all("took longer than 2 seconds to read" in s for s in said), said


def test_a_file_that_finds_the_api_s_readers_busy_is_a_503_after_a_bounded_wait(tiny_model: Any, qtbot: QtBot) -> None:
    """Slow files hold every reader the API may use (one fewer than there are): a request's file waits
    the server's file_turn_wait_s for its turn, then is a 503 saying so, with Retry-After, instead of
    waiting for as long as other clients keep the readers busy."""
    errors: list[BaseException] = []
    config = LoadConfig(tiny_model, n_ctx=512, threads=1)
    threads: list[threading.Thread] = []
    try:
        with served_client(config, "tiny", WAIT_S, Limits(max_seconds=600.0), file_turn_wait_s=1.0) as client:

            def hold(n: int) -> None:
                try:
                    _ask(client, _file(f"slow-{n}.html", quadratic_html(SLOW_HTML)))
                except openai.APIError as exc:
                    errors.append(exc)

            threads += [threading.Thread(target=hold, args=(n,)) for n in range(MAX_READERS - 1)]
            for t in threads:
                t.start()
            qtbot.waitUntil(lambda: len(reading_processes()) == MAX_READERS - 1, timeout=30_000)
            with pytest.raises(openai.InternalServerError) as caught:
                _ask(client, _file("notes.txt", b"A short note."))
            busy = caught.value
            assert busy.status_code == 503 and busy.code == "readers_busy" and busy.param == "messages"
            share = "1 file at once for API requests, and other files kept it"
            if MAX_READERS > 2:
                share = f"{MAX_READERS - 1} files at once for API requests, and other files kept them"
            assert busy.body == {
                "message": f"messages[0].content[1]: notes.txt was not read: Ember reads at most {share} busy for "
                "1 second. Send the request again later.",
                "type": "server_error",
                "param": "messages",
                "code": "readers_busy",
            }
            assert busy.response.headers["retry-after"] == "600"  # (every read running ends by then)
            assert len(reading_processes()) == MAX_READERS - 1 and not errors  # (the slow ones read on)
    finally:  # (the server stopped: their readers ended with their connections)
        for t in threads:
            t.join(60)
    assert [type(e) for e in errors] == [openai.APIConnectionError] * (MAX_READERS - 1)
