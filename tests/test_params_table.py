"""One parameter table: engine validation, settings, the GUI's spin boxes and the CLI flags all agree
with it, so a value saved in one place is never silently clamped or refused in another."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from PySide6.QtWidgets import QDoubleSpinBox, QSpinBox
from pytestqt.qtbot import QtBot

from ember_chat.app.metrics.side_panel import ParamsPanel
from ember_chat.app.models.load_panel import LoadSettingsDialog
from ember_chat.engine.cli.common import CLI_DEFAULTS, add_load_flags, add_sampling_flags
from ember_chat.engine.core.params import LOAD_SPECS, SAMPLING_SPECS, SPECS, LoadConfig, ParamSpec, SamplingParams
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.storage.model_settings import AUTO_GPU_LAYERS, ModelLoadSettings
from ember_chat.engine.storage.settings import Settings

SETTING_FOR = {"n_ctx": "context_length"}
# a default seed would make every chat alike; the batch size is a per-model load setting only
NO_SETTING = {"seed", "n_batch"}
# Where the window sets each parameter: the side panel (sampling, and the context length of the next
# load) and the load settings dialog (per model). Every parameter of the table has at least one.
WIDGETS: dict[str, tuple[tuple[str, str], ...]] = {
    **{s.name: (("panel", s.name),) for s in SAMPLING_SPECS},
    "n_ctx": (("panel", "context"), ("dialog", "n_ctx")),
    "threads": (("dialog", "threads"),),
    "gpu_layers": (("dialog", "gpu_layers"),),
    "n_batch": (("dialog", "n_batch"),),
}
PLACES = [(SPECS[name], place, attr) for name, places in WIDGETS.items() for place, attr in places]


def test_every_parameter_of_the_table_has_a_widget() -> None:
    assert set(WIDGETS) == set(SPECS)


@pytest.mark.parametrize(
    "spec", [s for s in SAMPLING_SPECS + LOAD_SPECS if s.name not in NO_SETTING], ids=lambda s: s.name
)
def test_settings_and_engine_share_each_range(spec: ParamSpec) -> None:
    described = Settings.describe()
    setting = SETTING_FOR.get(spec.name, spec.name)
    assert setting in described, f"no setting for {spec.name}"
    assert (described[setting]["min"], described[setting]["max"]) == (spec.low, spec.high)
    assert described[setting]["default"] == spec.default


@pytest.mark.parametrize(("spec", "place", "attr"), PLACES, ids=[f"{s.name}-{place}" for s, place, _ in PLACES])
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
        low = spec.low - 1 if spec.optional else spec.low
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
    for spec in LOAD_SPECS:
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
