"""An unzipped ChatGPT export whose images are symbolic links out of its folder (links cannot live in a
JSON file, so this builds one): `file-Abc123-leaf.png`, the picture of tests.helpers.import_fixtures'
photosynthesis chat, links to a file elsewhere, and `dalle-generations/` links to a folder elsewhere
that holds the DALL·E chat's image. Expected: neither is read; both chats import with the line that
says an image was there, and the report counts them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.import_fixtures import DALLE_ASSET, dalle, photosynthesis


def chatgpt_export_with_links(export: Path, outside: Path, image: bytes) -> Path:
    """Writes the export into `export` and the files its links reach into `outside` (each holding
    `image`); returns its conversations.json."""
    (outside / "pictures").mkdir(parents=True)
    (outside / "private.png").write_bytes(image)
    (outside / "pictures" / f"{DALLE_ASSET}-0f1e2d3c.png").write_bytes(image)
    export.mkdir(parents=True)
    (export / "file-Abc123-leaf.png").symlink_to(outside / "private.png")
    (export / "dalle-generations").symlink_to(outside / "pictures", target_is_directory=True)
    conversation, _ = photosynthesis()
    source = export / "conversations.json"
    source.write_text(json.dumps([conversation, dalle()]), encoding="utf-8")
    return source
