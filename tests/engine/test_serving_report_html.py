"""The serving lab's HTML report (engine/bench/serving/report_html.py, issue 32): a real sweep against a
scripted OpenAI-compatible server on 127.0.0.1 whose model, failure text and workload file are named
with markup becomes one page that parses, says the plain answer first, holds the three plots as inline
SVG with one point per load in each series, and shows every hostile name as text, never as a tag; and
`bench serve --report x.html` writes it (any other suffix: Markdown)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ember_chat.engine.bench.serving.load import LoadPlan
from ember_chat.engine.bench.serving.report import sweep
from ember_chat.engine.bench.serving.report_html import PLOTS, nice_ticks, panels, plot_svg, report_html, text_width
from ember_chat.engine.bench.serving.summary import Slo
from ember_chat.engine.bench.serving.targets import url_target
from ember_chat.engine.bench.serving.workload import sharegpt
from tests.helpers.cli import cli
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk, usage_chunk

HOSTILE_MODEL = "<script>alert('model')</script>"
HOSTILE_ERROR = "<img src=x onerror=alert(1)>"


class Page(HTMLParser):
    """The tags, the text and the plots' markers (per plot, per series) of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: set[str] = set()
        self.text: list[str] = []
        self.plot: str | None = None
        self.markers: dict[str, dict[str, int]] = {}
        self.first_p_class: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.update(name for name, _value in attrs)
        a = dict(attrs)
        if tag == "svg":
            self.plot = a["data-plot"]
            self.markers[self.plot] = {}
        if tag == "p" and self.first_p_class is None:
            self.first_p_class = a.get("class")
        if self.plot is not None and (a.get("class") or "").startswith("m "):
            series = self.markers[self.plot]
            series[a["data-series"]] = series.get(a["data-series"], 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.plot = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def tokens_stream(n: int) -> list[str]:
    return [chunk("a", role="assistant"), *(chunk(" b") for _ in range(n - 1)), chunk(finish="length"),
            usage_chunk(12, n), DONE]  # fmt: skip


@pytest.fixture
def fake() -> FakeOpenAI:
    with FakeOpenAI() as server:
        server.models = [{"id": HOSTILE_MODEL, "object": "model", "owned_by": "tests"}]
        yield server


def parsed(page: str) -> Page:
    p = Page()
    p.feed(page)
    p.close()
    return p


def test_a_real_sweep_is_one_page_with_the_answer_first_three_plots_and_every_name_escaped(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    conversations = [{"conversations": [{"from": "human", "value": f"question {i}"}, {"from": "gpt", "value": "a b"}]}
                     for i in range(12)]  # fmt: skip
    named = tmp_path / "<b>mine&amp;.json"
    named.write_text(json.dumps(conversations))
    fake.stream(tokens_stream(4))
    fake.fail(503, {"error": {"message": HOSTILE_ERROR}}, times=1)
    plans = [LoadPlan(concurrency=c, requests=3, warmup=0) for c in (1, 2, 3)]
    result = sweep(url_target(fake.base_url), sharegpt(named), plans, Slo(ttft_ms=500))
    assert result["context"]["model"] == HOSTILE_MODEL and result["runs"][0]["failed"] == 1
    page = report_html(result)
    p = parsed(page)
    assert p.tags.count("script") == 0 and p.tags.count("img") == 0 and "b" not in p.tags  # (no markup of the run's)
    assert "<script" not in page and "<img" not in page and "<b>" not in page and "mine&amp;amp;" in page
    text = "".join(p.text)
    assert HOSTILE_MODEL in text and HOSTILE_ERROR in text and "<b>mine&amp;" in text  # (said as text)
    assert p.first_p_class == "answer" and result["answer"] in text  # the plain answer first
    assert text.index("Context") < text.index("Figures per load") < text.index("Plots")
    for fact in ("Model", "Engine", "Hardware", "Workload", "Date", "Objective (SLO)", "TTFT ≤ 500 ms"):
        assert fact in text, fact
    # nothing fetched from elsewhere (offline, from an e-mail): no link, source or style from a URL
    assert not {"link", "iframe", "object", "embed"} & set(p.tags) and not {"src", "href"} & p.attributes
    assert "url(" not in page and "@import" not in page
    assert "prefers-color-scheme: dark" in page
    # three plots, one point per load in each series
    assert list(p.markers) == list(PLOTS) and p.tags.count("svg") == 3
    assert p.markers["latency"] == {"TTFT p95 (ms) TTFT p95": 3, "E2E p95 (ms) E2E p95": 3}
    assert p.markers["goodput"] == {
        "requests/s requests/s completed": 3,
        "requests/s goodput: requests/s within the objective": 3,
    }
    assert p.markers["percentiles"] == {
        f"{f} (ms) {q}": 3 for f in ("TTFT", "ITL") for q in ("p50", "p90", "p95", "p99")
    }
    [good] = [s for s in panels(result, "goodput")[0].series if s.name.startswith("goodput")]
    assert [y for _x, y, _l in good.points] == [r["goodput_requests_per_s"] for r in result["runs"]]
    assert [label for _x, _y, label in good.points] == ["concurrency 1", "concurrency 2", "concurrency 3"]


def test_a_cancelled_run_with_no_load_and_figures_that_are_not_numbers_still_make_a_page() -> None:
    empty = {"context": {"model": "m"}, "slo": {"ttft_ms": None}, "answer": "nothing", "runs": [], "loads": []}
    assert parsed(report_html(empty)).tags.count("svg") == 3
    odd = {"runs": [{"load": "x", "ttft_ms": {"p95": "NaN"}, "output_tokens_per_s": float("inf"), "failed": "?"}]}
    page = parsed(report_html(odd))
    assert page.markers["latency"] == {} and "x" in "".join(page.text)
    assert nice_ticks(0.0) == [0.0, 0.25, 0.5, 0.75, 1.0] and nice_ticks(830) == [0, 250, 500, 750, 1000]


class Texts(HTMLParser):
    """Each <text> of an SVG not turned (a rotated axis title stands in its own margin): its x, anchor,
    font size and words."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[float, str, float, str]] = []
        self._open: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open = dict(attrs) if tag == "text" and "transform" not in dict(attrs) else None

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            a = self._open
            self.found.append((float(a["x"] or 0), a.get("text-anchor") or "start", float(a["font-size"] or 0), data))
            self._open = None


def test_every_label_of_the_latency_plot_stays_inside_its_panel() -> None:
    """The fastest load's label ('concurrency 1', right of its point at the axis' end) ran past the SVG's
    right edge and, in the left panel, into the right panel's axis title: it turns left of the point."""
    runs = [{"load": f"concurrency {c}", "concurrency": c, "output_tokens_per_s": tps,
             "ttft_ms": {"p95": ttft}, "e2el_ms": {"p95": ttft * 5}}
            for c, tps, ttft in ((1, 2.7, 3331.0), (2, 1.6, 7655.0), (3, 0.4, 9000.0))]  # fmt: skip
    result = {"runs": runs, "slo": {"ttft_ms": 1000.0, "e2el_ms": 60000.0}}
    texts = Texts()
    texts.feed(plot_svg(result, "latency", "c"))
    panel = 960.0 / 2
    labels = 0
    for x, anchor, size, words in texts.found:
        width = text_width(words, size)
        start = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
        which = min(int(max(start, 0) // panel), 1)  # (the panel the text begins in)
        assert which * panel <= start and start + width <= (which + 1) * panel, (words, x, anchor)
        labels += words.startswith("concurrency")
    assert labels == 6  # (each load's point named in both panels)


def test_bench_serve_report_html_writes_the_page_and_another_suffix_markdown(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.stream(tokens_stream(4))
    out = cli("bench", "serve", "--target", fake.base_url, "--concurrency", "1,2", "--requests", "2", "--warmup", "0",
              "--workload", "short", "--save-result", str(tmp_path / "a.json"), "--report", str(tmp_path / "x.HTML"),
              data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "x.HTML").read_text(encoding="utf-8")
    result = json.loads((tmp_path / "a.json").read_text())
    assert page.startswith("<!DOCTYPE html>") and page == report_html(result)
    assert parsed(page).markers["latency"]["TTFT p95 (ms) TTFT p95"] == 2
    out = cli("bench", "serve", "--help")
    assert ".html" in out.stdout and "Markdown" in out.stdout
