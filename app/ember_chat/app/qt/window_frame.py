"""What the window manager adds around a window, which Qt cannot know before the window is shown: the
allowance the main window's first size and the dialogs that size themselves to the screen leave for it."""

from __future__ import annotations

TITLE_BAR_ALLOWANCE = 40  # px: the title bar and frame
