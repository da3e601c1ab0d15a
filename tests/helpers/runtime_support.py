"""A local runtime with a model loaded for the length of a `with` block (or a fixture), one thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.local.runtime import LocalRuntime


@contextmanager
def loaded(path: Path, n_ctx: int = 256, **config: Any) -> Iterator[LocalRuntime]:
    rt = LocalRuntime()
    try:
        rt.load(LoadConfig(path, n_ctx=n_ctx, threads=1, **config))
        yield rt
    finally:
        rt.close()
