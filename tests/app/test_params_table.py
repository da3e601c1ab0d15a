"""One parameter table: engine validation, settings, the GUI's spin boxes and the CLI flags all agree
with it, so a value saved in one place is never silently clamped or refused in another. Its load
parameters are one record (LoadOptions: LoadConfig, a model's saved settings) from which the load
settings dialog, model_settings.json and the CLI's load flags are made."""

from __future__ import annotations

import argparse
import json
from dataclasses import fields, replace
from pathlib import Path

import pytest
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QSpinBox
from pytestqt.qtbot import QtBot

from ember_chat.app.models.load_panel import LoadSettingsDialog
from ember_chat.app.side_panel.params_panel import ParamsPanel
from ember_chat.engine.cli.common import (
    CLI_DEFAULTS,
    LOAD_FLAGS,
    add_load_flags,
    add_sampling_flags,
    load_options_from_args,
)
from ember_chat.engine.core.params import (
    LOAD_SPECS,
    SAMPLING_SPECS,
    SPECS,
    LoadConfig,
    LoadOptions,
    ParamSpec,
    SamplingParams,
)
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.storage.model_settings import (
    AUTO_GPU_LAYERS,
    FIRST_VALUES,
    ModelLoadSettings,
    ModelSettingsStore,
)
from ember_chat.engine.storage.settings import Settings

SETTING_FOR = {"n_ctx": "context_length", "flash_attn": "flash_attention"}
# a default seed would make every chat alike; the batch size, prompt threads (the threads), mmap and
# mlock are per-model load settings only
NO_SETTING = {"seed", "n_batch", "threads_batch", "use_mmap", "use_mlock"}
# Where the window sets each parameter: the side panel (sampling, and the context length of the next
# load) and the load settings dialog (per model). Every parameter of the table has at least one.
WIDGETS: dict[str, tuple[tuple[str, str], ...]] = {
    **{s.name: (("panel", s.name),) for s in SAMPLING_SPECS},
    "n_ctx": (("panel", "context"), ("dialog", "n_ctx")),
    "threads": (("dialog", "threads"),),
    "gpu_layers": (("dialog", "gpu_layers"),),
    "n_batch": (("dialog", "n_batch"),),
    "threads_batch": (("dialog", "threads_batch"),),
    "kv_cache_type": (("dialog", "kv"),),
    "flash_attn": (("dialog", "flash"),),
    "use_mmap": (("dialog", "mmap"),),
    "use_mlock": (("dialog", "mlock"),),
    "parallel": (),  # the dialog's widget made from the table (dialog.inputs): checked below with the others
}
PLACES = [(SPECS[name], place, attr) for name, places in WIDGETS.items() for place, attr in places]
SPIN_PLACES = [p for p in PLACES if p[0].numeric]
OTHER_PLACES = [p for p in PLACES if not p[0].numeric]


def test_every_parameter_of_the_table_has_a_widget() -> None:
    assert set(WIDGETS) == set(SPECS)


@pytest.mark.parametrize(
    "spec", [s for s in SAMPLING_SPECS + LOAD_SPECS if s.name not in NO_SETTING], ids=lambda s: s.name
)
def test_settings_and_engine_share_each_range(spec: ParamSpec) -> None:
    described = Settings.describe()
    setting = SETTING_FOR.get(spec.name, spec.name)
    assert setting in described, f"no setting for {spec.name}"
    if spec.numeric:
        assert (described[setting]["min"], described[setting]["max"]) == (spec.low, spec.high)
    assert described[setting]["default"] == spec.default


@pytest.mark.parametrize(
    ("spec", "place", "attr"), SPIN_PLACES, ids=[f"{s.name}-{place}" for s, place, _ in SPIN_PLACES]
)
def test_gui_and_engine_share_each_range(
    qtbot: QtBot, tiny_model: Path, spec: ParamSpec, place: str, attr: str
) -> None:
    owner: ParamsPanel | LoadSettingsDialog
    if place == "panel":
        owner = ParamsPanel()
    else:
        current = ModelLoadSettings.from_settings(Settings())
        owner = LoadSettingsDialog("tiny", inspect_gguf(tiny_model), current, free_ram=8 << 30, free_vram=None)
    qtbot.addWidget(owner)
    widget = getattr(owner, attr, None)
    assert isinstance(widget, QSpinBox | QDoubleSpinBox), f"no spin box for {spec.name} in the {place}"
    assert widget.accessibleName() == spec.label
    if spec.name == "gpu_layers":
        # one more choice below the table's -1 (all): "auto", as many as fit, with a tooltip saying so
        assert (widget.minimum(), widget.maximum()) == (AUTO_GPU_LAYERS, spec.high)
        assert widget.specialValueText() == "auto" and "auto" in widget.toolTip()
    else:
        # the panel's seed may be empty (random); a model's saved prompt threads are always a number
        low = spec.low - 1 if spec.optional and place == "panel" else spec.low
        assert (widget.minimum(), widget.maximum()) == (low, spec.high)
        assert widget.toolTip() == spec.description


def test_every_parameter_has_a_spin_box_and_a_setting(qtbot: QtBot) -> None:
    panel = ParamsPanel()
    qtbot.addWidget(panel)
    described = Settings.describe()
    for spec in SAMPLING_SPECS:
        assert getattr(panel, spec.name).accessibleName() == spec.label
        assert spec.name == "seed" or spec.name in described  # a default seed would make every chat alike
    assert panel.context.accessibleName() == SPECS["n_ctx"].label and "context_length" in described


def test_engine_accepts_both_ends_and_refuses_beyond() -> None:
    for spec in SAMPLING_SPECS:
        for ok in (spec.low, spec.high):
            SamplingParams(**{spec.name: spec.kind(ok)})
        with pytest.raises(InvalidParameter, match=spec.noun):
            SamplingParams(**{spec.name: spec.kind(spec.high + 1)})
    for spec in (s for s in LOAD_SPECS if s.numeric):
        LoadConfig("m.gguf", **{spec.name: int(spec.low)})
        with pytest.raises(InvalidParameter, match=spec.noun):
            LoadConfig("m.gguf", **{spec.name: int(spec.low) - 1})
    # the values that used to disagree between places
    assert SPECS["n_ctx"].low == 256 and Settings(context_length=256).context_length == 256
    assert SPECS["top_k"].high == 100_000 and Settings(top_k=5000).top_k == 5000


def test_a_gui_value_at_the_limit_round_trips(qtbot: QtBot) -> None:
    panel = ParamsPanel()
    qtbot.addWidget(panel)
    panel.top_k.setValue(SPECS["top_k"].high)
    assert panel.params().top_k == SPECS["top_k"].high  # not clamped to an older, smaller GUI range
    panel.context.setValue(256)
    assert panel.to_dict()["context_length"] == 256


def test_cli_flags_come_from_the_table() -> None:
    parser = argparse.ArgumentParser()
    add_sampling_flags(parser)
    add_load_flags(parser)
    args = parser.parse_args([])
    for spec in SAMPLING_SPECS:
        assert getattr(args, spec.name) == CLI_DEFAULTS.get(spec.name, spec.default)
    assert (args.n_ctx, args.gpu_layers) == (SPECS["n_ctx"].default, SPECS["gpu_layers"].default)
    args = parser.parse_args(["--top-k", "7", "--min-p", "0.2", "--repeat-penalty", "1.1", "--ctx", "512"])
    assert (args.top_k, args.min_p, args.repeat_penalty, args.n_ctx) == (7, 0.2, 1.1, 512)
    help_text = parser.format_help()
    assert "Sample among the k most likely tokens" in help_text and "0–100,000" in help_text  # plain numbers


def _dialog(qtbot: QtBot, tiny_model: Path, current: ModelLoadSettings) -> LoadSettingsDialog:
    dialog = LoadSettingsDialog("tiny", inspect_gguf(tiny_model), current, free_ram=8 << 30, free_vram=None)
    qtbot.addWidget(dialog)
    return dialog


@pytest.mark.parametrize(
    ("spec", "attr"), [(s, a) for s, _, a in OTHER_PLACES], ids=[s.name for s, _, _ in OTHER_PLACES]
)
def test_the_dialog_names_each_switch_and_choice_as_the_table(
    qtbot: QtBot, tiny_model: Path, spec: ParamSpec, attr: str
) -> None:
    widget = getattr(_dialog(qtbot, tiny_model, ModelLoadSettings.from_settings(Settings())), attr)
    assert isinstance(widget, QCheckBox if spec.kind is bool else QComboBox), f"no widget for {spec.name}"
    assert (widget.accessibleName(), widget.toolTip()) == (spec.label, spec.description)
    if isinstance(widget, QComboBox):
        assert tuple(widget.itemText(i) for i in range(widget.count())) == spec.choices


def test_the_load_record_is_the_table() -> None:
    """LoadOptions (LoadConfig, a model's saved settings) has one field for each load parameter, with
    the table's default, and nothing else."""
    assert [f.name for f in fields(LoadOptions)] == [s.name for s in LOAD_SPECS]
    assert LoadOptions().options() == {s.name: s.default for s in LOAD_SPECS}
    # LoadConfig adds the files it loads: the model, its projector (images) and its draft model
    # (speculative decoding), which are not parameters
    assert {f.name for f in fields(LoadConfig)} == {s.name for s in LOAD_SPECS} | {"path", "mmproj", "draft_model"}
    # a model's saved settings add its draft model (a file, not a parameter)
    assert {f.name for f in fields(ModelLoadSettings)} == {s.name for s in LOAD_SPECS} | {"draft_model"}


def _other(spec: ParamSpec) -> object:
    """A valid value of a load parameter that is neither its default nor the global settings'."""
    if spec.kind is bool:
        return not spec.default
    if spec.choices:
        return next(c for c in spec.choices if c != spec.default)
    return int(spec.high)


def _set(widget: object, value: object) -> None:
    if isinstance(widget, QCheckBox):
        widget.setChecked(bool(value))
    elif isinstance(widget, QComboBox):
        widget.setCurrentText(str(value))
    else:
        assert isinstance(widget, QSpinBox)
        widget.setValue(int(value))  # type: ignore[call-overload]


@pytest.mark.parametrize("spec", LOAD_SPECS, ids=lambda s: s.name)
def test_each_load_parameter_reaches_the_cli_the_file_and_the_dialog(
    qtbot: QtBot, tiny_model: Path, tmp_path: Path, spec: ParamSpec
) -> None:
    value = _other(spec)
    # the CLI: a flag of its own sets it, and the LoadConfig the flags make carries it
    parser = argparse.ArgumentParser()
    add_load_flags(parser)
    flag = LOAD_FLAGS.get(spec.name, spec.flag)
    argv = [flag] if value is True else ["--no-" + flag[2:]] if value is False else [flag, str(value)]
    if spec.name == "kv_cache_type":
        argv.append("--flash-attn")  # a quantized KV cache needs it
    args = parser.parse_args(argv)
    assert getattr(args, spec.name) == value
    assert getattr(LoadConfig(tiny_model, **load_options_from_args(args)), spec.name) == value
    assert flag in parser.format_help()
    # model_settings.json: saved under the table's name, read back as it was
    path = tmp_path / "model_settings.json"
    store = ModelSettingsStore(path)
    own = replace(ModelLoadSettings.from_settings(Settings()), **{spec.name: value})
    store.save("tiny.gguf", own)
    assert json.loads(path.read_text())["tiny.gguf"][spec.name] == value
    assert store.get("tiny.gguf") == own and store.take_problems() == []
    # the ⚙ dialog: a widget in its form, named by the table, shows the saved value and saves a new one
    shown = _dialog(qtbot, tiny_model, own)
    assert getattr(shown.settings(), spec.name) == value
    dialog = _dialog(qtbot, tiny_model, ModelLoadSettings.from_settings(Settings()))
    widget = dialog.inputs[spec.name]
    assert widget.accessibleName() == spec.label and dialog.form.getWidgetPosition(widget)[0] >= 0
    assert getattr(dialog.settings(), spec.name) != value
    _set(widget, value)
    assert getattr(dialog.settings(), spec.name) == value


def test_a_model_settings_file_reads_as_before(tmp_path: Path) -> None:
    """An entry of the first version (without mmap and mlock) loads with the table's defaults; an entry is
    saved with the same names as before, which is every load parameter of the table."""
    path = tmp_path / "model_settings.json"
    first = {"n_ctx": 2048, "threads": 2, "threads_batch": 3, "gpu_layers": -2, "n_batch": 256,
             "flash_attn": True, "kv_cache_type": "q8_0"}  # fmt: skip
    assert tuple(first) == FIRST_VALUES
    path.write_text(json.dumps({"old.gguf": first, "newer.gguf": {**first, "future_value": 1}}))
    store = ModelSettingsStore(path)
    old = store.get("old.gguf")
    assert old is not None and old == store.get("newer.gguf") and store.take_problems() == []
    assert old.options() == {**first, "use_mmap": True, "use_mlock": False, "parallel": 4}
    store.save("old.gguf", old)
    saved = json.loads(path.read_text())["old.gguf"]
    assert saved == {**first, "use_mmap": True, "use_mlock": False, "parallel": 4}
    assert set(saved) == {s.name for s in LOAD_SPECS}
