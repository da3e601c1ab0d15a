"""Presets and the prompt library: named sets of a system prompt, sampling parameters and a thinking
switch, kept in `presets.json` in the config folder (atomic writes; a damaged file set aside with a
message, never a crash; an invalid entry costs only itself and stays in the file for the user to fix).

A preset changes only what it names: applied over the app's defaults (`sampling`, `system_prompt_over`)
the built-in "Default" preset, which names nothing, gives exactly the app's defaults. The file also says
which preset new chats start from (`default_id`) and each model's own default preset, by model key
(`model_key`: the same key for the window's picker, `ember-chat run/serve --model` and the API server).
The file is read again whenever it changed on disk, so the window, the CLI and a running API server
see each other's changes."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ember_chat.engine.core.params import SAMPLING_SPECS, SPECS, SamplingParams
from ember_chat.engine.errors import EmberError, InvalidParameter
from ember_chat.engine.storage.atomic import ProblemLog, read_json_file, write_json_atomically

PRESETS_FILE = "presets.json"
DEFAULT_PRESET_ID = "default"
PRESET_PARAMS = tuple(spec.name for spec in SAMPLING_SPECS)  # what a preset may set (SamplingParams fields)
REMOTE_PREFIX = "remote:"


class PresetError(EmberError):
    """A preset that cannot be saved, imported or deleted; the message says why and what to do."""


def _now() -> float:
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
        now = _now()
        return cls(
            id=_new_id() if new_id else str(pid),
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


def _new_id() -> str:
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


class PresetLibrary(ProblemLog):
    """presets.json in `config_dir`: {"presets": [...], "default_id": id, "model_defaults": {key: id}}.
    Safe to use from several threads (the API server's reads the window's writes)."""

    def __init__(self, config_dir: Path) -> None:
        super().__init__()
        self.path = Path(config_dir) / PRESETS_FILE
        self._lock = threading.RLock()
        self._stamp: tuple[int, int, int] | None = None
        self._raw: dict[str, Any] = {}
        self._presets: dict[str, Preset] = {}

    # ----- reading
    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _load(self) -> None:
        """Read the file again when it changed on disk (or at first use)."""
        stamp = self._file_stamp()
        if stamp is not None and stamp == self._stamp:
            return
        raw = read_json_file(
            self.path, self, "presets file", "presets",
            "The built-in Default preset is used; presets saved from now on go into a new file.",
            fits=lambda d: isinstance(d, dict) and isinstance(d.get("presets", []), list),
        )  # fmt: skip
        self._raw = raw if isinstance(raw, dict) else {}
        self._stamp = self._file_stamp()
        self._presets = {}
        for i, entry in enumerate(self._raw.get("presets", [])):
            try:
                preset = Preset.from_dict(entry)
            except InvalidParameter as exc:
                label = entry.get("name") if isinstance(entry, dict) else None
                self.report(
                    f"The preset {label or i + 1!r} in {self.path} is not valid: {_sentence(exc)} It is left "
                    "out, and kept in the file as it is for you to fix."
                )
                continue
            self._presets.setdefault(preset.id, preset)

    def presets(self) -> list[Preset]:
        """Default first, then by name."""
        with self._lock:
            self._load()
            others = [p for p in self._presets.values() if not p.builtin]
            default = self._presets.get(DEFAULT_PRESET_ID, builtin_default())
        return [default, *sorted(others, key=lambda p: (p.name.casefold(), p.created_at))]

    def search(self, text: str) -> list[Preset]:
        """The presets whose name or system prompt holds `text` (any case); all for empty text."""
        needle = text.strip().casefold()
        return [p for p in self.presets() if needle in p.name.casefold() or needle in p.system_prompt.casefold()]

    def get(self, preset_id: str) -> Preset | None:
        with self._lock:
            self._load()
            if preset_id == DEFAULT_PRESET_ID:
                return self._presets.get(DEFAULT_PRESET_ID, builtin_default())
            return self._presets.get(preset_id)

    def find(self, name: str) -> Preset:
        """The preset called `name` (any case; or with that id), for `--preset NAME`; a PresetError
        lists the presets there are."""
        wanted = name.strip().casefold()
        everything = self.presets()
        for preset in everything:
            if preset.name.casefold() == wanted or preset.id == name:
                return preset
        names = ", ".join(f"“{p.name}”" for p in everything)
        raise PresetError(f"No preset is called “{name}”. The presets are: {names}.")

    @property
    def default_id(self) -> str:
        """The preset new chats start from (the built-in Default unless another was chosen)."""
        with self._lock:
            self._load()
            chosen = self._raw.get("default_id")
            return chosen if isinstance(chosen, str) and chosen in self._presets else DEFAULT_PRESET_ID

    @default_id.setter
    def default_id(self, preset_id: str) -> None:
        self._need(preset_id)
        self._write(lambda raw: raw.update(default_id=preset_id))

    def default(self) -> Preset:
        return self.get(self.default_id) or builtin_default()

    def model_default(self, model: str | None) -> Preset | None:
        """The preset this model starts from (`model_key`), if one was chosen for it."""
        if not model:
            return None
        with self._lock:
            self._load()
            chosen = self._model_defaults().get(model)
            return self.get(chosen) if isinstance(chosen, str) else None

    def model_defaults(self) -> dict[str, str]:
        """{model key: preset id} of every model with its own default preset."""
        with self._lock:
            self._load()
            return {k: v for k, v in self._model_defaults().items() if isinstance(v, str) and self.get(v)}

    def for_model(self, model: str | None) -> Preset:
        """What a new chat with this model loaded starts from: its own default, else the default."""
        return self.model_default(model) or self.default()

    def _model_defaults(self) -> dict[str, Any]:
        defaults = self._raw.get("model_defaults")
        return defaults if isinstance(defaults, dict) else {}

    # ----- changing
    def set_model_default(self, model: str, preset_id: str | None) -> None:
        if preset_id is not None:
            self._need(preset_id)

        def change(raw: dict[str, Any]) -> None:
            defaults = dict(raw.get("model_defaults") or {})
            if preset_id is None:
                defaults.pop(model, None)
            else:
                defaults[model] = preset_id
            raw["model_defaults"] = defaults

        self._write(change)

    def save(self, preset: Preset) -> Preset:
        """Adds it, or replaces the preset with its id; returns it as saved (updated now)."""
        saved = replace(preset, updated_at=_now(), created_at=preset.created_at or _now())

        def change(raw: dict[str, Any]) -> None:
            entries = list(raw.get("presets", []))
            at = next((i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("id") == saved.id), None)
            if at is None:
                entries.append(saved.to_dict())
            else:
                entries[at] = saved.to_dict()
            raw["presets"] = entries

        self._write(change)
        return saved

    def create_from(
        self, name: str, system_prompt: str, params: dict[str, Any], thinking: bool | None = None
    ) -> Preset:
        """A new preset (e.g. from the current chat: its system prompt and parameters)."""
        now = _now()
        try:
            preset = Preset(_new_id(), name, system_prompt, dict(params), thinking, now, now)
        except InvalidParameter as exc:
            raise PresetError(f"The preset was not saved: {_sentence(exc)}") from exc
        return self.save(preset)

    def duplicate(self, preset_id: str) -> Preset:
        source = self._need(preset_id)
        now = _now()
        return self.save(replace(source, id=_new_id(), name=f"{source.name} (copy)", created_at=now))

    def delete(self, preset_id: str) -> None:
        """Deletes a preset; new chats and models that started from it go back to the Default."""
        if preset_id == DEFAULT_PRESET_ID:
            raise PresetError("The built-in Default preset cannot be deleted; edit it instead.")
        self._need(preset_id)

        def change(raw: dict[str, Any]) -> None:
            entries = raw.get("presets", [])
            raw["presets"] = [e for e in entries if not (isinstance(e, dict) and e.get("id") == preset_id)]
            if raw.get("default_id") == preset_id:
                raw.pop("default_id")
            defaults = raw.get("model_defaults")
            if isinstance(defaults, dict):
                raw["model_defaults"] = {k: v for k, v in defaults.items() if v != preset_id}

        self._write(change)

    # ----- import and export
    def export_json(self, ids: list[str]) -> str:
        chosen = [p.to_dict() for p in (self.get(i) for i in ids) if p is not None]
        return json.dumps({"presets": chosen}, indent=2, ensure_ascii=False)

    def import_json(self, text: str) -> list[Preset]:
        """Adds the presets of an export (or a hand-written list) with new ids; all or nothing. A
        PresetError says what is wrong and where."""
        if not text.strip():
            raise PresetError("The text to import is empty: paste or choose presets exported from Ember (JSON).")
        try:
            data = json.loads(text)
        except ValueError as exc:
            where = f"line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise PresetError(
                f"The text to import is not JSON ({where}): nothing was imported. "
                "Import a file exported from Ember's preset library."
            ) from None
        entries = data.get("presets") if isinstance(data, dict) and "presets" in data else data
        if isinstance(entries, dict):
            entries = [entries]
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise PresetError(
                'The JSON holds no presets: nothing was imported. Ember exports them as {"presets": [...]}.'
            )
        imported = []
        for i, entry in enumerate(entries):
            try:
                imported.append(Preset.from_dict(entry, new_id=True))
            except InvalidParameter as exc:
                name = entry.get("name")
                label = f"preset {i + 1} (“{name}”)" if isinstance(name, str) and name.strip() else f"preset {i + 1}"
                raise PresetError(f"Nothing was imported: {label}: {_sentence(exc)}") from None

        def change(raw: dict[str, Any]) -> None:
            raw["presets"] = [*raw.get("presets", []), *(p.to_dict() for p in imported)]

        self._write(change)
        return imported

    # ----- plumbing
    def _need(self, preset_id: str) -> Preset:
        preset = self.get(preset_id)
        if preset is None:
            raise PresetError("That preset no longer exists (it was deleted); choose another one.")
        return preset

    def _write(self, change: Any) -> None:
        with self._lock:
            self._load()
            if self._stamp is None and self.path.exists():
                raise PresetError(
                    f"The presets were not saved: {self.path} is damaged and could not be moved aside, so it was "
                    "not overwritten. Move or delete that file, then try again."
                )
            raw = json.loads(json.dumps(self._raw))  # a copy: a failed write changes nothing
            change(raw)
            raw.setdefault("presets", [])
            try:
                write_json_atomically(self.path, raw, ensure_ascii=False)
            except OSError as exc:
                raise PresetError(
                    f"The presets could not be saved ({exc.strerror or exc}); nothing was changed. "
                    "Free some space (or fix the folder's permissions), then try again."
                ) from exc
            self._stamp = None  # read back what was written: the same code path as another program's change
            self._load()


def _sentence(exc: Exception) -> str:
    text = str(exc).strip()
    return text if text.endswith(".") else text + "."


def preset_params_of(values: dict[str, Any]) -> dict[str, Any]:
    """The part of a chat's saved params (SamplingParams.to_dict(), context length…) a preset keeps."""
    return {k: v for k, v in values.items() if k in PRESET_PARAMS}


__all__ = [
    "DEFAULT_PRESET_ID",
    "PRESETS_FILE",
    "PRESET_PARAMS",
    "Preset",
    "PresetError",
    "PresetLibrary",
    "builtin_default",
    "model_key",
    "preset_params_of",
]
