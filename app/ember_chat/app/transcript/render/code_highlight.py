"""Syntax highlighting of code blocks with Pygments, written straight into a QTextCursor as character
formats (no HTML round trip). One Pygments style per theme; every token colour is nudged to reach WCAG
AA contrast on the code background."""

from __future__ import annotations

from functools import cache

from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.token import _TokenType
from pygments.util import ClassNotFound
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor

from ember_chat.app.style.theme import Colors, with_contrast

STYLE_FOR_THEME = {"light": "default", "dark": "github-dark"}


@cache
def lexer_for(language: str) -> Lexer:
    try:
        if language.strip():
            return get_lexer_by_name(language.strip().lower(), ensurenl=False, stripnl=False)
    except ClassNotFound:
        pass
    return TextLexer(ensurenl=False, stripnl=False)


def language_label(language: str) -> str:
    """What the code card's header says: the language as the lexer names it, or the fence's own word."""
    lexer = lexer_for(language)
    if isinstance(lexer, TextLexer):
        return language.strip() or "text"
    return lexer.name


class CodeFormats:
    """Character formats for each Pygments token type, for one theme."""

    def __init__(self, colors: Colors) -> None:
        self.colors = colors
        self.style = get_style_by_name(STYLE_FOR_THEME[colors.name])
        self.base = QTextCharFormat()
        self.base.setFontFixedPitch(True)
        self.base.setFontFamilies(["monospace"])
        self.base.setForeground(QColor(colors.text))
        self._formats: dict[_TokenType, QTextCharFormat] = {}

    def colour_of(self, token: _TokenType) -> str:
        spec = self.style.style_for_token(token)
        colour = f"#{spec['color']}" if spec["color"] else self.colors.text
        return with_contrast(colour, self.colors.code_bg)

    def format_for(self, token: _TokenType) -> QTextCharFormat:
        fmt = self._formats.get(token)
        if fmt is None:
            spec = self.style.style_for_token(token)
            fmt = QTextCharFormat(self.base)
            fmt.setForeground(QColor(self.colour_of(token)))
            if spec["bold"]:
                fmt.setFontWeight(QFont.Weight.Bold)
            if spec["italic"]:
                fmt.setFontItalic(True)
            self._formats[token] = fmt
        return fmt


def insert_highlighted(cursor: QTextCursor, code: str, language: str, formats: CodeFormats) -> None:
    """Insert `code` at the cursor, one format run per token (newlines become line breaks in the block,
    so the whole code block stays one paragraph)."""
    for token, text in lexer_for(language).get_tokens(code.rstrip("\n")):
        cursor.insertText(text.replace("\n", "\u2028"), formats.format_for(token))
