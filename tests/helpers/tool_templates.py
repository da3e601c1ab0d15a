"""The real chat templates of tests/templates/ and their manifest's entries, by name."""

from __future__ import annotations

import json

from tests.helpers.paths import TESTS

HERE = TESTS / "templates"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
ENTRIES = {entry["name"]: entry for entry in MANIFEST["templates"]}
