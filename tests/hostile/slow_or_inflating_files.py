"""Files built to be slow to read or to inflate while read, for the attachment readers (window, CLI and
API alike). Each is small on disk:

- `quadratic_html`: `a </x ` repeated; Python's HTML parser looks for the `>` of each `</x` to the end
  of the page, so the time grows with the square of the size (1.3 s at 240 KB, minutes at a few MB).
- `unknown_section_html`: `<![x>`, a marked section Python's parser stops on with an AssertionError.
- `pdf_flate_bomb`: a PDF whose one page's content stream is FlateDecode-compressed text-drawing
  operators, `inflated` bytes of them once decompressed (kilobytes on disk). Under pypdf's output cap
  it is parsed into millions of Python objects: memory and time without bound.
- `docx_zip_bomb`: a DOCX whose word/document.xml inflates to `inflated` bytes of paragraphs, under
  the unpacked-size check: python-docx and lxml build a tree of millions of elements.
- `pdf_that_warns_on_every_page`: not slow, only noisy: pypdf logs a warning per page.

Expected of each: the reader stops with one sentence (too slow, too much memory, cannot be read), in
a child process that is gone afterwards; nothing else waits for it. Of the noisy PDF: its text, and
each distinct warning in Ember's log once, with its count, none on the terminal."""

from __future__ import annotations

import io
import zipfile
import zlib

from tests.helpers.attachment_files import pdf_bytes, pdf_from_objects


def quadratic_html(repeats: int) -> bytes:
    return b"a </x " * repeats


def unknown_section_html() -> bytes:
    return b"<html><body><p>Before the section.</p><![x><p>After the section.</p></body></html>"


def _repeated(unit: bytes, inflated: int) -> list[bytes]:
    """`unit` repeated to about `inflated` bytes, in blocks of about 1 MB (never all in memory)."""
    block = unit * max(1, (1 << 20) // len(unit))
    blocks = [block] * (inflated // len(block))
    return [*blocks, unit * ((inflated % len(block)) // len(unit))]


def pdf_flate_bomb(inflated: int) -> bytes:
    packer = zlib.compressobj(9)
    parts = [packer.compress(b"BT /F1 11 Tf 50 780 Td ")]
    parts += [packer.compress(block) for block in _repeated(b"(a) Tj ", inflated)]
    stream = b"".join([*parts, packer.compress(b" ET"), packer.flush()])
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    return pdf_from_objects(objects)


_DOCX_TYPES = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    b'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    b'<Default Extension="xml" ContentType="application/xml"/>'
    b'<Override PartName="/word/document.xml" '
    b'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_DOCX_RELS = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    b'<Relationship Id="rId1" '
    b'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    b'Target="word/document.xml"/></Relationships>'
)


def docx_zip_bomb(inflated: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", _DOCX_TYPES)
        archive.writestr("_rels/.rels", _DOCX_RELS)
        with archive.open("word/document.xml", "w", force_zip64=True) as document:
            document.write(
                b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
            )
            for block in _repeated(b"<w:p><w:r><w:t>a</w:t></w:r></w:p>", inflated):
                document.write(block)
            document.write(b"</w:body></w:document>")
    return out.getvalue()


def pdf_that_warns_on_every_page(pages: int) -> bytes:
    """A PDF whose font's /Encoding /Differences is not an array: pypdf reads through it and logs a
    warning for every page it extracts (as "fontTools is required…" does for real PDFs' CFF fonts),
    which went to the terminal once per page."""
    old = b"/BaseFont /Helvetica /Encoding /WinAnsiEncoding"
    new = b"/BaseFont/Helvetica/Encoding<</Differences 5>>".ljust(len(old))  # (same length: offsets hold)
    return pdf_bytes([f"Page {n} of the noisy report." for n in range(1, pages + 1)]).replace(old, new)
