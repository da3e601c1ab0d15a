"""Links in the transcript: every link its messages hold, in document (and Tab) order, and what
activating one (a click, or Enter on the focused one) does. A web link goes to the view's `open_link`;
an `ember:` link becomes the view's `action` (verb, message id, argument) only when Ember signed it
(render/message.py): one in a model's answer is shown, never run. The view hands `activate_link`
those two signals' emits and its tool cards' fold.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QTextBrowser, QToolTip

from ember_chat.app.transcript.render.message import is_signed
from ember_chat.app.transcript.tool_cards import FOLD


def document_links(document: QTextDocument) -> list[tuple[str, str]]:
    """Every link in the document, in document (and Tab) order: (href, tooltip)."""
    out = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor() and fmt.anchorHref():
                out.append((fmt.anchorHref(), fmt.toolTip()))
            it += 1
        block = block.next()
    return out


def restyle_icon_link(document: QTextDocument, href: str, image: str, tooltip: str) -> None:
    """Give every icon link to `href` another icon (an image resource's name) and tooltip, in place:
    an action that changes what it does (an answer's speaker becomes its Stop while it is read)."""
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.isImageFormat() and fmt.anchorHref() == href:
                look = fmt.toImageFormat()  # (a copy: Ember's signature stays on it)
                look.setName(image)
                look.setToolTip(tooltip)
                c = QTextCursor(document)
                c.setPosition(fragment.position())
                c.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
                c.setCharFormat(look)
            it += 1
        block = block.next()


def activated_link_format(view: QTextBrowser, url: QUrl) -> QTextCharFormat:
    """The format of the link `url` being activated (an empty format when none is found). Qt selects that
    link before it reports it: the one under the mouse for a click, the focused one for Enter; but a view
    without focus (a click on a window not yet active) has that selection cleared, its cursor left at one
    end of the link: the characters after and before the cursor are tried, each only if it is `url`'s."""
    cursor = view.textCursor()
    last = view.document().characterCount() - 1
    at = cursor.position()
    positions = [cursor.selectionStart() + 1] if cursor.hasSelection() else [at + 1, at]
    for position in positions:
        c = QTextCursor(view.document())
        c.setPosition(max(0, min(position, last)))
        fmt = c.charFormat()  # (the format of the character before the cursor)
        if fmt.isAnchor() and QUrl(fmt.anchorHref()) == url:
            return fmt
    return QTextCharFormat()


def activate_link(
    view: QTextBrowser,
    url: QUrl,
    open_link: Callable[[QUrl], None],
    action: Callable[[str, int, int], None],
    toggle_fold: Callable[[int, int], None],
) -> None:
    """The view's anchorClicked: a web link to open (`open_link`), or a signed action to run (`action`:
    verb, message id, argument; a tool result's fold is toggled first with `toggle_fold`)."""
    if url.scheme() in ("http", "https", "mailto"):
        open_link(url)
        return
    if url.scheme() != "ember" or not is_signed(activated_link_format(view, url)):
        return  # (an ember: link Ember did not write, e.g. in a model's answer: shown, never run)
    parts = url.path().split("/")
    verb = url.host() or parts.pop(0)
    parts = [p for p in parts if p]
    try:
        mid = int(parts[0])
        arg = int(parts[1]) if len(parts) > 1 else 0
    except (IndexError, ValueError):
        return
    if verb == FOLD:
        toggle_fold(mid, arg)  # (the controller shows the thread again)
    if verb in ("copy", "copycode"):
        QToolTip.showText(view.mapToGlobal(view.cursorRect().center()), view.tr("Copied"), view, msecShowTime=1200)
    action(verb, mid, arg)
