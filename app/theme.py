"""Light, dark or system colours, on the Fusion style so every platform looks the same."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QIcon

from ember_chat.engine.resources import icon_files

STYLE = """
#modelBar { border-bottom: 1px solid palette(mid); }
#backendBadge { padding: 2px 8px; border-radius: 8px; background: palette(alternate-base); }
QTextBrowser { border: none; font-size: 14px; }
"""


def apply_theme(app: QGuiApplication | None, name: str) -> None:
    if app is None:
        return
    scheme = {
        "light": Qt.ColorScheme.Light,
        "dark": Qt.ColorScheme.Dark,
        "system": Qt.ColorScheme.Unknown,
    }[name]
    app.styleHints().setColorScheme(scheme)
    if hasattr(app, "setStyleSheet"):
        app.setStyleSheet(STYLE)


def app_icon() -> QIcon:
    """The window's icon, every rendered size (crisp at 1× and 2×) plus the SVG for anything larger."""
    icon = QIcon()
    for path in icon_files():
        icon.addFile(str(path))
    return icon
