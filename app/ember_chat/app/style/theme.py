"""Ember's two palettes (light and dark) on the Fusion style, so every platform looks the same and every
colour pair is known: `tests/app/test_look.py` checks each text colour against its background for WCAG AA
contrast (4.5:1). "System" follows the platform's light/dark preference."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QStyle

from ember_chat.app.style.focus import FocusStyle
from ember_chat.engine.resources import icon_files


@dataclass(frozen=True)
class Colors:
    name: str
    window: str  # window chrome, sidebars
    base: str  # the transcript and input fields
    alt_base: str
    text: str
    secondary: str  # metrics lines, times, labels
    accent: str  # Ember's orange, for the assistant's name and focus
    user_accent: str
    link: str
    highlight: str  # selection
    highlighted_text: str
    button: str
    border: str
    user_card: str
    assistant_card: str
    code_bg: str
    code_header: str
    inline_code_bg: str
    error_bg: str
    error_text: str
    notice_bg: str
    error: str  # error text on the window's own background
    success: str
    warning: str


LIGHT = Colors(
    name="light",
    window="#f3f3f5",
    base="#ffffff",
    alt_base="#f6f7f9",
    text="#1f2328",
    secondary="#59636e",
    accent="#b93d0c",
    user_accent="#1d4ed8",
    link="#0b57d0",
    highlight="#1d4ed8",
    highlighted_text="#ffffff",
    button="#f6f7f9",
    border="#d1d9e0",
    user_card="#eaf1ff",
    assistant_card="#f6f7f9",
    code_bg="#ffffff",
    code_header="#eef1f4",
    inline_code_bg="#e8ebef",
    error_bg="#fde8e8",
    error_text="#8a1c1c",
    notice_bg="#e8f0fe",
    error="#b42318",
    success="#116329",
    warning="#8a4b00",
)

DARK = Colors(
    name="dark",
    window="#1f2024",
    base="#17181b",
    alt_base="#222428",
    text="#e6e7ea",
    secondary="#a2a9b3",
    accent="#fb923c",
    user_accent="#8ab4ff",
    link="#8ab4ff",
    highlight="#3b6fd8",
    highlighted_text="#ffffff",
    button="#2a2c31",
    border="#3a3d44",
    user_card="#1f2a3d",
    assistant_card="#212328",
    code_bg="#121316",
    code_header="#2a2c31",
    inline_code_bg="#30333a",
    error_bg="#3b1d1d",
    error_text="#ffb4b4",
    notice_bg="#1d2b45",
    error="#ff9a8f",
    success="#7ee2a8",
    warning="#f5b95c",
)


def contrast_ratio(foreground: str, background: str) -> float:
    """WCAG 2.x contrast ratio of two sRGB colours (1.0 to 21.0)."""

    def luminance(hex_colour: str) -> float:
        c = QColor(hex_colour)
        channels = []
        for v in (c.redF(), c.greenF(), c.blueF()):
            channels.append(v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4)
        r, g, b = channels
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    hi, lo = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def with_contrast(foreground: str, background: str, minimum: float = 4.5) -> str:
    """The foreground, darkened or lightened just enough to reach `minimum` contrast on the background."""
    colour = QColor(foreground)
    dark_bg = QColor(background).lightnessF() < 0.5
    for _ in range(40):
        if contrast_ratio(colour.name(), background) >= minimum:
            break
        colour = colour.lighter(108) if dark_bg else colour.darker(108)
    return colour.name()


def active_colors() -> Colors:
    """The colours of the palette the application uses now (for dialogs that colour a status text)."""
    app = QGuiApplication.instance()
    if app is not None and QGuiApplication.palette().base().color().name() == DARK.base:
        return DARK
    return LIGHT


def palette_for(c: Colors) -> QPalette:
    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: c.window,
        QPalette.ColorRole.WindowText: c.text,
        QPalette.ColorRole.Base: c.base,
        QPalette.ColorRole.AlternateBase: c.alt_base,
        QPalette.ColorRole.Text: c.text,
        QPalette.ColorRole.PlaceholderText: c.secondary,
        QPalette.ColorRole.Button: c.button,
        QPalette.ColorRole.ButtonText: c.text,
        QPalette.ColorRole.BrightText: c.highlighted_text,
        QPalette.ColorRole.Highlight: c.highlight,
        QPalette.ColorRole.HighlightedText: c.highlighted_text,
        QPalette.ColorRole.Link: c.link,
        QPalette.ColorRole.LinkVisited: c.link,
        QPalette.ColorRole.ToolTipBase: c.base,
        QPalette.ColorRole.ToolTipText: c.text,
        QPalette.ColorRole.Mid: c.border,
        QPalette.ColorRole.Midlight: c.alt_base,
        QPalette.ColorRole.Accent: c.accent,
    }
    for role, colour in roles.items():
        p.setColor(role, QColor(colour))
    disabled = QColor(c.secondary)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    return p


def style_sheet(c: Colors) -> str:
    # No font sizes here: text follows the system font (and its size) everywhere.
    return f"""
#modelBar {{ border-bottom: 1px solid {c.border}; }}
#backendBadge {{ padding: 2px 8px; border-radius: 8px; background: {c.alt_base}; color: {c.secondary}; }}
#banner[kind="error"] {{ background: {c.error_bg}; color: {c.error_text}; }}
#banner[kind="notice"] {{ background: {c.notice_bg}; color: {c.text}; }}
#attachmentChip {{ border: 1px solid {c.border}; border-radius: 8px; background: {c.alt_base}; }}
#attachmentChip[warn="true"] {{ border-color: {c.warning}; }}
#attachmentDetails {{ color: {c.secondary}; }}
#attachmentKind {{ color: {c.accent}; font-weight: 600; }}
#attachmentWarning {{ color: {c.warning}; }}
"""


def colors_named(name: str, app: QGuiApplication | None = None) -> Colors:
    if name == "dark":
        return DARK
    if name == "light":
        return LIGHT
    app = app or QGuiApplication.instance()
    if app is not None and app.styleHints().colorScheme() == Qt.ColorScheme.Dark:
        return DARK
    return LIGHT


# The widget classes a platform theme may give palettes of their own (QApplication's
# initializeWidgetPalettesFromTheme): those palettes win over the application's for their widgets, so
# a dialog's label, buttons and field stayed light in the dark theme when the platform theme had them.
THEMED_CLASSES = (
    "QAbstractButton", "QToolButton", "QCheckBox", "QRadioButton", "QHeaderView", "QAbstractItemView",
    "QMessageBoxLabel", "QTabBar", "QLabel", "QGroupBox", "QMenu", "QMenuBar", "QTextEdit", "QTextControl",
    "QLineEdit",
)  # fmt: skip


def apply_theme(app: QGuiApplication | None, name: str) -> Colors:
    """Switch the whole application to the light, dark or system palette; returns the colours used."""
    if app is None:
        return colors_named(name)
    scheme = {"light": Qt.ColorScheme.Light, "dark": Qt.ColorScheme.Dark, "system": Qt.ColorScheme.Unknown}[name]
    keeper = _PaletteKeeper.of(app)
    if hasattr(app, "setStyle") and not isinstance(app.style(), FocusStyle):
        keeper.style = FocusStyle()  # (kept referenced: the application does not own it for Python)
        app.setStyle(keeper.style)
    app.styleHints().setColorScheme(scheme)
    colors = colors_named(name, app)
    keeper.colors = colors
    keeper.apply()
    if hasattr(app, "setStyleSheet"):
        app.setStyleSheet(style_sheet(colors))
    return colors


class _PaletteKeeper(QObject):
    """Ember's palette for the whole application and every themed widget class, applied again after
    the platform's colour scheme changes (Qt then reloads the platform theme's class palettes)."""

    def __init__(self, app: QGuiApplication) -> None:
        super().__init__(app)
        self.setObjectName("emberPaletteKeeper")
        self.app = app
        self.colors: Colors | None = None
        self.style: QStyle | None = None
        app.styleHints().colorSchemeChanged.connect(lambda _scheme: QTimer.singleShot(0, self, self.apply))

    @classmethod
    def of(cls, app: QGuiApplication) -> _PaletteKeeper:
        keeper = app.findChild(cls, "emberPaletteKeeper")
        return keeper if keeper is not None else cls(app)

    def apply(self) -> None:
        if self.colors is None:
            return
        palette = palette_for(self.colors)
        self.app.setPalette(palette)
        if hasattr(self.app, "setStyle"):  # (a QApplication: widget class palettes)
            for name in THEMED_CLASSES:
                self.app.setPalette(palette, name)


def app_icon() -> QIcon:
    """The window's icon, every rendered size (crisp at 1× and 2×) plus the SVG for anything larger."""
    icon = QIcon()
    for path in icon_files():
        icon.addFile(str(path))
    return icon
