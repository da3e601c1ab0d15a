"""A focus ring that can be seen: Fusion marks the focused control with a faint tint (its focus
rectangle is drawn at 30% opacity, a button's outline in a darkened selection blue), which nearly
vanishes in the dark theme. Ember's style is Fusion with a solid two-pixel ring in the palette's
accent colour (Ember's orange, which meets 4.5:1 on every background of both themes:
tests/app/test_look.py) around the focused button, field, list item or tab.

Rings around buttons and the focus rectangle show when the focus came from the keyboard (as Fusion
does); text fields and combo boxes show theirs whenever they have the focus (Fusion outlines them too).
A link that Tab reached in a text view (the transcript's message actions) has the same ring: Qt's own
mark there is a one-pixel dotted outline in the text colour, a faint dotted square round an icon. That
ring is a style hint, and a style hint written in Python runs for every hint any widget asks for (layouts
and scroll bars ask at each change: about 800 a streamed answer, ~10 µs each as PySide converts the
call's enums), so only the views with such links get it (`ring_keyboard_links`: LinkFocusStyle)."""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QPainter, QPalette, QPen, QTextCharFormat, QTextFormat
from PySide6.QtWidgets import (
    QApplication,
    QProxyStyle,
    QStyle,
    QStyleHintReturn,
    QStyleHintReturnVariant,
    QStyleOption,
    QTextEdit,
    QWidget,
)

RING_WIDTH = 2
_PE = QStyle.PrimitiveElement
_KEYBOARD_ONLY = {_PE.PE_PanelButtonCommand, _PE.PE_PanelButtonTool, _PE.PE_PanelButtonBevel}
_ALWAYS = {_PE.PE_FrameLineEdit, _PE.PE_Frame}  # fields; text boxes and lists (their frame)
_CHECK_BOXES = {_PE.PE_IndicatorCheckBox, _PE.PE_IndicatorItemViewItemCheck}
_RADIO = _PE.PE_IndicatorRadioButton


def draw_box_outline(painter: QPainter, rect: QRect, palette: QPalette, *, round_: bool = False) -> None:
    """A check box's (or a radio button's, `round_`) edge in the text colour at half strength: Fusion's
    own edge is the window colour darkened, which vanishes on the dark theme's fields and tables and its
    window (an unticked box, an unchosen radio button, could not be seen)."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    edge = palette.color(QPalette.ColorRole.Text)
    edge.setAlphaF(0.55)
    painter.setPen(QPen(edge, 1))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    box = QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5)
    if round_:
        painter.drawEllipse(box)
    else:
        painter.drawRoundedRect(box, 2, 2)
    painter.restore()


def draw_focus_ring(painter: QPainter, rect: QRect, palette: QPalette, radius: float = 3.0, inset: int = 0) -> None:
    """A RING_WIDTH ring in the accent colour `inset` pixels inside `rect`."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    pen = QPen(palette.color(QPalette.ColorRole.Accent), RING_WIDTH)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    painter.setPen(pen)
    painter.setBrush(Qt.BrushStyle.NoBrush)
    d = inset + RING_WIDTH / 2
    painter.drawRoundedRect(QRectF(rect).adjusted(d, d, -d, -d), radius, radius)
    painter.restore()


def link_focus_format(palette: QPalette) -> QTextCharFormat:
    """How a text view marks the link the keyboard is on: a RING_WIDTH outline in the accent colour."""
    pen = QPen(palette.color(QPalette.ColorRole.Accent), RING_WIDTH)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    fmt = QTextCharFormat()
    fmt.setProperty(QTextFormat.Property.OutlinePen, pen)
    return fmt


def _set_variant(answer: QStyleHintReturn, value: object) -> None:
    """Fill a QStyleHintReturnVariant that PySide hands over as its base class: the wrapper made for the
    call is dropped so that one of the right class can be made for the same object (Qt owns it)."""
    address = shiboken6.getCppPointer(answer)[0]
    shiboken6.invalidate(answer)
    variant = shiboken6.wrapInstance(address, QStyleHintReturnVariant)
    variant.variant = value


class FocusStyle(QProxyStyle):
    """Fusion, with a visible focus ring."""

    def __init__(self) -> None:
        super().__init__("Fusion")
        self.setObjectName("EmberFocusStyle")

    def drawPrimitive(  # Qt override
        self, element: QStyle.PrimitiveElement, option: QStyleOption, painter: QPainter, widget: QWidget | None = None
    ) -> None:
        state = option.state
        if element == _PE.PE_FrameFocusRect:  # list items, tabs, check boxes, tool buttons
            if state & QStyle.StateFlag.State_KeyboardFocusChange:
                draw_focus_ring(painter, option.rect, option.palette, 2.0)
            return
        super().drawPrimitive(element, option, painter, widget)
        if element in _CHECK_BOXES:
            draw_box_outline(painter, option.rect, option.palette)
        elif element == _RADIO:
            draw_box_outline(painter, option.rect, option.palette, round_=True)
        if not state & QStyle.StateFlag.State_HasFocus:
            return
        if element in _ALWAYS:
            draw_focus_ring(painter, option.rect, option.palette)
        elif element in _KEYBOARD_ONLY and state & QStyle.StateFlag.State_KeyboardFocusChange:
            draw_focus_ring(painter, option.rect, option.palette, inset=1)  # (inside the button's outline)

    def drawComplexControl(  # Qt override
        self,
        control: QStyle.ComplexControl,
        option: QStyleOption,
        painter: QPainter,
        widget: QWidget | None = None,
    ) -> None:
        super().drawComplexControl(control, option, painter, widget)
        if control in (QStyle.ComplexControl.CC_ComboBox, QStyle.ComplexControl.CC_SpinBox) and (
            option.state & QStyle.StateFlag.State_HasFocus
        ):
            draw_focus_ring(painter, option.rect, option.palette)


class LinkFocusStyle(FocusStyle):
    """FocusStyle, and the link the keyboard is on in a text view ringed as a focused control is."""

    def styleHint(  # Qt override
        self,
        hint: QStyle.StyleHint,
        option: QStyleOption | None = None,
        widget: QWidget | None = None,
        answer: QStyleHintReturn | None = None,
    ) -> int:
        result = super().styleHint(hint, option, widget, answer)
        if (
            hint == QStyle.StyleHint.SH_TextControl_FocusIndicatorTextCharFormat
            and answer is not None
            and answer.type == QStyleHintReturn.HintReturnType.SH_Variant.value  # (an int here)
        ):
            _set_variant(answer, link_focus_format(option.palette if option is not None else QApplication.palette()))
        return result


_link_style: LinkFocusStyle | None = None
_bar_style: FocusStyle | None = None


def ring_keyboard_links(view: QTextEdit) -> None:
    """The link Tab reaches in `view` (a QTextBrowser's) gets the focus ring: the view's style asks for
    the link's look (QWidgetTextControl asks its widget's style). One style for all such views, owned
    by the application."""
    global _link_style, _bar_style
    if _link_style is None or not shiboken6.isValid(_link_style):
        _link_style = LinkFocusStyle()
        _link_style.setParent(QApplication.instance())
        _bar_style = FocusStyle()
        _bar_style.setParent(QApplication.instance())
    view.setStyle(_link_style)
    for bar in (view.verticalScrollBar(), view.horizontalScrollBar()):  # (Qt passed the view's style on to them)
        bar.setStyle(_bar_style)  # a bar asks for hints at each change of its range: 4 a streamed batch
