"""The words for a request's unknown fields, shared by the server's control (the 400 it answers says how
to have them ignored) and its dialog (the checkbox that does): a module of their own, so the dialog needs
nothing else of the control."""

from __future__ import annotations

from PySide6.QtCore import QT_TRANSLATE_NOOP

# The 400 for an unknown request field says how to have them ignored: on this server, the dialog's
# checkbox (its label, IGNORE_UNKNOWN_LABEL, the one text the dialog translates: lupdate finds it here under
# the dialog's context). Sent to HTTP clients: English.
IGNORE_UNKNOWN_LABEL = QT_TRANSLATE_NOOP("ApiServerDialog", "Ignore unknown request fields")
WINDOW_UNKNOWN_FIELDS_ADVICE = (
    f"turn on “{IGNORE_UNKNOWN_LABEL}” in the Ember window's Settings ▸ Local API server… to ignore them"
)
