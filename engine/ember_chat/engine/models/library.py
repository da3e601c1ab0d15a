"""The models the user has: .gguf files in the models folder (downloads land in `owner/repo/`),
local files imported in place, models already in the Hugging Face cache, and the bundled starter.

Listing is cheap (names, sizes, dates from the file system); `ModelEntry.info()` reads the GGUF
header on demand. Partial downloads (`*.part`) never appear; a split model (`-00001-of-0000n`) is
one entry, its first file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ember_chat.engine.errors import EmberError, ModelFileError
from ember_chat.engine.models.gguf_inspect import ModelInfo, inspect_gguf
from ember_chat.engine.models.projector import find_projector, is_projector_name, is_vision_architecture
from ember_chat.engine.models.starter import (
    STARTERS,
    Starter,
    find_starter,
    installed_starters,
    starter_file,
    starter_model_path,
)

EXTERNAL_REGISTRY = ".ember-external.json"
HF_CACHE_PREFIX = "hf-cache:"
_SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.I)
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
FINGERPRINT_SPAN = 4 << 20  # bytes hashed at each end of a file to tell identical files apart


@dataclass(frozen=True)
class ModelEntry:
    name: str  # what the user sees and what `--model` accepts
    path: Path | None  # None for the starter model until it has been assembled
    size: int
    modified: float
    is_starter: bool = False
    source_repo: str | None = None
    location: str = "models folder"  # or "in place", "Hugging Face cache", "bundled"
    mmproj: Path | None = None  # its projector (`mmproj-*.gguf` beside it): it can see images
    starter: Starter | None = None  # which bundled starter it is (is_starter): what it is for, in words

    def info(self) -> ModelInfo:
        if self.path is None:
            raise ModelFileError(f"{self.name} has not been prepared yet; load it once.")
        return inspect_gguf(self.path)

    @property
    def vision(self) -> bool:
        return self.mmproj is not None

    @property
    def vision_needs_projector(self) -> bool:
        """A vision model without its projector file: it cannot see images until that is beside it
        (reads the GGUF header: call it off the GUI thread)."""
        if self.mmproj is not None or self.path is None:
            return False
        try:
            return is_vision_architecture(self.info())
        except EmberError:
            return False


@dataclass(frozen=True)
class ImportCheck:
    """What `ModelLibrary.check_import` found: the file's header and an installed model that is the
    same file, if there is one."""

    info: ModelInfo
    duplicate: ModelEntry | None


def fingerprint(path: Path) -> tuple[int, str]:
    """(size, sha256 of the first and last FINGERPRINT_SPAN bytes): two GGUF files of one size whose
    header (metadata, tensor table) and last tensors agree are the same model file. Reads at most
    8 MiB, so a multi-GB file is compared in milliseconds."""
    size = path.stat().st_size
    h = hashlib.sha256()
    with path.open("rb") as fh:
        h.update(fh.read(FINGERPRINT_SPAN))
        if size > FINGERPRINT_SPAN:
            fh.seek(max(FINGERPRINT_SPAN, size - FINGERPRINT_SPAN))
            h.update(fh.read(FINGERPRINT_SPAN))
    return size, h.hexdigest()


def imported_file_name(info: ModelInfo) -> str:
    """The file name a copied model gets: its GGUF's own name and quantization ("Llama-3.2-1B-Instruct-
    Q4_K_M.gguf"), not whatever the file happened to be called."""
    stem = _UNSAFE.sub("-", info.name.strip()).strip("-.") or "model"
    if info.quantization.lower() not in stem.lower():
        stem = f"{stem}-{info.quantization}"
    return f"{stem}.gguf"


def split_parts(path: Path) -> list[Path]:
    """All files of a split model, given any one of them (just [path] for a single file)."""
    m = _SPLIT_PART.search(path.name)
    if not m:
        return [path]
    total = int(m.group(2))
    stem = path.name[: m.start()]
    return [path.with_name(f"{stem}-{i:05d}-of-{total:05d}.gguf") for i in range(1, total + 1)]


def hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


class ModelLibrary:
    def __init__(
        self, models_dir: Path, hf_cache: Path | None = None, starters: tuple[Starter, ...] = STARTERS
    ) -> None:
        self.models_dir = Path(models_dir)
        self.hf_cache = hf_cache if hf_cache is not None else hf_cache_dir()
        self.starters = starters

    # ----- listing
    def entries(self) -> list[ModelEntry]:
        out: list[ModelEntry] = []
        hidden: set[Path] = set()  # the starters' own assembled files (listed by their alias)
        for starter in installed_starters(self.starters):
            path = starter_file(starter, self.models_dir)
            if starter.assembled and path is not None:
                hidden.add(path)
            st = path.stat() if path is not None and path.is_file() else None
            out.append(
                ModelEntry(
                    name=starter.alias,
                    path=path if st else None,
                    size=st.st_size if st else starter.size,
                    modified=st.st_mtime if st else 0.0,
                    is_starter=True,
                    source_repo=starter.source_repo,
                    location="bundled",
                    starter=starter,
                )
            )
        if self.models_dir.is_dir():
            for p in sorted(self.models_dir.rglob("*.gguf"), key=lambda q: str(q).lower()):
                # by path, not by name: a download with the same file name from any repo is listed
                if p in hidden or not p.is_file() or not self._is_first_part(p) or is_projector_name(p.name):
                    continue
                rel = p.relative_to(self.models_dir)
                repo = "/".join(rel.parts[:2]) if len(rel.parts) >= 3 else None
                out.append(self._entry(rel.as_posix(), p, source_repo=repo))
        for p in self._external():
            if p.is_file():
                out.append(self._entry(str(p), p, location="in place"))
        for repo, p in self._hf_cached():
            if is_projector_name(p.name):
                continue
            out.append(
                self._entry(f"{HF_CACHE_PREFIX}{repo}/{p.name}", p, source_repo=repo, location="Hugging Face cache")
            )
        return out

    @staticmethod
    def _is_first_part(p: Path) -> bool:
        m = _SPLIT_PART.search(p.name)
        return m is None or int(m.group(1)) == 1

    @staticmethod
    def _entry(name: str, p: Path, source_repo: str | None = None, location: str = "models folder") -> ModelEntry:
        parts = split_parts(p)
        size = sum(q.stat().st_size for q in parts if q.exists())
        mmproj = find_projector(p)
        return ModelEntry(name, p, size, p.stat().st_mtime, source_repo=source_repo, location=location, mmproj=mmproj)

    def _registry(self) -> Path:
        return self.models_dir / EXTERNAL_REGISTRY

    def _external(self) -> list[Path]:
        try:
            data = json.loads(self._registry().read_text())
        except (OSError, ValueError):
            return []
        return [Path(p) for p in data if isinstance(p, str)] if isinstance(data, list) else []

    def _save_external(self, paths: list[Path]) -> None:
        self.models_dir.mkdir(parents=True, exist_ok=True)
        tmp = self._registry().with_suffix(".tmp")
        tmp.write_text(json.dumps(sorted({str(p) for p in paths})))
        os.replace(tmp, self._registry())

    def _hf_cached(self) -> list[tuple[str, Path]]:
        """GGUF files in the Hugging Face cache (models--owner--name/snapshots/<commit>/...)."""
        found: list[tuple[str, Path]] = []
        if not self.hf_cache.is_dir():
            return found
        for repo_dir in sorted(self.hf_cache.glob("models--*--*")):
            repo = repo_dir.name.removeprefix("models--").replace("--", "/", 1)
            seen: set[str] = set()
            for p in sorted(repo_dir.glob("snapshots/*/**/*.gguf"), key=lambda q: q.stat().st_mtime, reverse=True):
                if p.name not in seen and p.exists() and self._is_first_part(p):
                    seen.add(p.name)
                    found.append((repo, p))
        return found

    # ----- resolving, importing, deleting
    def resolve(self, name: str) -> Path:
        """A name from `entries()` (or a path to a .gguf file) to a file path."""
        if find_starter(name, self.starters) is not None:
            return starter_model_path(self.models_dir, name, starters=self.starters)
        candidate = self.models_dir / name
        if candidate.is_file():  # the common case, without listing every model
            return candidate
        if name.startswith(HF_CACHE_PREFIX):
            for e in self.entries():
                if e.name == name and e.path is not None:
                    return e.path
        return Path(name).expanduser()  # a path (imported in place, or given on the command line)

    def find(self, name: str) -> ModelEntry:
        for e in self.entries():
            if e.name == name:
                return e
        raise EmberError(f"No installed model is called '{name}'. `ember-chat models list` shows them.")

    def identical(self, source: Path) -> ModelEntry | None:
        """The installed model that is the same file as `source` (see `fingerprint`), if any."""
        source = Path(source).expanduser().resolve()
        size = source.stat().st_size
        mine: tuple[int, str] | None = None
        for e in self.entries():
            if e.path is None or not e.path.is_file() or e.path.stat().st_size != size:
                continue  # sizes first: only a file of the same size is read
            if e.path.resolve() == source:
                return e
            mine = mine or fingerprint(source)
            if fingerprint(e.path) == mine:
                return e
        return None

    def check_import(self, source: Path) -> ImportCheck:
        """Before asking how to import: is it a GGUF model (`ModelFileError` in words if not), is
        every part of a split model there, and is it already installed."""
        source = Path(source).expanduser().resolve()
        info = inspect_gguf(source)  # raises ModelFileError for anything llama.cpp should not see
        missing = [p.name for p in split_parts(source) if not p.exists()]
        if missing:
            raise ModelFileError(f"{source.name} is part of a split model; missing: {', '.join(missing)}.")
        return ImportCheck(info, self.identical(source))

    def import_file(self, source: Path, copy: bool = True) -> ModelEntry:
        """Validate with the GGUF inspector, then copy into the models folder under the model's own
        name (or use it in place). A file that is already installed is refused, naming the model."""
        source = Path(source).expanduser().resolve()
        check = self.check_import(source)
        if check.duplicate is not None:
            raise EmberError(f"{source.name} is already installed as {check.duplicate.name}.")
        parts = split_parts(source)
        if not copy:
            self._save_external([*self._external(), source])
            return self._entry(str(source), source, location="in place")
        dest_dir = self.models_dir / "imported"
        dest_dir.mkdir(parents=True, exist_ok=True)
        need = sum(p.stat().st_size for p in parts)
        free = shutil.disk_usage(dest_dir).free
        if free < need:
            raise EmberError(
                f"Not enough disk space to copy {source.name} ({need / 1e9:.2f} GB, {free / 1e9:.2f} GB free). "
                "Use it in place instead."
            )
        targets = self._free_names(dest_dir, imported_file_name(check.info), len(parts))
        for p, target in zip(parts, targets, strict=True):
            tmp = target.with_name(target.name + ".part")
            try:
                shutil.copyfile(p, tmp)
                os.replace(tmp, target)
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                raise EmberError(f"Could not copy {p.name}: {exc.strerror or exc}.") from exc
        first = targets[0]
        projector = find_projector(source)
        if projector is not None:  # it sees images: its projector goes with it, named after it
            shutil.copyfile(projector, first.with_name(f"mmproj-{first.name}"))
        return self._entry(first.relative_to(self.models_dir).as_posix(), first)

    @staticmethod
    def _free_names(folder: Path, name: str, n_parts: int) -> list[Path]:
        """File names in `folder` for a model of `n_parts` files, none taken: "name.gguf", else
        "name-2.gguf", … (split parts keep llama.cpp's "-0000i-of-0000n" ending)."""
        stem = name.removesuffix(".gguf")
        for attempt in range(1, 1000):
            base = stem if attempt == 1 else f"{stem}-{attempt}"
            if n_parts == 1:
                names = [folder / f"{base}.gguf"]
            else:
                names = [folder / f"{base}-{i:05d}-of-{n_parts:05d}.gguf" for i in range(1, n_parts + 1)]
            if not any(p.exists() for p in names):
                return names
        raise EmberError(f"Too many imported models are called {stem}; delete some first.")

    def delete(self, name: str) -> None:
        """Delete a model from the models folder (all its split parts); models used in place or from
        the Hugging Face cache are only removed from the list / left to their owner."""
        entry = self.find(name)
        if entry.location == "in place":
            self._save_external([p for p in self._external() if str(p) != entry.name])
            return
        if entry.location == "Hugging Face cache":
            raise EmberError(
                f"{entry.name} lives in the Hugging Face cache, which Ember does not manage; remove it with "
                "`hf cache delete`."
            )
        if entry.starter is not None and not entry.starter.assembled:
            raise EmberError(
                f"{entry.starter.title} comes with Ember's starter package and is used where it is installed; "
                f"to remove it: pip uninstall {entry.starter.pip_name.split('==')[0]}"
            )
        if entry.path is None:
            return
        for p in split_parts(entry.path):
            p.unlink(missing_ok=True)
        verified = entry.path.with_name(entry.path.name + ".verified")
        verified.unlink(missing_ok=True)
        self._delete_projector(entry)
        # tidy empty owner/repo folders left behind
        parent = entry.path.parent
        while parent != self.models_dir and parent.is_relative_to(self.models_dir):
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def _delete_projector(self, deleted: ModelEntry) -> None:
        """A deleted model's projector goes with it, unless another model beside it still uses it."""
        mmproj = deleted.mmproj
        if mmproj is None or not mmproj.is_relative_to(self.models_dir):
            return
        models = [p for p in mmproj.parent.glob("*.gguf") if not is_projector_name(p.name) and p != deleted.path]
        if not any(find_projector(p) == mmproj for p in models):
            mmproj.unlink(missing_ok=True)
            mmproj.with_name(mmproj.name + ".verified").unlink(missing_ok=True)

    def partial_downloads(self) -> list[Path]:
        """Sidecars of unfinished downloads, to offer resuming them."""
        if not self.models_dir.is_dir():
            return []
        return sorted(self.models_dir.rglob("*.gguf.part.json"))
