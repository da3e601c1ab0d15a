"""The readers of each kind of file. Imported only when a file is read (pypdf, python-docx, Pillow and
charset-normalizer load here, never at start-up)."""

from __future__ import annotations

import io
import re
import warnings
import zipfile
from html.parser import HTMLParser

from ember_chat.engine.attachments.kinds import Limits, Progress, human_size
from ember_chat.engine.errors import AttachmentError

_COMMON_ENCODINGS = ("utf_8", "cp1252", "latin_1", "iso8859_15", "utf_16", "shift_jis", "gb18030", "cp1251")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


# The reasons below are read for a chat's attachments and for a project's knowledge alike (one reader):
# they say what is wrong and what to do without naming the action ("attach"; a project's files are added).


def _binary(name: str) -> AttachmentError:
    return AttachmentError(
        f"{name} is a binary file; Ember reads text, source code, CSV, JSON, HTML, PDF and DOCX files, "
        "and images for a vision model."
    )


def decode_text(name: str, data: bytes) -> str:
    """A text file's text, whatever its encoding (UTF-8 first, else detected); binary data is refused."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = _detected(name, data)
    sample = text[:65536]
    if sample and len(_CONTROL.findall(sample)) > max(2, len(sample) // 100):
        raise _binary(name)
    return text.replace("\r\n", "\n")


def _detected(name: str, data: bytes) -> str:
    has_bom = data.startswith((b"\xff\xfe", b"\xfe\xff"))
    if b"\x00" in data[:65536] and not has_bom:
        raise _binary(name)
    from charset_normalizer import from_bytes

    results = from_bytes(data)
    best = results.best()
    if best is None:
        raise _binary(name)
    # equally good readings (cp1250 and cp1252 often tie on Western text): the most common encoding wins
    tied = {m.encoding: m for m in results if (m.chaos, m.coherence) == (best.chaos, best.coherence)}
    for common in _COMMON_ENCODINGS:
        if common in tied:
            return str(tied[common])
    return str(best)


class _HtmlText(HTMLParser):
    """The readable text of an HTML page: scripts and styles left out, block elements on new lines."""

    SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    BLOCK_WORDS = (
        "p div br li ul ol tr table h1 h2 h3 h4 h5 h6 section article header footer blockquote pre hr dt dd title"
    )
    BLOCK = frozenset(BLOCK_WORDS.split())

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self._skipping += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        """`<![…]>` sections Python's parser does not know (`<![x>`, `<![ >`) raise AssertionError
        there; a browser skips them, so does this."""
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:
            end = self.rawdata.find(">", i + 3)
            return -1 if end < 0 else end + 1


def html_text(html: str, name: str = "The page") -> str:
    parser = _HtmlText()
    try:
        parser.feed(html)
        parser.close()
    except (AssertionError, ValueError) as exc:  # (what else Python's parser may assert about a page)
        raise AttachmentError(f"{name} cannot be read as HTML ({exc}).") from None
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def pdf_text(name: str, data: bytes, progress: Progress | None) -> tuple[str, tuple[int, ...]]:
    """A PDF's text page by page, with the char offset where each page starts."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pypdf warns about small defects it reads through
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):
                raise AttachmentError(
                    f"{name} is protected by a password; save a copy without the password and use that instead."
                )
            texts: list[str] = []
            pages: list[int] = []
            count = len(reader.pages)
            offset = 0
            for i, page in enumerate(reader.pages):
                page_text = (page.extract_text() or "").strip()
                pages.append(offset)
                texts.append(page_text)
                offset += len(page_text) + 2
                if progress is not None and count:
                    progress((i + 1) / count)
    except AttachmentError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError) as exc:
        raise AttachmentError(f"{name} cannot be read as a PDF (it is damaged or not a PDF: {exc}).") from None
    if not any(texts):
        raise AttachmentError(
            f"{name} has no text layer (scanned pages?): there is no text in it to read; a vision model can "
            "read its pages saved as images."
        )
    return "\n\n".join(texts), tuple(pages)


def docx_text(name: str, data: bytes, limits: Limits) -> str:
    """A Word document's paragraphs and tables in order; what the zip unpacks to is checked first."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            unpacked = sum(info.file_size for info in infos)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise AttachmentError(f"{name} cannot be read as a Word document (it is damaged: {exc}).") from None
    if unpacked > limits.max_unpacked_bytes or len(infos) > 10_000:
        raise AttachmentError(
            f"{name} unpacks to {human_size(unpacked)} in {len(infos):,} parts, which looks like a zip bomb; "
            "Ember did not open it."
        )
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        lines: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                for row in block.rows:
                    lines.append(" | ".join(cell.text.strip() for cell in row.cells))
            else:
                lines.append(block.text)
    except MemoryError:
        raise  # (the memory limit: isolated.py says so)
    except Exception as exc:  # python-docx raises many kinds (KeyError, ValueError, lxml errors) on bad files
        raise AttachmentError(f"{name} cannot be read as a Word document ({exc}).") from None
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if not text:
        raise AttachmentError(f"{name} has no text.")
    return text


def image_bytes(name: str, data: bytes, limits: Limits) -> tuple[bytes, str]:
    """An image checked and decoded once (decompression bombs refused before decoding), as bytes
    llama.cpp reads: PNG and JPEG as they are, a GIF's first frame and a WebP as PNG; and its mime type."""
    from PIL import Image, UnidentifiedImageError

    bomb = AttachmentError(
        f"{name} is an image too large to open safely (a decompression bomb?); Ember did not open it."
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as probe:
                width, height = probe.size
                if width * height > limits.max_image_pixels:
                    raise bomb
                probe.verify()
            with Image.open(io.BytesIO(data)) as image:
                fmt = image.format or ""
                if fmt not in ("PNG", "JPEG", "GIF", "WEBP"):
                    raise AttachmentError(f"{name} is a {fmt} image; Ember can attach PNG, JPEG, WebP and GIF.")
                image.seek(0)
                image.load()
                if fmt in ("PNG", "JPEG"):
                    return data, f"image/{fmt.lower()}"
                out = io.BytesIO()
                image.convert("RGBA").save(out, "PNG")
                return out.getvalue(), f"image/{fmt.lower()}"
    except AttachmentError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise bomb from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
        raise AttachmentError(f"{name} cannot be read as an image (it is damaged: {exc}).") from None
