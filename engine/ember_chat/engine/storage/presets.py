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
from dataclasses import replace
from pathlib import Path
from typing import Any

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.atomic import ProblemLog, read_json_file, write_json_atomically
from ember_chat.engine.storage.preset_records import (
    DEFAULT_PRESET_ID,
    PRESET_PARAMS,
    REMOTE_PREFIX,
    Preset,
    PresetError,
    as_sentence,
    builtin_default,
    model_key,
    new_preset_id,
    preset_params_of,
    timestamp,
)

PRESETS_FILE = "presets.json"


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
                    f"The preset {label or i + 1!r} in {self.path} is not valid: {as_sentence(exc)} It is left "
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
        saved = replace(preset, updated_at=timestamp(), created_at=preset.created_at or timestamp())

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
        now = timestamp()
        try:
            preset = Preset(new_preset_id(), name, system_prompt, dict(params), thinking, now, now)
        except InvalidParameter as exc:
            raise PresetError(f"The preset was not saved: {as_sentence(exc)}") from exc
        return self.save(preset)

    def duplicate(self, preset_id: str) -> Preset:
        source = self._need(preset_id)
        now = timestamp()
        return self.save(replace(source, id=new_preset_id(), name=f"{source.name} (copy)", created_at=now))

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
                raise PresetError(f"Nothing was imported: {label}: {as_sentence(exc)}") from None

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


__all__ = [
    "DEFAULT_PRESET_ID",
    "PRESETS_FILE",
    "PRESET_PARAMS",
    "REMOTE_PREFIX",
    "Preset",
    "PresetError",
    "PresetLibrary",
    "builtin_default",
    "model_key",
    "preset_params_of",
]
