"""Real documents made at test time: a PDF written object by object (Helvetica, one Tj line per text
line; no extra dependency), DOCX through python-docx's own writer, images through Pillow, and a PNG
whose header claims a huge size (a decompression bomb) written chunk by chunk; and the processes that
read attachments, to check that none is left."""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from pathlib import Path

import psutil


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: list[str]) -> bytes:
    """A valid PDF with one page per string (lines of each string drawn top to bottom); an empty
    string is a page with no text (as a scan is)."""
    n = len(pages)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        ("<< /Type /Pages /Kids [" + " ".join(f"{4 + 2 * i} 0 R" for i in range(n)) + f"] /Count {n} >>").encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for i, text in enumerate(pages):
        lines = ["BT", "/F1 11 Tf", "14 TL", "50 780 Td"]
        for line in text.splitlines():
            lines.append(f"({_pdf_escape(line)}) Tj T*")
        lines.append("ET")
        stream = "\n".join(lines).encode("latin-1") if text else b""
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return pdf_from_objects(objects)


def pdf_from_objects(objects: list[bytes]) -> bytes:
    """A PDF of these objects (numbered from 1, the first the catalog), with its cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def write_pdf(path: Path, pages: list[str]) -> Path:
    path.write_bytes(pdf_bytes(pages))
    return path


def write_encrypted_pdf(path: Path, pages: list[str], password: str = "secret") -> Path:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(pages))))
    writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    with path.open("wb") as f:
        writer.write(f)
    return path


def write_docx(path: Path, paragraphs: list[str], table: list[list[str]] | None = None) -> Path:
    import docx

    document = docx.Document()
    document.add_heading(paragraphs[0], level=1)
    for text in paragraphs[1:]:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    document.save(str(path))
    return path


def write_docx_bomb(path: Path, unpacked_mb: int = 300) -> Path:
    """A .docx zip whose one part unpacks to `unpacked_mb` MB of zeros (a few hundred KB packed)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            block = b"\0" * (1024 * 1024)
            for _ in range(unpacked_mb):
                part.write(block)
    return path


def image_bytes(fmt: str, size: tuple[int, int] = (32, 24), frames: int = 1) -> bytes:
    from PIL import Image

    images = [Image.new("RGB", size, (40 * i % 256, 120, 200)) for i in range(frames)]
    out = io.BytesIO()
    if frames > 1:
        images[0].save(out, fmt, save_all=True, append_images=images[1:], duration=50)
    else:
        images[0].save(out, fmt)
    return out.getvalue()


def png_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A PNG whose header claims width × height pixels, with a tiny (unfinished) image stream."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


def reading_processes() -> list[psutil.Process]:
    """The attachment readers this test process has running now (engine/attachments/isolated.py):
    children of multiprocessing's fork server (Linux, macOS), or spawned children (Windows)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            line = " ".join(child.cmdline())
            parent = child.parent()
            forked = parent is not None and parent.pid != os.getpid() and "forkserver" in line
            if (forked or "spawn_main" in line) and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:
            continue
    return found
