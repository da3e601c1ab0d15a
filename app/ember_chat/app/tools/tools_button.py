"""The Tools button by the message box: how many tools this chat offers the model and about how many
tokens their definitions take from the context, and a popup with a checkbox per tool, grouped by where
it comes from (Built-in, each MCP server), to turn them on or off for this chat, and the tools the chat
runs without asking ("Always allow" on a consent card), each with a Revoke button.

The button only shows what its host (WindowTools) gives it: the popup's content is asked for each time
it opens (`content`), and a box ticked is handed back (`tool_toggled`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QPoint, QRect, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.style.theme import active_colors


@dataclass(frozen=True)
class ToolChoice:
    key: str  # registry key, "source/name"
    name: str
    description: str = ""
    read_only: bool = False
    on: bool = False


@dataclass(frozen=True)
class ToolGroup:
    source: str
    status: str = ""  # "" when listed; else why its tools are missing (starting, failed: a sentence)
    failed: bool = False
    tools: tuple[ToolChoice, ...] = ()
    all_on: bool = False  # every tool of this source is on in the chat (those it lists later too)


@dataclass(frozen=True)
class PopupContent:
    title: str
    groups: tuple[ToolGroup, ...] = ()
    tokens: int = 0
    notes: tuple[str, ...] = field(default=())
    require_call: bool = False  # the model must call a tool first in each answer
    allowed: tuple[ToolChoice, ...] = ()  # the chat's "always allow" grants (`name` says the tool and its source)


MIN_LIST = 120  # the least height of the popup's list of tools when it scrolls (a few tools in view)
POPUP_WIDTH = (300, 440)  # the popup's least and greatest width (its sentences wrap in between)
GAP = 2  # between the popup and its button


def tokens_text(tokens: int) -> str:
    return f"~{tokens / 1000:.1f}k" if tokens >= 1000 else f"~{tokens}"


class ToolsPopup(QWidget):
    """The popup's body: a box per tool under its source's heading, the token estimate, Settings."""

    def __init__(
        self,
        content: PopupContent,
        on_toggle: Callable[[str, bool], None],
        on_require: Callable[[bool], None] | None = None,
        parent: QWidget | None = None,
        on_revoke: Callable[[str], None] | None = None,
        on_all: Callable[[str, bool], None] | None = None,
    ):
        super().__init__(parent)
        c = active_colors()
        # the window's palette, not the menu's: a menu's own (platform) palette drew the dark theme's
        # unticked boxes dark on dark
        self.setPalette(QApplication.palette())
        self.setAutoFillBackground(True)
        self.boxes: dict[str, QCheckBox] = {}
        self.revoke_buttons: dict[str, QPushButton] = {}  # registry key -> its grant's Revoke
        self.all_boxes: dict[str, QCheckBox] = {}  # source -> its "All" switch
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 10, 12, 10)
        title = QLabel(content.title)
        title.setStyleSheet("font-weight:600")
        outer.addWidget(title)
        body = QWidget()
        rows = QVBoxLayout(body)
        rows.setContentsMargins(0, 0, 0, 0)
        rows.setSpacing(2)
        if not content.groups:
            empty = QLabel(
                self.tr("No tools are set up yet: turn on built-in tools or add MCP servers in Settings ▸ Tools.")
            )
            empty.setWordWrap(True)
            rows.addWidget(empty)
        for group in content.groups:
            heading = QLabel(group.source)
            heading.setStyleSheet(f"font-weight:600; color:{c.secondary}; margin-top:6px")
            line = QHBoxLayout()
            line.setContentsMargins(0, 0, 0, 0)
            line.addWidget(heading)
            line.addStretch(1)
            if group.tools or group.all_on:
                line.addWidget(self._all_box(group, on_all), 0, Qt.AlignmentFlag.AlignBottom)
            rows.addLayout(line)
            if group.status:
                status = QLabel(group.status)
                status.setWordWrap(True)
                status.setStyleSheet(f"color:{c.error if group.failed else c.secondary}")
                rows.addWidget(status)
            for tool in group.tools:
                box = QCheckBox(tool.name + (self.tr("  (read-only)") if tool.read_only else ""))
                box.setChecked(tool.on)
                box.setToolTip(tool.description)
                box.setAccessibleName(self.tr("{tool} from {source}").format(tool=tool.name, source=group.source))
                box.setAccessibleDescription(tool.description)
                box.toggled.connect(lambda on, key=tool.key: on_toggle(key, on))
                self.boxes[tool.key] = box
                rows.addWidget(box, 0, Qt.AlignmentFlag.AlignLeft)  # (its width: a click beside it is not on it)
        rows.addStretch(1)
        # the list scrolls when the popup has less room than it needs (see fit): the box, the grants and
        # Settings below it stay in view
        self.body = body
        self.scroll = QScrollArea()
        self.scroll.setWidget(body)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        outer.addWidget(self.scroll)
        # for models that never call a tool by themselves (base models): the answer's first turn is a call
        self.require_box = QCheckBox(self.tr("Make the model call a tool first"))
        self.require_box.setChecked(content.require_call)
        hint = self.tr(
            "For models that do not call tools by themselves: each answer starts with a call to one of the "
            "tools on, then the model answers with its result."
        )
        self.require_box.setToolTip(hint)
        self.require_box.setAccessibleName(self.tr("Make the model call a tool first"))
        self.require_box.setAccessibleDescription(hint)
        if on_require is not None:
            self.require_box.toggled.connect(on_require)
        outer.addWidget(self.require_box, 0, Qt.AlignmentFlag.AlignLeft)
        self.require_hint = QLabel(self.tr("(for models that do not call tools by themselves)"))
        self.require_hint.setStyleSheet(f"color:{c.secondary}; margin-left:22px")
        outer.addWidget(self.require_hint)
        if content.allowed:
            self._grants(outer, content.allowed, on_revoke)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setStyleSheet(f"color:{c.secondary}")
        outer.addWidget(self.summary)
        for note in content.notes:
            label = QLabel(note)
            label.setWordWrap(True)
            label.setStyleSheet(f"color:{c.warning}")
            outer.addWidget(label)
        self.settings_button = QPushButton(self.tr("Settings ▸ Tools…"))
        self.settings_button.setAccessibleName(self.tr("Open the tools settings"))
        outer.addWidget(self.settings_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.show_tokens(sum(1 for b in self.boxes.values() if b.isChecked()), content.tokens)

    def _all_box(self, group: ToolGroup, on_all: Callable[[str, bool], None] | None) -> QCheckBox:
        """The source's "All" switch: every tool it offers on in this chat, those it adds later too."""
        box = QCheckBox(self.tr("All"))
        box.setChecked(group.all_on)
        box.setAccessibleName(self.tr("All tools from {source}").format(source=group.source))
        hint = self.tr(
            "Every tool of {source} on in this chat, those it adds later too. Each call still asks before it "
            "runs, unless you allowed the tool."
        ).format(source=group.source)
        box.setToolTip(hint)
        box.setAccessibleDescription(hint)
        if on_all is not None:
            box.toggled.connect(lambda on, source=group.source: on_all(source, on))
        self.all_boxes[group.source] = box
        return box

    def sync(self, content: PopupContent) -> None:
        """Tick the boxes as `content` says, in place (a source's "All" switch turned its tools on or off,
        a tool turned off turned its source's "All" off), without a signal of their own."""
        ticked = {t.key: t.on for g in content.groups for t in g.tools}
        all_on = {g.source: g.all_on for g in content.groups}
        for boxes, states in ((self.boxes, ticked), (self.all_boxes, all_on)):
            for key, box in boxes.items():
                if key in states and box.isChecked() != states[key]:
                    box.blockSignals(True)
                    box.setChecked(states[key])
                    box.blockSignals(False)

    def fit(self, width: int, max_height: int) -> int:
        """Lay the popup out `width` wide and at most `max_height` tall if it can be (its list of tools
        scrolls, never below MIN_LIST); returns its height. Each wrapped sentence (a failing server's
        error) gets the height its text needs at that width: sized from sizeHint alone, the error was
        drawn under the box below it."""
        margins = self.layout().contentsMargins()
        inner = max(1, width - margins.left() - margins.right())
        body = self.body
        natural = body.heightForWidth(inner) if body.hasHeightForWidth() else body.sizeHint().height()
        self.scroll.setFixedHeight(natural)
        total = self._height_for(width)
        if total > max_height:
            self.scroll.setFixedHeight(max(min(natural, MIN_LIST), natural - (total - max_height)))
            total = self._height_for(width)
        return total

    def _height_for(self, width: int) -> int:
        self.layout().invalidate()
        return self.heightForWidth(width) if self.hasHeightForWidth() else self.sizeHint().height()

    def _grants(
        self, outer: QVBoxLayout, allowed: tuple[ToolChoice, ...], on_revoke: Callable[[str], None] | None
    ) -> None:
        """The tools this chat runs without asking, each with Revoke (its calls ask again)."""
        c = active_colors()
        heading = QLabel(self.tr("Always allowed in this chat (they run without asking):"))
        heading.setWordWrap(True)
        heading.setStyleSheet(f"color:{c.secondary}; margin-top:6px")
        outer.addWidget(heading)
        for tool in allowed:
            row = QHBoxLayout()
            row.setContentsMargins(0, 0, 0, 0)
            label = QLabel(tool.name)
            label.setToolTip(tool.description)
            row.addWidget(label)
            row.addStretch(1)
            button = QPushButton(self.tr("Revoke"))
            button.setAccessibleName(self.tr("Revoke always allowing {tool}").format(tool=tool.name))
            button.setAccessibleDescription(self.tr("Its calls in this chat ask again before they run."))
            label.setBuddy(button)
            if on_revoke is not None:
                button.clicked.connect(lambda _checked=False, key=tool.key: on_revoke(key))
            self.revoke_buttons[tool.key] = button
            row.addWidget(button)
            outer.addLayout(row)

    def show_tokens(self, count: int, tokens: int) -> None:
        self.require_box.setEnabled(count > 0)  # (a call can only be required of a chat with tools on)
        self.require_hint.setEnabled(count > 0)
        if count == 1:  # (one is singular: "1 tool(s) on" read as a form, not a sentence)
            self.summary.setText(
                self.tr("1 tool on: its definition takes {tokens} tokens of each prompt.").format(
                    tokens=tokens_text(tokens)
                )
            )
        elif count:
            self.summary.setText(
                self.tr("{count} tools on: their definitions take {tokens} tokens of each prompt.").format(
                    count=count, tokens=tokens_text(tokens)
                )
            )
        else:
            self.summary.setText(self.tr("No tools are on in this chat: the model cannot call any."))


class ToolsButton(QToolButton):
    """ "Tools (N) · ~T tokens"; a click opens the popup (`content()` asked for what it shows)."""

    tool_toggled = Signal(str, bool)  # registry key, on
    require_toggled = Signal(bool)  # "Make the model call a tool first"
    grant_revoked = Signal(str)  # registry key: its "always allow" in this chat taken back
    server_toggled = Signal(str, bool)  # source, every tool of it on (or all off): its "All" switch
    settings_requested = Signal()
    popup_shown = Signal()  # (tests)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.content: Callable[[], PopupContent] = lambda: PopupContent(self.tr("Tools"))
        self.setAccessibleName(self.tr("Tools for this chat"))
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.frame = PopupFrame(self)
        self.popup: ToolsPopup | None = None
        self.clicked.connect(self.open_popup)
        self._texts = ("", "")  # the whole text, the compact one (the count alone)
        self._compact = False
        self.set_summary(0, 0)

    def set_summary(self, count: int, tokens: int, require_call: bool = False) -> None:
        if count:
            text = self.tr("Tools ({count}) · {tokens} tokens").format(count=count, tokens=tokens_text(tokens))
            tip = (
                self.tr("1 tool on in this chat; its definition takes about {tokens} tokens of each prompt.")
                if count == 1
                else self.tr(
                    "{count} tools on in this chat; their definitions take about {tokens} tokens of each prompt."
                )
            ).format(count=count, tokens=tokens)
            tip += " " + self.tr("Click to choose.")
            if require_call:
                text += self.tr(" · must call")
                tip += " " + (
                    self.tr("The model must call it first in each answer.")
                    if count == 1
                    else self.tr("The model must call one of them first in each answer.")
                )
            self._texts = (text, self.tr("Tools ({count})").format(count=count))
        else:
            self._texts = (self.tr("Tools"), self.tr("Tools"))
            tip = self.tr("Choose the tools the model may call in this chat (none now)")
        self.setToolTip(tip)  # (the whole sentence, where the button shows the count alone too)
        self.setAccessibleDescription(tip)
        self._show_text()
        if self.popup is not None:
            self.popup.show_tokens(count, tokens)

    def set_compact(self, on: bool) -> None:
        """The count alone ("Tools (3)"), for a narrow window: the message box keeps its room."""
        if on != self._compact:
            self._compact = on
            self._show_text()

    def whole_text(self) -> str:
        """What the button says in a window wide enough ("Tools (3) · ~1.2k tokens · must call")."""
        return self._texts[0]

    def _show_text(self) -> None:
        self.setText(self._texts[1] if self._compact else self._texts[0])

    def full_width(self) -> int:
        """The button's width with its whole text (the tokens and "must call" too)."""
        metrics = self.fontMetrics()
        return (
            self.sizeHint().width() - metrics.horizontalAdvance(self.text()) + metrics.horizontalAdvance(self._texts[0])
        )

    def open_popup(self) -> ToolsPopup:
        """The popup, filled now, above the button (the message box is at the window's bottom); it does not
        block the event loop. Esc or a click elsewhere closes it."""
        self.popup = ToolsPopup(
            self.content(),
            self.tool_toggled.emit,
            self.require_toggled.emit,
            on_revoke=self.grant_revoked.emit,
            on_all=self.server_toggled.emit,
        )
        self.popup.settings_button.clicked.connect(self._open_settings)
        self.frame.hold(self.popup)
        rect = self._popup_geometry(self.popup)
        # the frame's least size was the old popup's until its layout ran again: a shorter popup (a
        # Revoke took the grants' rows away) was held that tall and grew down over its button
        self.frame.layout().activate()
        self.frame.setGeometry(rect)
        self.frame.show()
        self._keep_on_screen()
        first = next(iter(self.popup.boxes.values()), None)
        (first or self.popup.settings_button).setFocus()
        self.popup_shown.emit()
        return self.popup

    def _popup_geometry(self, popup: ToolsPopup) -> QRect:
        """Where the popup goes, on the screen: above the button (the message box is at the window's
        bottom), else below it, inside the window below its title bar when there is room (a tall popup
        covered it), else in the screen's available area; what it lacks in height its list scrolls.
        The height is laid out at the popup's width each time it is filled (the frame's size hint,
        taken while a popup filled again replaced the old one, was the old one's: it ran off the screen)."""
        screen = (self.screen() or QApplication.primaryScreen()).availableGeometry()
        anchor = QRect(self.mapToGlobal(QPoint(0, 0)), self.size())
        # the frame's layout margins and its drawn edge (left out, the frame's layout widened it by 2 px
        # once the popup showed: past the screen's edge)
        edge = self.frame.layout().contentsMargins()
        line = 2 * self.frame.frameWidth()
        extra_w, extra_h = edge.left() + edge.right() + line, edge.top() + edge.bottom() + line
        low, high = POPUP_WIDTH
        width = min(max(popup.sizeHint().width(), low), high, screen.width() - extra_w)
        top = max(screen.top(), self.window().geometry().top())  # (geometry: the title bar is above it)
        above = anchor.top() - GAP - top
        below = screen.bottom() - anchor.bottom() - GAP
        height = popup.fit(width, 1 << 20) + extra_h
        if height > above and height > below:  # too tall: its list scrolls
            least = popup.fit(width, 0) + extra_h
            if max(above, below) < least:  # (a window too low on the screen: above it, then)
                above = anchor.top() - GAP - screen.top()
            height = popup.fit(width, max(above, below) - extra_h) + extra_h
        fits_above = height <= above or above >= below
        y = anchor.top() - GAP - height if fits_above else anchor.bottom() + 1 + GAP
        rect = QRect(anchor.left(), y, width + extra_w, height)
        # on the screen whatever happens (a window partly off it)
        rect.moveLeft(max(screen.left(), min(rect.left(), screen.right() + 1 - rect.width())))
        rect.moveTop(max(screen.top(), min(rect.top(), screen.bottom() + 1 - rect.height())))
        return rect

    def _keep_on_screen(self) -> None:
        """A window system that frames even popups (the offscreen platform does) puts the frame where
        the popup was asked to be: moved back by what sticks out."""
        screen = (self.screen() or QApplication.primaryScreen()).availableGeometry()
        outer = self.frame.frameGeometry()
        dx = max(screen.left() - outer.left(), min(0, screen.right() - outer.right()))
        dy = max(screen.top() - outer.top(), min(0, screen.bottom() - outer.bottom()))
        if dx or dy:
            self.frame.move(self.frame.pos() + QPoint(dx, dy))

    def sync_popup(self, content: PopupContent) -> None:
        """The open popup's boxes ticked as `content` says (the tools listed are the same)."""
        if self.frame.isVisible() and self.popup is not None:
            self.popup.sync(content)

    def refresh_popup(self) -> None:
        """Fill the open popup again (the tools listed changed: a server started, one failed), keeping the
        keyboard on the same tool."""
        if not self.frame.isVisible() or self.popup is None:
            return
        focused = next((k for k, box in self.popup.boxes.items() if box.hasFocus()), None)
        focused_all = next((s for s, box in self.popup.all_boxes.items() if box.hasFocus()), None)
        on_revoke = any(button.hasFocus() for button in self.popup.revoke_buttons.values())
        popup = self.open_popup()
        if focused in popup.boxes:
            popup.boxes[focused].setFocus()
        elif focused_all in popup.all_boxes:
            popup.all_boxes[focused_all].setFocus()
        elif on_revoke and popup.revoke_buttons:  # one revoked: the keyboard stays among the grants
            next(iter(popup.revoke_buttons.values())).setFocus()

    def _open_settings(self) -> None:
        self.frame.close()
        self.settings_requested.emit()


class PopupFrame(QFrame):
    """The popup's window: closes on Esc or on a click outside it (Qt's popup behaviour). A menu would
    also do, but a menu takes a click on a box inside it as its own and may close."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName(self.tr("Tools for this chat"))
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(1, 1, 1, 1)

    def hold(self, widget: QWidget) -> None:
        """Show `widget` instead of what it held (the old one leaves the layout now, not when it is
        deleted: the frame's size would count both)."""
        while (item := self._layout.takeAt(0)) is not None:
            if (old := item.widget()) is not None:
                old.hide()
                old.setParent(None)
                old.deleteLater()
        self._layout.addWidget(widget)  # (its size: ToolsButton._popup_geometry)
        # shown now: a widget added to a window already shown waits for Qt's queued show, and a popup
        # filled again every few tens of ms while a server starts left the frame an empty box for seconds
        widget.setVisible(True)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Qt override
        if event.key() == Qt.Key.Key_Escape:
            self.close()
            return
        super().keyPressEvent(event)
