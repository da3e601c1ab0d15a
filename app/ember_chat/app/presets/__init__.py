"""Presets: Settings ▸ Presets (the dialog and its editor), the popup, and what the window does with them."""
