"""Data files shipped with Ember (catalog, icons), loaded through one helper: the package
`ember_chat.resources` (resources/ember_chat/resources/ in the repo), found by importlib.resources both
installed and inside a PyInstaller bundle."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any


def resources_dir() -> Path:
    return Path(str(files("ember_chat.resources")))


def icon_files() -> list[Path]:
    """Ember's icon: the SVG source and its rendered PNG sizes (packaging/make_icons.py)."""
    icons = resources_dir() / "icons"
    return [*sorted(icons.glob("ember-*.png"), key=lambda p: int(p.stem.split("-")[1])), icons / "ember.svg"]


def ui_icon_svg(name: str) -> str:
    """The SVG source of one of the window's icons (resources/icons/ui/NAME.svg)."""
    return (resources_dir() / "icons" / "ui" / f"{name}.svg").read_text(encoding="utf-8")


def ui_icon_names() -> list[str]:
    return sorted(p.stem for p in (resources_dir() / "icons" / "ui").glob("*.svg"))


def load_json(name: str) -> Any:
    return json.loads((resources_dir() / name).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class CatalogEntry:
    repo: str
    name: str
    params: str
    licence: str
    description: str


def catalog() -> list[CatalogEntry]:
    return [CatalogEntry(**m) for m in load_json("catalog.json")["models"]]
