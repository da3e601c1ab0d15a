"""One parameter table: engine validation, settings, the GUI's spin boxes and the CLI flags all agree
with it, so a value saved in one place is never silently clamped or refused in another."""

from __future__ import annotations

import argparse

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.metrics.side_panel import ParamsPanel
from ember_chat.engine.cli.common import CLI_DEFAULTS, add_load_flags, add_sampling_flags
from ember_chat.engine.core.params import LOAD_SPECS, SAMPLING_SPECS, SPECS, LoadConfig, SamplingParams
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.settings import Settings

SETTING_FOR = {"n_ctx": "context_length"}
GUI_FOR = {"n_ctx": "context"}


@pytest.mark.parametrize("spec", [s for s in SAMPLING_SPECS + LOAD_SPECS if s.name != "n_batch"], ids=lambda s: s.name)
def test_settings_gui_and_engine_share_each_range(qtbot: QtBot, spec: object) -> None:
    panel = ParamsPanel()
    qtbot.addWidget(panel)
    described = Settings.describe()
    name = spec.name  # type: ignore[attr-defined]
    setting = SETTING_FOR.get(name, name)
    if setting in described:  # settings hold the defaults of every sampling and load parameter but seed
        assert (described[setting]["min"], described[setting]["max"]) == (spec.low, spec.high)  # type: ignore[attr-defined]
        assert described[setting]["default"] == spec.default  # type: ignore[attr-defined]
    widget = getattr(panel, GUI_FOR.get(name, name), None)
    if widget is not None:
        low = spec.low - 1 if spec.optional else spec.low  # type: ignore[attr-defined]
        assert (widget.minimum(), widget.maximum()) == (low, spec.high)  # type: ignore[attr-defined]
        assert widget.toolTip() == spec.description  # type: ignore[attr-defined]


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
