"""Content parts through Ember's API server with the real `openai` client: `file` parts (base64 or a
data: URL) are read and attached like files in the window, whole or retrieved (said in the response's
`ember.attachments`), bad files are a 400 saying why, and an http(s) image URL is refused without
Ember ever fetching it."""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ember_chat.engine.core.params import LoadConfig
from tests.helpers.api_client import served_client
from tests.helpers.attachment_files import image_bytes, pdf_bytes, write_encrypted_pdf

WAIT_S = 30.0
FACT_PAGE = 17


@pytest.fixture(scope="module")
def client(tiny_model: Path) -> Iterator[openai.OpenAI]:
    with served_client(LoadConfig(tiny_model, n_ctx=4096, threads=1), "tiny", WAIT_S) as c:
        yield c


def _file(name: str, data: bytes, data_url: bool = True) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode("ascii")
    file_data = f"data:application/octet-stream;base64,{encoded}" if data_url else encoded
    return {"type": "file", "file": {"filename": name, "file_data": file_data}}


def _ask(client: openai.OpenAI, *parts: dict[str, Any], stream: bool = False) -> Any:
    messages: Any = [{"role": "user", "content": [{"type": "text", "text": "Where is the valve?"}, *parts]}]
    return client.chat.completions.create(model="tiny", messages=messages, max_tokens=4, temperature=0, stream=stream)


def _manual() -> bytes:
    filler = "Inspect the pipes every month and write down the pressure readings in the log book."
    pages = []
    for page in range(1, 31):
        lines = [f"Page {page}."] + [filler] * 10
        if page == FACT_PAGE:
            lines.insert(3, "The shut-off valve is under the kitchen sink, behind the bin.")
        pages.append("\n".join(lines))
    return pdf_bytes(pages)


def test_a_file_part_that_fits_is_read_whole(client: openai.OpenAI) -> None:
    short = pdf_bytes(["The valve is in the cellar."])
    plain = _ask(client)
    response = _ask(client, _file("short.pdf", short))
    ember = response.model_extra["ember"]
    (report,) = ember["attachments"]
    assert report["name"] == "short.pdf" and report["kind"] == "pdf" and report["mode"] == "whole"
    assert response.usage is not None and plain.usage is not None
    assert response.usage.prompt_tokens >= plain.usage.prompt_tokens + report["tokens"]


def test_a_long_file_is_retrieved_and_its_sources_named_also_when_streaming(client: openai.OpenAI) -> None:
    chunks = list(_ask(client, _file("manual.pdf", _manual(), data_url=False), stream=True))
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    (report,) = final.model_extra["ember"]["attachments"]
    assert report["mode"] == "retrieval" and 0 < report["used"] < report["total"]
    assert FACT_PAGE in [s["page"] for s in report["sources"]]
    assert all(s["file"] == "manual.pdf" for s in report["sources"])


def test_a_file_that_cannot_be_read_is_a_400_saying_why(client: openai.OpenAI, tmp_path: Path) -> None:
    locked = write_encrypted_pdf(tmp_path / "locked.pdf", ["x"]).read_bytes()
    with pytest.raises(openai.BadRequestError) as caught:
        _ask(client, _file("locked.pdf", locked))
    assert caught.value.param == "messages"
    assert "messages[0].content[1]: locked.pdf is protected by a password" in caught.value.message
    bad: dict[str, Any] = {"type": "file", "file": {"filename": "x.txt", "file_data": "not base64!"}}
    with pytest.raises(openai.BadRequestError) as caught:
        _ask(client, bad)
    assert "messages[0].content[1].file.file_data is not valid base64" in caught.value.message


class _Counting(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        body = image_bytes("PNG")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_http_image_url_is_refused_and_never_fetched(client: openai.OpenAI) -> None:
    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=origin.serve_forever)
    thread.start()
    try:
        url = f"http://127.0.0.1:{origin.server_address[1]}/cat.png"
        with pytest.raises(openai.BadRequestError) as caught:
            _ask(client, {"type": "image_url", "image_url": {"url": url}})
        assert "Ember never fetches a URL named in a request" in caught.value.message
        assert _Counting.hits == 0
    finally:
        origin.shutdown()
        origin.server_close()
        thread.join()


def test_an_image_for_a_model_that_cannot_see_is_a_400_not_a_silent_drop(client: openai.OpenAI) -> None:
    url = "data:image/png;base64," + base64.b64encode(image_bytes("PNG")).decode("ascii")
    with pytest.raises(openai.BadRequestError, match="cannot see images"):
        _ask(client, {"type": "image_url", "image_url": {"url": url}})
