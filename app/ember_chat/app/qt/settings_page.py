"""How a controller shows its settings dialog: as a page of the main window's Settings window
(shell/settings_window.py, which this layer cannot import), or on its own where the window has none."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QWidget


def show_settings_page(window: QWidget | None, key: str, dialog: QDialog) -> None:
    """Show `dialog` as the section `key` of `window`'s Settings window, raised."""
    settings = getattr(window, "settings_window", None)
    if settings is None:  # (a window without one: the dialog as it was before the Settings window)
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return
    settings.show_page(key, dialog)
