"""Reading attachments: every kind from real files made here (PDF objects written by hand, DOCX by
python-docx, images by Pillow), and every bad input refused with one plain sentence."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import threading
from pathlib import Path

import pytest

from ember_chat.engine.attachments import DEFAULT_LIMITS, AttachmentKind, Limits, read_attachment, read_attachment_bytes
from ember_chat.engine.attachments.extract import read_file_bytes
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.settings import Settings
from tests.helpers.attachment_files import (
    image_bytes,
    png_bomb,
    write_docx,
    write_docx_bomb,
    write_encrypted_pdf,
    write_pdf,
)


def test_a_pdf_is_read_page_by_page_with_the_offset_of_each_page(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "report.pdf", ["Quarterly report\nRevenue grew by 12 percent", "Page two: the outlook"])
    seen: list[float] = []
    doc = read_attachment(path, progress=seen.append)
    assert doc.kind is AttachmentKind.PDF and doc.mime == "application/pdf"
    assert doc.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and doc.size == path.stat().st_size
    assert "Revenue grew by 12 percent" in doc.text
    assert doc.text[doc.pages[1] :].startswith("Page two: the outlook")
    assert doc.page_of(doc.pages[1] + 3) == 2 and doc.page_of(0) == 1
    assert seen[-1] == 1.0 and seen == sorted(seen)


def test_a_docx_keeps_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    path = write_docx(
        tmp_path / "notes.docx", ["Meeting notes", "We chose the blue design."], [["Owner", "Task"], ["Ada", "Ship it"]]
    )
    doc = read_attachment(path)
    assert doc.kind is AttachmentKind.DOCX
    assert doc.text == "Meeting notes\nWe chose the blue design.\nOwner | Task\nAda | Ship it"


@pytest.mark.parametrize(
    ("name", "content", "kind", "expected"),
    [
        ("notes.txt", "plain words\n", AttachmentKind.TEXT, "plain words\n"),
        ("README.md", "# Title\n\n- item\n", AttachmentKind.MARKDOWN, "# Title\n\n- item\n"),
        ("main.rs", "fn main() {}\n", AttachmentKind.CODE, "fn main() {}\n"),
        ("table.tsv", "a\tb\n1\t2\n", AttachmentKind.CSV, "a\tb\n1\t2\n"),
        ("data.json", '{"k": [1, 2]}', AttachmentKind.JSON, '{"k": [1, 2]}'),
    ],
)
def test_text_kinds_by_name(tmp_path: Path, name: str, content: str, kind: AttachmentKind, expected: str) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    doc = read_attachment(tmp_path / name)
    assert doc.kind is kind and doc.text == expected and doc.image is None and doc.pages == ()


def test_html_gives_its_readable_text_without_scripts_or_styles() -> None:
    html = (
        "<html><head><title>T</title><style>p{color:red}</style></head><body><h1>Release &amp; notes</h1>"
        "<p>First <b>point</b>.</p><script>alert('x')</script>"
        "<table><tr><td>a</td><td>b</td></tr></table></body></html>"
    )
    doc = read_attachment_bytes("page.html", html.encode())
    assert doc.kind is AttachmentKind.HTML
    assert doc.text == "Release & notes\n\nFirst point.\n\n| a | b"


def test_a_legacy_encoding_is_detected() -> None:
    text = "Le café était très animé ce soir-là, et les élèves répétaient leurs leçons à voix haute. " * 5
    doc = read_attachment_bytes("lettre.txt", text.encode("cp1252"))
    assert doc.text == text


def test_images_keep_their_bytes_and_a_gif_gives_its_first_frame() -> None:
    png = image_bytes("PNG")
    assert read_attachment_bytes("shot.png", png).image == png
    gif = read_attachment_bytes("anim.gif", image_bytes("GIF", frames=3))
    assert gif.kind is AttachmentKind.IMAGE and gif.mime == "image/gif" and gif.text == ""
    from PIL import Image

    first = Image.open(io.BytesIO(gif.image or b""))
    assert first.format == "PNG" and first.size == (32, 24)
    webp = read_attachment_bytes("photo.webp", image_bytes("WEBP"))
    assert Image.open(io.BytesIO(webp.image or b"")).format == "PNG"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: write_encrypted_pdf(p / "locked.pdf", ["secret"]), "locked.pdf is protected by a password"),
        (
            lambda p: write_pdf(p / "scan.pdf", ["", ""]),
            "scan.pdf has no text layer (scanned pages?): there is no text in it to read; a vision model can read "
            "its pages saved as images",
        ),
        (lambda p: _write(p / "broken.pdf", b"%PDF-1.4\n1 0 obj\n<<"), "broken.pdf cannot be read as a PDF"),
        (lambda p: _write(p / "tool.bin", bytes(range(256)) * 40), "tool.bin is a binary file"),
        (lambda p: _write(p / "archive.zip", b"PK\x03\x04" + b"\0" * 60), "archive.zip is a zip archive"),
        (lambda p: write_docx_bomb(p / "bomb.docx"), "bomb.docx unpacks to 300.0 MB"),
        (lambda p: _write(p / "huge.png", png_bomb()), "huge.png is an image too large to open safely"),
        (lambda p: _write(p / "cut.png", image_bytes("PNG")[:60]), "cut.png cannot be read as an image"),
        (lambda p: p / "gone.txt", "gone.txt no longer exists"),
        (lambda p: _write(p / "empty.pdf", b""), "empty.pdf is empty (0 bytes)"),
    ],
)
def test_bad_files_are_refused_with_one_sentence(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path)
    with pytest.raises(AttachmentError) as caught:
        read_attachment(path)
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text and text.endswith(".")


def test_the_size_limit_is_a_setting(tmp_path: Path) -> None:
    path = _write(tmp_path / "big.txt", b"words " * 400_000)  # 2.3 MB
    assert DEFAULT_LIMITS.max_bytes == 50 * 1024 * 1024
    with pytest.raises(AttachmentError, match=r"big.txt is 2.3 MB; attachments can be at most 1.0 MB"):
        read_attachment(path, Limits.from_settings(Settings(attachment_max_mb=1)))
    assert read_attachment(path).size == 2_400_000


def test_an_api_file_name_cannot_name_a_path() -> None:
    doc = read_attachment_bytes("../../etc/notes.txt", base64.b64decode(base64.b64encode(b"hi")))
    assert doc.name == "notes.txt"


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_pipe_in_a_file_s_place_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    pipe = tmp_path / "notes.txt"
    os.mkfifo(pipe)  # (a plain open of it waits until something opens it to write)
    outcome: list[BaseException | bytes] = []
    finished = threading.Event()

    def read() -> None:
        try:
            outcome.append(read_file_bytes(pipe))
        except AttachmentError as exc:
            outcome.append(exc)
        finished.set()

    reader = threading.Thread(target=read)
    reader.start()
    waited = finished.wait(10.0)
    if not waited:  # (it blocked: a writer lets it go, so the thread can be joined)
        with open(pipe, "wb"):
            pass
    reader.join()
    assert waited, "reading a pipe waited for a writer"
    [error] = outcome
    assert isinstance(error, AttachmentError) and "notes.txt is not a plain file" in str(error)


def test_a_folder_is_refused_with_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    with pytest.raises(AttachmentError, match=r"^docs is a folder; attach the files in it instead\.$"):
        read_file_bytes(tmp_path / "docs")
