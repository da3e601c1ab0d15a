"""A sweep's result as one HTML page to share: self-contained (no script, font, image or style from
elsewhere: it opens offline and from an e-mail), light or dark as the reader's system is
(prefers-color-scheme), the plain answer first, then the context, the tables and three plots drawn here
as inline SVG — latency against throughput, goodput against the load, the percentiles per load.

Every string from the run (model, workload, server text, failure reasons) is escaped: a server or a
ShareGPT file names things, and a name is not markup. The plots' data (`panels`) is also what the
window's Serving tab draws, so the page and the tab show the same points."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Any

from ember_chat.engine.bench.serving.report import ATTAINMENT, server_words, settings_words
from ember_chat.engine.bench.serving.summary import Slo

PLOTS = ("latency", "goodput", "percentiles")  # the three plots, in the page's and the tab's order
PERCENTILE_KEYS = ("p50", "p90", "p95", "p99")


@dataclass
class Series:
    name: str
    color: int = 0  # (the same figure in two panels: one colour, one legend entry)
    points: list[tuple[float, float, str]] = field(default_factory=list)  # (x, y, the load's label)


@dataclass
class Panel:
    """One plot area: its series, the axes' titles, the loads' names on x when x is the load's place
    (`categories`, x = 0, 1, …) rather than a figure, and an objective drawn as a dashed line."""

    title: str
    x_title: str
    y_title: str
    series: list[Series]
    categories: list[str] | None = None
    objective: tuple[float, str] | None = None


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def load_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per load: the medians over its repeats (`loads`), or the runs of a result without them;
    a knob sweep's (knobs.knob_sweep): one per setting and load, naming its `setting` (the Serving tab's
    table rows)."""
    settings = result.get("settings")
    if isinstance(settings, list) and settings:
        rows = []
        for setting in (s for s in settings if isinstance(s, dict)):
            for load in setting.get("loads") or []:
                if isinstance(load, dict) and isinstance(load.get("median"), dict):
                    rows.append({**load["median"], "setting": str(setting.get("label", "?"))})
        return rows
    loads = result.get("loads")
    if isinstance(loads, list) and loads:
        rows = [load.get("median") for load in loads if isinstance(load, dict)]
    else:
        rows = result.get("runs") or []
    return [r for r in rows if isinstance(r, dict)]


def _load_axis(rows: list[dict[str, Any]]) -> str:
    if rows and all(_number(r.get("concurrency")) is not None for r in rows):
        return "users at once"
    if rows and all(_number(r.get("request_rate")) is not None for r in rows):
        return "requests/s sent"
    return "load"


def row_label(row: dict[str, Any]) -> str:
    """'concurrency 2', or a knob sweep's 'parallel=2: concurrency 2'."""
    load = str(row.get("load", "?"))
    return f"{row['setting']}: {load}" if row.get("setting") else load


def short_load(row: dict[str, Any]) -> str:
    """'4' (users) or '2/s' (requests per second), else the load's own label; a knob sweep's setting
    before it ('parallel=2 · 4')."""
    if (users := _number(row.get("concurrency"))) is not None:
        short = f"{users:g}"
    elif (rate := _number(row.get("request_rate"))) is not None:
        short = f"{rate:g}/s"
    else:
        short = str(row.get("load", "?"))
    return f"{row['setting']} · {short}" if row.get("setting") else short


def _figure(row: dict[str, Any], key: str, stat: str | None = None) -> float | None:
    value = row.get(key)
    if stat is not None:
        value = value.get(stat) if isinstance(value, dict) else None
    return _number(value)


def panels(result: dict[str, Any], plot: str) -> list[Panel]:
    """The data of one of PLOTS, one point per load in each series (a load without the figure: none)."""
    rows = load_rows(result)
    slo = result.get("slo") if isinstance(result.get("slo"), dict) else {}
    names = [row_label(r) for r in rows]

    def objective(key: str, name: str) -> tuple[float, str] | None:
        limit = _number(slo.get(key))
        return None if limit is None else (limit, name)

    if plot == "latency":
        made = []
        for color, (key, name, limit) in enumerate(
            (("ttft_ms", "TTFT", "TTFT objective"), ("e2el_ms", "E2E", "E2E objective"))
        ):
            line = Series(f"{name} p95", color)
            for r, label in zip(rows, names, strict=True):
                x, y = _figure(r, "output_tokens_per_s"), _figure(r, key, "p95")
                if x is not None and y is not None:
                    line.points.append((x, y, label))
            made.append(
                Panel(
                    f"{name} p95 against throughput",
                    "output tokens/s",
                    f"{name} p95 (ms)",
                    [line],
                    objective=objective(key, limit),
                )
            )
        return made
    if plot == "goodput":
        served = Series("requests/s completed", 1)
        good = Series("goodput: requests/s within the objective", 0)
        for i, (r, label) in enumerate(zip(rows, names, strict=True)):
            if (y := _figure(r, "requests_per_s")) is not None:
                served.points.append((float(i), y, label))
            if (y := _figure(r, "goodput_requests_per_s")) is not None:
                good.points.append((float(i), y, label))
        axis = _load_axis(rows)  # (goodput drawn last: on top where every request met the objective)
        return [Panel(f"Goodput against {axis}", axis, "requests/s", [served, good], [short_load(r) for r in rows])]
    if plot == "percentiles":
        made = []
        for key, name, limit in (("ttft_ms", "TTFT", objective("ttft_ms", "TTFT objective")), ("itl_ms", "ITL", None)):
            lines = []
            for color, stat in enumerate(PERCENTILE_KEYS):
                line = Series(stat, color)  # (the panel says which figure)
                for i, (r, label) in enumerate(zip(rows, names, strict=True)):
                    if (y := _figure(r, key, stat)) is not None:
                        line.points.append((float(i), y, label))
                lines.append(line)
            axis = _load_axis(rows)
            made.append(
                Panel(f"{name} percentiles per load", axis, f"{name} (ms)", lines, [short_load(r) for r in rows], limit)
            )
        return made
    raise ValueError(f"no plot named {plot!r}: {', '.join(PLOTS)}")


# ----- drawing

# Light colours as the SVG's own attributes (an SVG viewer without the page's style sheet sees them);
# the page's style sheet gives each class its colour for light and dark.
LIGHT = {"fg": "#1d1f23", "muted": "#5c6370", "grid": "#d8dbe0", "s": ("#1565c0", "#c2410c", "#2e7d32", "#7b1fa2")}
DARK = {"fg": "#e6e7ea", "muted": "#a4a9b2", "grid": "#3b3f47", "s": ("#6cb4f5", "#fb923c", "#7fd084", "#d39be0")}

STYLE = """
:root { color-scheme: light dark; --fg: %(lfg)s; --bg: #ffffff; --muted: %(lmuted)s; --grid: %(lgrid)s;
  --card: #f3f4f6; --line: #d0d4da; --bad: #b3261e; %(lseries)s }
@media (prefers-color-scheme: dark) {
  :root { --fg: %(dfg)s; --bg: #1b1c20; --muted: %(dmuted)s; --grid: %(dgrid)s; --card: #25272c;
    --line: #3b3f47; --bad: #f2a49d; %(dseries)s }
}
body { margin: 2rem auto; max-width: 62rem; padding: 0 1rem; color: var(--fg); background: var(--bg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; }
h1 { font-size: 1.5rem; margin: 0 0 .75rem; } h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; }
.answer { font-size: 1.15rem; background: var(--card); border-left: 4px solid var(--s0); padding: .75rem 1rem;
  border-radius: 4px; }
table { border-collapse: collapse; margin: .5rem 0; font-variant-numeric: tabular-nums; }
th, td { padding: .3rem .6rem; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; white-space: nowrap; }
.context th { color: var(--muted); font-weight: normal; white-space: nowrap; }
.wide { overflow-x: auto; }
.note { color: var(--muted); } .bad { color: var(--bad); }
figure { margin: 1rem 0 1.5rem; } figcaption { color: var(--muted); font-size: .9rem; }
svg { width: 100%%; height: auto; font-family: inherit; }
svg text { fill: var(--fg); } svg .muted { fill: var(--muted); } svg .grid { stroke: var(--grid); }
svg .axis { stroke: var(--muted); } svg .objective { stroke: var(--fg); }
%(classes)s
"""


def _style() -> str:
    classes = "\n".join(
        f"svg .s{i} {{ stroke: var(--s{i}); }} svg .m.s{i}, svg .key.s{i} {{ fill: var(--s{i}); }}"
        for i in range(len(LIGHT["s"]))
    )

    def series(colors: tuple[str, ...]) -> str:
        return " ".join(f"--s{i}: {c};" for i, c in enumerate(colors))

    return STYLE % {
        "lfg": LIGHT["fg"], "lmuted": LIGHT["muted"], "lgrid": LIGHT["grid"], "lseries": series(LIGHT["s"]),
        "dfg": DARK["fg"], "dmuted": DARK["muted"], "dgrid": DARK["grid"], "dseries": series(DARK["s"]),
        "classes": classes,
    }  # fmt: skip


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2, 2.5 or 5 × 10ⁿ) up to at least `top`."""
    top = top if top > 0 else 1.0
    raw = top / (count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    n = math.ceil(top / step - 1e-9)
    return [i * step for i in range(n + 1)]


def _tick_text(value: float, step: float) -> str:
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    if step < 1 and round(step * 10**digits) % 1:
        digits += 1
    return f"{value:,.{digits}f}"


def text_width(text: str, size: float) -> float:
    """About how wide `text` is drawn at `size` px in a sans-serif font (0.6 em a character: wide enough
    for digits and lower case), to keep a label inside its panel without measuring it."""
    return 0.6 * size * len(text)


def _marker(color: int, x: float, y: float, tip: str, series: str) -> str:
    """A shape per colour (circle, square, triangle, diamond): the series are told apart without colour."""
    shape = color % 4
    attrs = f'class="m s{shape}" fill="{LIGHT["s"][shape]}" data-series="{_e(series)}"'
    tip = f"<title>{_e(tip)}</title>" if tip else ""
    if shape == 0:
        return f'<circle {attrs} cx="{x:.1f}" cy="{y:.1f}" r="4.5">{tip}</circle>'
    if shape == 1:
        return f'<rect {attrs} x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8">{tip}</rect>'
    if shape == 2:
        d = f"M{x:.1f} {y - 5:.1f}L{x + 5:.1f} {y + 4:.1f}L{x - 5:.1f} {y + 4:.1f}Z"
    else:
        d = f"M{x:.1f} {y - 5.5:.1f}L{x + 5:.1f} {y:.1f}L{x:.1f} {y + 5.5:.1f}L{x - 5:.1f} {y:.1f}Z"
    return f'<path {attrs} d="{d}">{tip}</path>'


def _panel_svg(panel: Panel, left: float, top: float, width: float, height: float) -> list[str]:
    """One panel's axes, grid, objective, lines and points, in the box given (the plot area inside)."""
    fg, muted, grid = LIGHT["fg"], LIGHT["muted"], LIGHT["grid"]
    x0, y0, w, h = left + 58, top + 30, width - 72, height - 78
    out = [f'<text x="{left + width / 2:.1f}" y="{top + 14:.1f}" text-anchor="middle" font-size="14" '
           f'font-weight="600" fill="{fg}">{_e(panel.title)}</text>']  # fmt: skip
    ys = [y for s in panel.series for _x, y, _l in s.points]
    if panel.objective is not None:
        ys.append(panel.objective[0])
    y_ticks = nice_ticks(max(ys, default=1.0) * 1.05)
    y_top = y_ticks[-1]
    if panel.categories is not None:
        n = max(len(panel.categories), 1)
        x_min, x_max = -0.5, n - 0.5
        x_ticks = [(float(i), c) for i, c in enumerate(panel.categories)]
    else:
        xs = [x for s in panel.series for x, _y, _l in s.points]
        ticks = nice_ticks(max(xs, default=1.0) * 1.05)
        x_min, x_max = 0.0, ticks[-1]
        step = ticks[1] - ticks[0]
        x_ticks = [(t, _tick_text(t, step)) for t in ticks]

    def px(x: float) -> float:
        return x0 + (x - x_min) / (x_max - x_min) * w

    def py(y: float) -> float:
        return y0 + h - y / y_top * h

    y_step = y_ticks[1] - y_ticks[0]
    for t in y_ticks:
        out.append(f'<line class="grid" x1="{x0:.1f}" x2="{x0 + w:.1f}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
                   f'stroke="{grid}" stroke-width="1"/>')  # fmt: skip
        out.append(f'<text class="muted" x="{x0 - 6:.1f}" y="{py(t) + 4:.1f}" text-anchor="end" font-size="11" '
                   f'fill="{muted}">{_tick_text(t, y_step)}</text>')  # fmt: skip
    for t, label in x_ticks:
        out.append(f'<text class="muted" x="{px(t):.1f}" y="{y0 + h + 16:.1f}" text-anchor="middle" font-size="11" '
                   f'fill="{muted}">{_e(label)}</text>')  # fmt: skip
    out.append(f'<path class="axis" d="M{x0:.1f} {y0:.1f}V{y0 + h:.1f}H{x0 + w:.1f}" fill="none" stroke="{muted}"/>')
    out.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 + h + 34:.1f}" text-anchor="middle" font-size="12" '
               f'fill="{fg}">{_e(panel.x_title)}</text>')  # fmt: skip
    out.append(f'<text x="{left + 12:.1f}" y="{y0 + h / 2:.1f}" text-anchor="middle" font-size="12" fill="{fg}" '
               f'transform="rotate(-90 {left + 12:.1f} {y0 + h / 2:.1f})">{_e(panel.y_title)}</text>')  # fmt: skip
    if panel.objective is not None:
        limit, name = panel.objective
        out.append(f'<line class="objective" x1="{x0:.1f}" x2="{x0 + w:.1f}" y1="{py(limit):.1f}" '
                   f'y2="{py(limit):.1f}" stroke="{fg}" stroke-width="1.2" stroke-dasharray="6 4">'
                   f"<title>{_e(name)}: {limit:g} ms</title></line>")  # fmt: skip
        out.append(f'<text class="muted" x="{x0 + w - 4:.1f}" y="{py(limit) - 5:.1f}" text-anchor="end" '
                   f'font-size="11" fill="{muted}">{_e(name)} {limit:g} ms</text>')  # fmt: skip
    for s in panel.series:
        c = s.color % 4
        if len(s.points) > 1:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _l in s.points)
            out.append(
                f'<polyline class="s{c}" points="{path}" fill="none" stroke="{LIGHT["s"][c]}" stroke-width="2"/>'
            )
        for x, y, label in s.points:
            out.append(_marker(c, px(x), py(y), f"{label} — {s.name}: {y:,.1f}", f"{panel.y_title} {s.name}"))
        if panel.categories is None and len(panel.series) == 1:  # (x is a figure: say which load each point is)
            for x, y, label in s.points:
                # (right of the point, or left of it where it would pass the plot's right edge: cut off at
                # the page's edge, or over the next panel's axis title)
                right = px(x) + 7 + text_width(label, 11) <= x0 + w
                at, anchor = (px(x) + 7, "start") if right else (px(x) - 7, "end")
                out.append(f'<text class="muted" x="{at:.1f}" y="{py(y) - 7:.1f}" text-anchor="{anchor}" '
                           f'font-size="11" fill="{muted}">{_e(label)}</text>')  # fmt: skip
    return out


def plot_svg(result: dict[str, Any], plot: str, caption: str) -> str:
    """One of PLOTS as an inline SVG: its panels side by side, one legend above them."""
    drawn = panels(result, plot)
    width, height, legend_h = 960.0, 330.0, 26.0
    each = width / len(drawn)
    keys: dict[str, int] = {}
    for p in drawn:
        keys.update((s.name, s.color) for s in p.series if s.name not in keys)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height + legend_h:.0f}" '
           f'role="img" aria-label="{_e(caption)}" data-plot="{plot}">']  # fmt: skip
    x = 58.0
    for name, color in keys.items():
        out.append(_marker(color, x + 6, 12, "", "legend").replace('class="m ', 'class="key '))
        out.append(f'<text x="{x + 17:.1f}" y="16.5" font-size="12" fill="{LIGHT["fg"]}">{_e(name)}</text>')
        x += 17 + 7.0 * len(name) + 22
    for k, p in enumerate(drawn):
        out += _panel_svg(p, k * each, legend_h, each, height)
    out.append("</svg>")
    return "\n".join(out)


# ----- the page


def _cell(value: object, digits: int = 0) -> str:
    number = _number(value)
    return "—" if number is None else f"{number:,.{digits}f}"


def _context_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    context = result.get("context") if isinstance(result.get("context"), dict) else {}
    slo = result.get("slo") if isinstance(result.get("slo"), dict) else {}
    objective = Slo(_number(slo.get("ttft_ms")), _number(slo.get("tpot_ms")), _number(slo.get("e2el_ms"))).describe()
    workload = " — ".join(str(w) for w in (context.get("workload"), context.get("workload_description")) if w)
    facts = [
        ("Model", context.get("model")),
        ("Model file", context.get("model_file") or context.get("model_path")),
        ("File hash (SHA-256)", context.get("file_sha256") or context.get("model_sha256")),
        ("Quantisation", context.get("quant") or context.get("quantization")),
        ("Target", context.get("target")),
        ("Engine", context.get("engine")),
        ("Engine version", context.get("engine_version")),
        ("Hardware", context.get("hardware") or f"not this machine ({context.get('base_url')})"),
        ("Threads", context.get("threads")),
        ("Load settings", settings_words(context.get("load_settings"))),
        ("Workload", workload),
        ("Date", context.get("date")),
        ("Objective (SLO)", f"{objective}, for {ATTAINMENT:.0%} of requests"),
    ]
    return [(name, str(value)) for name, value in facts if value not in (None, "")]


def report_html(result: dict[str, Any]) -> str:
    """A sweep's result (as report.sweep gives it, or read back from --save-result) as one HTML page."""
    rows = load_rows(result)
    context = result.get("context") if isinstance(result.get("context"), dict) else {}
    title = f"Serving lab report — {context.get('model', 'a model')}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="color-scheme" content="light dark">',
        f"<title>{_e(title)}</title>",
        f"<style>{_style()}</style>",
        "</head><body>",
        "<h1>Serving lab report</h1>",
        f'<p class="answer">{_e(result.get("answer", ""))}</p>',
        '<h2>Context</h2><table class="context">',
    ]
    out += [f"<tr><th>{_e(name)}</th><td>{_e(value)}</td></tr>" for name, value in _context_rows(result)]
    out.append("</table>")

    out += ['<h2>Figures per load</h2><div class="wide"><table class="figures"><thead><tr>']
    heads = ["Load", "TTFT p50 ms", "TTFT p95 ms", "TPOT p50 ms", "TPOT p95 ms", "ITL p95 ms", "E2E p95 ms",
             "Requests/s", "Output tok/s", "Goodput req/s", "Within SLO", "Completed", "Failed"]  # fmt: skip
    out.append("".join(f"<th{'' if i == 0 else ' class=n'}>{h}</th>" for i, h in enumerate(heads)))
    out.append("</tr></thead><tbody>")
    repeats = [load.get("repeats", 1) for load in result.get("loads") or [] if isinstance(load, dict)]
    for r in rows:
        attained = _number(r.get("slo_attainment"))
        cells = [
            _cell(_figure(r, "ttft_ms", "p50")), _cell(_figure(r, "ttft_ms", "p95")),
            _cell(_figure(r, "tpot_ms", "p50")), _cell(_figure(r, "tpot_ms", "p95")),
            _cell(_figure(r, "itl_ms", "p95")), _cell(_figure(r, "e2el_ms", "p95")),
            _cell(r.get("requests_per_s"), 2), _cell(r.get("output_tokens_per_s"), 1),
            _cell(r.get("goodput_requests_per_s"), 2), "—" if attained is None else f"{attained:.0%}",
            _cell(r.get("completed")), _cell(r.get("failed")),
        ]  # fmt: skip
        failed = _number(r.get("failed"))
        out.append(f"<tr><td>{_e(row_label(r))}</td>")
        out.append("".join(
            f'<td class="n{" bad" if k == len(cells) - 1 and failed else ""}">{c}</td>' for k, c in enumerate(cells)
        ) + "</tr>")  # fmt: skip
    out.append("</tbody></table></div>")
    if any(isinstance(n, int) and n > 1 for n in repeats):
        out.append(f'<p class="note">Each load is the median of its repeats ({max(repeats)} at most).</p>')

    out.append("<h2>Plots</h2>")
    captions = {
        "latency": "Latency against throughput: each load's p95 TTFT and E2E latency against its output "
        "tokens/s; the dashed line is the objective. Up and to the left of the line is a load served.",
        "goodput": "Goodput against the load: requests/s that met the objective beside all requests/s "
        "completed; the gap is requests that were answered too slowly or failed.",
        "percentiles": "Percentiles per load: p50, p90, p95 and p99 of the time to the first token and of "
        "the gaps between tokens (ITL); a tail that grows faster than the median is queueing.",
    }
    for plot in PLOTS:
        out.append(f"<figure>{plot_svg(result, plot, captions[plot])}<figcaption>{_e(captions[plot])}"
                   "</figcaption></figure>")  # fmt: skip

    out.append("<h2>Percentiles per load</h2>")
    for r in rows:
        out.append(f"<h3>{_e(row_label(r))}</h3>")
        out.append('<div class="wide"><table><thead><tr><th>figure</th>'
                   + "".join(f"<th class=n>{s}</th>" for s in ("mean", "p50", "p90", "p95", "p99"))
                   + "</tr></thead><tbody>")  # fmt: skip
        for name, key in (("TTFT ms", "ttft_ms"), ("TPOT ms", "tpot_ms"), ("ITL ms", "itl_ms"), ("E2E ms", "e2el_ms")):
            out.append(f"<tr><td>{name}</td>" + "".join(
                f"<td class=n>{_cell(_figure(r, key, s))}</td>" for s in ("mean", "p50", "p90", "p95", "p99")
            ) + "</tr>")  # fmt: skip
        out.append("</tbody></table></div>")
        notes = []
        if said := server_words(r):
            notes.append(f"{said[0].upper()}{said[1:]}.")
        failures = r.get("failures") if isinstance(r.get("failures"), dict) else {}
        notes += [f"{count} failed: {reason}" for reason, count in failures.items()]
        if r.get("saturated"):
            notes.append(f"Stopped, saturated: {r['saturated']}")
        if r.get("cancelled"):
            notes.append("Cancelled during this load.")
        if r.get("busy"):
            notes.append(f"Note — {r['busy']}.")
        out += [f'<p class="note">{_e(n)}</p>' for n in notes]
    out.append('<p class="note">Made by Ember\'s serving lab. TTFT: time to the first token; TPOT: time per '
               "output token after the first; ITL: the gaps between streamed tokens; E2E: the whole answer; "
               "goodput: requests/s that met every objective.</p>")  # fmt: skip
    out.append("</body></html>")
    return "\n".join(out) + "\n"
