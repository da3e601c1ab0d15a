"""A preset's values (engine/storage/presets.py keeps them): `Preset` (what it sets: a system prompt,
sampling parameters, a thinking switch), their checks, and the model key a model's default preset is
kept under."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ember_chat.engine.core.params import SAMPLING_SPECS, SPECS, SamplingParams
from ember_chat.engine.errors import EmberError, InvalidParameter

DEFAULT_PRESET_ID = "default"
PRESET_PARAMS = tuple(spec.name for spec in SAMPLING_SPECS)  # what a preset may set (SamplingParams fields)
REMOTE_PREFIX = "remote:"


class PresetError(EmberError):
    """A preset that cannot be saved, imported or deleted; the message says why and what to do."""


def timestamp() -> float:
    return time.time()


@dataclass(frozen=True)
class Preset:
    """`params`: only the sampling parameters this preset sets (the others stay as they are);
    `thinking`: None leaves the thinking switch as it is."""

    id: str
    name: str
    system_prompt: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    thinking: bool | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    def __post_init__(self) -> None:
        check_preset(self.name, self.system_prompt, self.params, self.thinking)
        object.__setattr__(self, "name", self.name.strip())

    @property
    def builtin(self) -> bool:
        return self.id == DEFAULT_PRESET_ID

    def sampling(self, base: SamplingParams) -> SamplingParams:
        """`base` (the app's defaults, or a request's) with what this preset sets."""
        changes: dict[str, Any] = dict(self.params)
        if self.thinking is not None:
            changes["thinking"] = self.thinking
        return replace(base, **changes) if changes else base

    def system_prompt_over(self, app_default: str) -> str:
        """This preset's system prompt; without one, the app's default system prompt."""
        return self.system_prompt or app_default

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: object, new_id: bool = False) -> Preset:
        """A preset as presets.json (or an export) holds it; InvalidParameter says what is wrong.
        `new_id`: give it a fresh id and timestamps (an import)."""
        if not isinstance(raw, dict):
            raise InvalidParameter("it is not a JSON object.")
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InvalidParameter("it has no name.")
        unknown = sorted(set(raw) - {"id", "name", "system_prompt", "params", "thinking", "created_at", "updated_at"})
        if unknown:
            raise InvalidParameter(f"unknown field(s) {', '.join(unknown)}.")
        pid = raw.get("id")
        if not new_id and (not isinstance(pid, str) or not pid):
            raise InvalidParameter("it has no id.")
        stamps = [raw.get("created_at", 0.0), raw.get("updated_at", 0.0)]
        if not all(isinstance(s, int | float) and not isinstance(s, bool) for s in stamps):
            raise InvalidParameter("its created_at and updated_at must be numbers (seconds since 1970).")
        now = timestamp()
        return cls(
            id=new_preset_id() if new_id else str(pid),
            name=name,
            system_prompt=raw.get("system_prompt", ""),
            params=raw.get("params", {}),
            thinking=raw.get("thinking"),
            created_at=now if new_id else float(stamps[0]),
            updated_at=now if new_id else float(stamps[1]),
        )


def check_preset(name: object, system_prompt: object, params: object, thinking: object) -> None:
    """Raises InvalidParameter naming what is wrong."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidParameter("A preset needs a name.")
    if not isinstance(system_prompt, str):
        raise InvalidParameter("the system prompt must be text.")
    if not isinstance(params, dict):
        raise InvalidParameter("params must be an object of sampling parameters.")
    unknown = sorted(set(params) - set(PRESET_PARAMS))
    if unknown:
        known = ", ".join(PRESET_PARAMS)
        raise InvalidParameter(f"unknown parameter(s) {', '.join(unknown)} (a preset sets {known}).")
    for key, value in params.items():
        SPECS[key].check(value, json.dumps)
    if thinking is not None and not isinstance(thinking, bool):
        raise InvalidParameter(f"thinking must be true, false or null, got {json.dumps(thinking)}.")


def new_preset_id() -> str:
    return uuid.uuid4().hex[:12]


def builtin_default() -> Preset:
    return Preset(DEFAULT_PRESET_ID, "Default")


def model_key(name: str, models_dir: Path | None = None) -> str:
    """The key a model's default preset is kept under: the picker's name ("starter", a name in the
    models folder, remote:<connection>/<model id>); a path to a file in the models folder is that name,
    another path its absolute form, so `--model PATH` and the picker agree."""
    if name.startswith(REMOTE_PREFIX) or not name.endswith(".gguf"):
        return name
    path = Path(name).expanduser()
    if models_dir is not None and not path.is_absolute() and (models_dir / path).is_file():
        return path.as_posix()
    if path.is_file():
        resolved = path.resolve()
        if models_dir is not None:
            try:
                return resolved.relative_to(Path(models_dir).resolve()).as_posix()
            except ValueError:
                pass
        return str(resolved)
    return name


def as_sentence(exc: Exception) -> str:
    text = str(exc).strip()
    return text if text.endswith(".") else text + "."


def preset_params_of(values: dict[str, Any]) -> dict[str, Any]:
    """The part of a chat's saved params (SamplingParams.to_dict(), context length…) a preset keeps."""
    return {k: v for k, v in values.items() if k in PRESET_PARAMS}
