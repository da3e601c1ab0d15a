"""Issue 17: `ember-chat run --attach IMAGE` with a vision model: the projector beside the model or
named with --mmproj; without one the image is refused in one line (exit 2), never dropped."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from PIL import Image

from tests.helpers.library_cli import cli
from tests.helpers.vision_factory import write_tiny_vision_model


def test_run_attaches_an_image_with_the_projector_beside_or_named(tmp_path: Path) -> None:
    env = {**os.environ, "EMBER_DATA_DIR": str(tmp_path / "data"), "EMBER_CONFIG_DIR": str(tmp_path / "config")}
    model, mmproj = write_tiny_vision_model(tmp_path / "v")
    alone = tmp_path / "alone" / model.name
    alone.parent.mkdir()
    shutil.copy(model, alone)
    image = tmp_path / "red.png"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(image)
    ask = ("--attach", str(image), "--prompt", "What is this?", "--max-tokens", "3", "--json")

    for args in (("--model", str(model)), ("--model", str(alone), "--mmproj", str(mmproj))):
        out = cli("run", *args, *ask, env=env)
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["image_encode_ms"] > 0
        assert result["attachments"] == [{"name": "red.png", "kind": "image", "tokens": None, "mode": "image"}]

    out = cli("run", "--model", str(alone), *ask, env=env)
    assert out.returncode == 2
    assert "cannot see images" in out.stderr and "projector" in out.stderr
