"""Two saved serving-lab results side by side (`bench serve --compare A.json B.json`): each load both
ran, its figures in A and in B and the ratio B/A. A file that is not a result is refused naming why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ember_chat.engine.errors import EmberError

# The figures compared: (name, key in a load's medians, sub-key of a distribution or None)
FIGURES: tuple[tuple[str, str, str | None], ...] = (
    ("TTFT p50 ms", "ttft_ms", "p50"),
    ("TTFT p95 ms", "ttft_ms", "p95"),
    ("TPOT p50 ms", "tpot_ms", "p50"),
    ("TPOT p95 ms", "tpot_ms", "p95"),
    ("ITL p99 ms", "itl_ms", "p99"),
    ("E2E p95 ms", "e2el_ms", "p95"),
    ("requests/s", "requests_per_s", None),
    ("output tok/s", "output_tokens_per_s", None),
    ("goodput req/s", "goodput_requests_per_s", None),
    ("SLO attainment", "slo_attainment", None),
    ("failed", "failed", None),
)


def read_result(path: Path) -> dict[str, Any]:
    """A result saved with `bench serve --save-result`; an EmberError naming what is wrong otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EmberError(f"{path} cannot be read: {exc.strerror or exc}.") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EmberError(f"{path} is not JSON ({exc.msg}, line {exc.lineno}): not a saved serving result.") from None
    if not isinstance(data, dict):
        raise EmberError(f"{path} is a JSON {type(data).__name__}, not a serving result (an object).")
    if "settings" in data and "loads" not in data:
        raise EmberError(f"{path} is a knob sweep's result (its settings), not one target's runs.")
    loads = data.get("loads")
    if not isinstance(loads, list):
        raise EmberError(f"{path} has no `loads` list: not a result saved with `bench serve --save-result`.")
    for i, load in enumerate(loads):
        if (
            not isinstance(load, dict)
            or not isinstance(load.get("load"), str)
            or not isinstance(load.get("median"), dict)
        ):
            raise EmberError(f"{path}: load {i + 1} is not a load's figures (`load` and `median`).")
    if not isinstance(data.get("context"), dict):
        raise EmberError(f"{path} has no `context` object: not a result saved with `bench serve --save-result`.")
    return data


def _figure(median: dict[str, Any], key: str, sub: str | None) -> float | None:
    value = median.get(key)
    if sub is not None:
        value = value.get(sub) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Each load both results ran (by its name), every figure in A and B and the ratio B/A (None where
    either lacks it or A's is 0); the loads only one ran are named."""
    a_loads = {load["load"]: load["median"] for load in a["loads"]}
    b_loads = {load["load"]: load["median"] for load in b["loads"]}
    loads = []
    for name, a_median in a_loads.items():
        if name not in b_loads:
            continue
        rows = []
        for figure, key, sub in FIGURES:
            x, y = _figure(a_median, key, sub), _figure(b_loads[name], key, sub)
            ratio = y / x if x is not None and y is not None and x != 0 else None
            rows.append({"figure": figure, "a": x, "b": y, "ratio": ratio})
        loads.append({"load": name, "figures": rows})

    def who(result: dict[str, Any]) -> dict[str, Any]:
        c = result["context"]
        return {k: c.get(k) for k in ("target", "model", "engine", "hardware", "workload", "date")}

    return {
        "a": who(a),
        "b": who(b),
        "loads": loads,
        "only_a": [n for n in a_loads if n not in b_loads],
        "only_b": [n for n in b_loads if n not in a_loads],
    }
