"""The benchmark lab's "Serving" tab (issue 32): a URL typed there (a scripted OpenAI-compatible server on
127.0.0.1) load-tested at each concurrency, the plain answer first, a row per load with the failures'
reasons, the plot, copy, export and the run kept in the data folder; a cancel mid-run keeps the loads
that ran; a ShareGPT file that is not one says why; and the chat starter loaded in the window, served by a
temporary Ember API server of the window, measured for real; repeats shown with each figure's 95 % interval;
and a knob sweep of the chat starter (parallel=1,2) marking the winner, saving it as the model's load
settings, and keeping the settings that ran when cancelled."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCharts import QChart
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.lab.serving_chart import ServingChart
from ember_chat.app.lab.serving_panel import ServingPanel
from ember_chat.app.lab.serving_table import COLUMNS
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.bench.serving.report_html import report_html
from ember_chat.engine.errors import EmberError
from ember_chat.engine.models.starter import CHAT_STARTER
from ember_chat.engine.storage.connections import ConnectionStore
from ember_chat.engine.storage.model_settings import ModelSettingsStore
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk, usage_chunk
from tests.helpers.window import LOAD_TIMEOUT


@pytest.fixture
def fake() -> FakeOpenAI:
    with FakeOpenAI() as server:
        yield server


def tokens_stream(n: int) -> list[str]:
    return [chunk("a", role="assistant"), *(chunk(" b") for _ in range(n - 1)), chunk(finish="length"),
            usage_chunk(12, n), DONE]  # fmt: skip


def panel_for(qtbot: QtBot, tmp_path: Path) -> ServingPanel:
    panel = ServingPanel(None, ConnectionStore(tmp_path / "connections.json"), tmp_path / "data")
    qtbot.addWidget(panel)
    return panel


def aim_at(panel: ServingPanel, url: str, loads: str, requests: int) -> None:
    panel.target.setCurrentIndex(panel.target.findData("url"))
    panel.url.setText(url)
    panel.workload.setCurrentIndex(panel.workload.findData("short"))
    panel.loads.setText(loads)
    panel.requests.setValue(requests)


def run(qtbot: QtBot, panel: ServingPanel, timeout_ms: int = 60_000) -> None:
    with qtbot.waitSignal(panel.run_finished, timeout=timeout_ms):
        panel.run_button.click()


def test_a_url_is_load_tested_per_concurrency_with_the_failures_reasons(
    qtbot: QtBot, tmp_path: Path, fake: FakeOpenAI
) -> None:
    panel = panel_for(qtbot, tmp_path)
    assert not panel.run_button.isEnabled()  # (no model loaded, no service: nothing to run on)
    # the knob sweep unchecked: its check box alone, no empty frame under it (a group box drew one)
    area = panel.sweep_box.parentWidget()
    assert area.sizeHint().height() == panel.sweep_box.sizeHint().height() and panel.knob_area.isHidden()
    aim_at(panel, f"http://127.0.0.1:{fake.port}", "1,2", 4)
    assert panel.contacts.text() == f"Contacts {fake.base_url} (this computer)."
    assert panel.run_button.isEnabled() and not panel.copy_button.isEnabled() and panel.chart_view.isHidden()
    fake.stream(tokens_stream(4))
    fake.fail(503, {"error": {"message": "busy"}}, times=2)  # (the warm-up and one counted request)
    run(qtbot, panel)
    assert panel.status.text().startswith("Done"), panel.status.text()
    result = panel.result
    assert result is not None and [r["load"] for r in result["runs"]] == ["concurrency 1", "concurrency 2"]
    assert not panel.answer.isHidden() and panel.answer.text() == result["answer"]
    assert result["answer"].startswith("test-model on ") and "serves 2 chats at once" in result["answer"]
    table = panel.table
    assert table.rowCount() == 2 and [table.item(r, 0).text() for r in range(2)] == ["concurrency 1", "concurrency 2"]
    failed = table.item(0, COLUMNS.index("Failed"))
    assert failed.text() == "1" and "1 failed: HTTP 503" in failed.toolTip() and "busy" in failed.toolTip()
    assert "concurrency 1 — 1 failed: HTTP 503" in panel.failures.text()
    assert table.item(1, COLUMNS.index("Failed")).text() == "0"
    assert table.item(1, COLUMNS.index("Within SLO")).text() == "100%"
    assert panel.progress.value() == panel.progress.maximum() == 8
    assert len(panel.chart.series()) == 1 + 2 + 1  # the path, a point per load, the TTFT objective
    assert not panel.chart_view.isHidden()
    # kept, copied, exported
    [saved] = (tmp_path / "data" / "benchmarks").glob("serving-*.json")
    assert json.loads(saved.read_text())["runs"] == result["runs"]
    panel.copy_button.click()
    copied = QGuiApplication.clipboard().text()
    assert copied.startswith(result["answer"] + "\n\nLoad\tTTFT p50 / p95 ms") and "\nconcurrency 2\t" in copied
    panel.export(tmp_path / "s.json", "json")
    assert json.loads((tmp_path / "s.json").read_text()) == result
    panel.export(tmp_path / "s.csv", "csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "s.csv").read_text())))
    assert [r["load"] for r in rows] == ["concurrency 1", "concurrency 2"] and rows[0]["failed"] == "1"
    assert "HTTP 503" in rows[0]["failures"]
    # a load the machine was busy for: said once, in the answer (not again under the table); an answer
    # that does not say it (a knob sweep's): under the table
    busy = "busy: 42 % of the CPU was used by other programs during this load"
    shown = json.loads(json.dumps(result))
    for row in [*shown["runs"], *(load["median"] for load in shown.get("loads") or [])]:
        row["busy"] = busy
    shown["answer"] += f" Concurrency 1 — {busy}. Concurrency 2 — {busy}."
    panel.show_result(shown)
    assert busy not in panel.failures.text() and "1 failed: HTTP 503" in panel.failures.text()
    panel.show_result({**shown, "answer": "x"})
    assert panel.failures.text().count(busy) == 2


def test_each_plot_choice_draws_its_series_and_the_html_report_is_exported(
    qtbot: QtBot, tmp_path: Path, fake: FakeOpenAI
) -> None:
    """Latency against throughput (a point per load), goodput against the load (completed and within the
    objective, a point per load), the percentiles per load (TTFT solid, ITL dashed); a theme change keeps
    the plot chosen; Export HTML report writes the engine's page of the result."""
    panel = panel_for(qtbot, tmp_path)
    aim_at(panel, f"http://127.0.0.1:{fake.port}", "1,2,3", 2)
    fake.stream(tokens_stream(4))
    assert not panel.export_html.isEnabled()
    run(qtbot, panel)
    runs = panel.result["runs"]  # type: ignore[index]
    view = panel.chart_view
    assert view.which() == "latency" and len(panel.chart.series()) == 1 + 3 + 1  # path, a point per load, objective
    view.choice.setCurrentIndex(view.choice.findData("goodput"))
    completed, good = panel.chart.series()
    assert (completed.name(), good.name()) == ("requests/s completed", "goodput: requests/s within the objective")
    assert [p.y() for p in completed.points()] == [r["requests_per_s"] for r in runs]
    assert [p.y() for p in good.points()] == [r["goodput_requests_per_s"] for r in runs]
    [x_axis] = panel.chart.axes(Qt.Orientation.Horizontal)
    assert x_axis.categoriesLabels() == ["1", "2", "3"] and x_axis.titleText() == "users at once"
    view.choice.setCurrentIndex(view.choice.findData("percentiles"))

    assert not view.figure.isHidden() and view.figure.currentData() == "ttft"  # (TTFT's or ITL's percentiles)

    def percentiles_drawn() -> None:
        quantiles = ("p50", "p90", "p95", "p99")
        for figure, key, objective in (("TTFT", "ttft_ms", ["TTFT objective"]), ("ITL", "itl_ms", [])):
            view.figure.setCurrentIndex(view.figure.findData(figure.lower()))
            series = panel.chart.series()  # (one figure at a time: the legend holds every line)
            assert [s.name() for s in series] == [f"{figure} {q}" for q in quantiles] + objective
            for s, q in zip(series, quantiles, strict=False):
                assert [p.y() for p in s.points()] == [r[key][q] for r in runs], s.name()
            assert len({s.pen().color().name() for s in series[:4]}) == 4  # (a colour per percentile)
        view.figure.setCurrentIndex(0)

    percentiles_drawn()
    # (an earlier test's window leaves the app's style sheet, which styles the chart's view itself, so a
    # palette set on the panel would not reach it: the window's own theme sets both; here the palette alone)
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication)
    sheet = qapp.styleSheet()
    qapp.setStyleSheet("")
    dark = QPalette(panel.palette())
    dark.setColor(QPalette.ColorRole.Window, QColor("#202124"))
    dark.setColor(QPalette.ColorRole.Base, QColor("#2b2c30"))
    panel.setPalette(dark)  # (a theme change redraws the chosen plot in the theme)
    percentiles_drawn()
    assert panel.chart.theme() == QChart.ChartTheme.ChartThemeDark
    qapp.setStyleSheet(sheet)
    assert panel.export_html.isEnabled()
    panel.export(tmp_path / "s.html", "html")
    page = (tmp_path / "s.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page == report_html(panel.result)  # type: ignore[arg-type]
    assert page.count("<svg") == 3
    view.choice.setCurrentIndex(view.choice.findData("latency"))
    assert view.figure.isHidden()


def test_the_goodput_axis_is_scaled_to_its_figures(qtbot: QtBot) -> None:
    """0.15 requests/s at most: the axis ends at 0.2, not at 1.5 (a floor of 1, then nice numbers, had
    the lines flat on the floor)."""
    view = ServingChart()
    qtbot.addWidget(view)
    view.choice.setCurrentIndex(view.choice.findData("goodput"))
    rows = [{"load": f"concurrency {c}", "concurrency": c, "requests_per_s": rps, "goodput_requests_per_s": good}
            for c, rps, good in ((1, 0.15, 0.04), (2, 0.09, 0.0))]  # fmt: skip
    view.plot({"runs": rows, "slo": {"ttft_ms": 1000.0}})
    [y_axis] = view.chart().axes(Qt.Orientation.Vertical)
    assert y_axis.min() == 0 and y_axis.max() == pytest.approx(0.2) and y_axis.labelFormat() == "%.2f"
    view.plot({"runs": [{**rows[0], "requests_per_s": 830.0}], "slo": {"ttft_ms": None}})
    [y_axis] = view.chart().axes(Qt.Orientation.Vertical)
    assert y_axis.max() == 1000 and y_axis.labelFormat() == "%.0f"


def test_another_computer_is_said_before_the_run_and_a_target_down_stops_it(qtbot: QtBot, tmp_path: Path) -> None:
    from tests.helpers.peer_servers import free_port

    panel = panel_for(qtbot, tmp_path)
    aim_at(panel, "https://gpu-box.example:8000", "1", 1)
    assert "https://gpu-box.example:8000/v1 (another computer: the figures include the network" in panel.contacts.text()
    aim_at(panel, "ftp://127.0.0.1", "1", 1)
    assert not panel.run_button.isEnabled() and "http://" in panel.contacts.text()
    aim_at(panel, f"http://127.0.0.1:{free_port()}", "1", 1)
    run(qtbot, panel)
    assert panel.status.text().startswith("The run stopped: ") and "does not answer" in panel.status.text()
    assert panel.result is None and panel.run_button.isEnabled()
    panel.loads.setText("two")
    panel.run_button.click()
    assert panel.status.text() == "The loads are numbers separated by commas, e.g. 1,2,4."


def test_a_cancel_mid_run_keeps_the_loads_that_ran(qtbot: QtBot, tmp_path: Path, fake: FakeOpenAI) -> None:
    panel = panel_for(qtbot, tmp_path)
    aim_at(panel, fake.base_url, "1,2,4", 3)
    fake.stream(tokens_stream(2), pauses={0: 0.3})
    with qtbot.waitSignal(panel.run_finished, timeout=60_000):
        panel.run_button.click()
        qtbot.waitUntil(lambda: panel.status.text().startswith("Load 2 of 3"), timeout=30_000)  # (a request done)
        panel.cancel_button.click()
    assert panel.status.text().startswith("Cancelled: the loads run are shown"), panel.status.text()
    runs = panel.result["runs"]  # type: ignore[index]
    assert [r["load"] for r in runs] == ["concurrency 1", "concurrency 2"]  # (concurrency 4 never sent)
    assert runs[0]["completed"] == 3 and not runs[0]["cancelled"] and runs[1]["cancelled"]
    assert panel.table.rowCount() == 2 and "cancelled during this load" in panel.failures.text()
    assert panel.copy_button.isEnabled() and panel.run_button.isEnabled()
    assert list((tmp_path / "data" / "benchmarks").glob("serving-*.json"))


def test_a_sharegpt_file_that_is_not_one_says_why(qtbot: QtBot, tmp_path: Path, fake: FakeOpenAI) -> None:
    panel = panel_for(qtbot, tmp_path)
    aim_at(panel, fake.base_url, "1", 1)
    bad = tmp_path / "mine.json"
    bad.write_text('[{"id": 1}]')
    panel.set_workload_file(bad)
    assert panel.workload.currentText() == "ShareGPT: mine.json"
    run(qtbot, panel)
    assert panel.status.text() == 'The run stopped: The workload file mine.json: entry 0 has no "conversations" list.'
    assert fake.generate_requests() == []


def test_the_model_loaded_for_chat_is_served_and_measured(
    qtbot: QtBot, make_window: Callable[..., MainWindow], chat_starter_model: Path
) -> None:
    """The chat starter, served by a temporary Ember API server of the window's engine: a real run."""
    w = make_window()
    w.models.open_benchmark()
    panel: ServingPanel = w.models.benchmark.serving
    assert "Load a model for chat first" in panel.contacts.text() and not panel.run_button.isEnabled()
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        w.welcome.starter.click()
    w.models.benchmark.tabs.setCurrentWidget(panel)  # (shown again: the loaded model is named)
    assert "served by a temporary Ember API server of this window on 127.0.0.1" in panel.contacts.text()
    panel.workload.setCurrentIndex(panel.workload.findData("short"))
    panel.loads.setText("1")
    panel.requests.setValue(2)
    run(qtbot, panel, 180_000)
    assert panel.status.text().startswith("Done"), panel.status.text()
    result = panel.result
    assert result is not None and result["context"]["target"] == "the model loaded for chat"
    assert result["context"]["engine"].startswith("Ember (this window)") and "hardware" in result["context"]
    assert result["context"]["model_sha256"] == CHAT_STARTER.sha256 and result["context"]["quant"] == "Q4_1"
    assert Path(result["context"]["model_file"]).name == CHAT_STARTER.file_name
    [only] = result["runs"]
    assert only["completed"] == 2 and only["failed"] == 0 and only["output_tokens_per_s"] > 0
    assert only["ttft_ms"]["p50"] > 0 and only["tpot_ms"]["p50"] > 0
    assert panel.answer.text() == result["answer"] and "1 chat at a time" in result["answer"]


def test_models_benchmark_brings_back_the_lab_while_a_serving_run_is_on(
    qtbot: QtBot, make_window: Callable[..., MainWindow], fake: FakeOpenAI
) -> None:
    """Before, a serving run did not count as the lab's run: Models ▸ Benchmark… closed the dialog, and
    the run with it, for a fresh one."""
    w = make_window()
    w.models.open_benchmark()
    lab = w.models.benchmark
    panel: ServingPanel = lab.serving
    aim_at(panel, fake.base_url, "1", 2)
    fake.stream(tokens_stream(2), pauses={0: 0.5})
    with qtbot.waitSignal(panel.run_finished, timeout=30_000):
        panel.run_button.click()
        w.models.open_benchmark()
        assert w.models.benchmark is lab and lab.running
        panel.cancel_button.click()
    assert panel.status.text().startswith("Cancelled"), panel.status.text()
    assert not lab.running


def test_repeats_give_each_figure_its_interval(qtbot: QtBot, tmp_path: Path, fake: FakeOpenAI) -> None:
    panel = panel_for(qtbot, tmp_path)
    aim_at(panel, fake.base_url, "1", 2)
    assert not panel.sweep_box.isEnabled() and "Ember's window" in panel.sweep_box.toolTip()
    panel.repeats.setValue(3)
    fake.stream(tokens_stream(4), pauses={1: 0.01})
    run(qtbot, panel)
    assert panel.status.text().startswith("Done"), panel.status.text()
    result = panel.result
    assert result is not None and [r["repeat"] for r in result["runs"]] == [1, 2, 3]
    [load] = result["loads"]
    assert load["repeats"] == 3 and panel.progress.value() == panel.progress.maximum() == 6
    assert panel.table.rowCount() == 1 and panel.table.item(0, 0).text() == "concurrency 1, median of 3"
    low, high = load["interval95"]["ttft_ms"]["p95"]
    ttft = panel.table.item(0, COLUMNS.index("TTFT p50 / p95 ms")).text()
    minus = lambda text: text.replace("-", "\N{MINUS SIGN}")  # noqa: E731
    assert ttft.endswith(minus(f"\n({low:,.0f}–{high:,.0f})")) and " / " in ttft  # (the p95's interval under it)
    low, high = load["interval95"]["output_tokens_per_s"]
    tokens = panel.table.item(0, COLUMNS.index("Output tok/s")).text()
    assert tokens == f"{load['median']['output_tokens_per_s']:.1f}\n" + minus(f"({low:.1f}–{high:.1f})")
    panel.copy_button.click()
    copied = QGuiApplication.clipboard().text()
    assert "\nconcurrency 1, median of 3\t" in copied and f"\t{tokens.replace(chr(10), ' ')}\t" in copied
    # (the plot: the table's row, the repeats as one point at their median, not a point per repeat)
    _path, dot, objective = panel.chart.series()
    assert dot.name() == "concurrency 1" and objective.name() == "TTFT objective"
    [point] = dot.points()
    assert (point.x(), point.y()) == (load["median"]["output_tokens_per_s"], load["median"]["ttft_ms"]["p95"])


def starter_sweep(
    qtbot: QtBot, make_window: Callable[..., MainWindow], requests: int
) -> tuple[MainWindow, ServingPanel]:
    """The window with the chat starter loaded, its Serving tab set for a knob sweep of parallel=1,2 at one
    user (an objective no run misses: the winner is the one with the most goodput)."""
    w = make_window()
    w.models.open_benchmark()
    panel: ServingPanel = w.models.benchmark.serving
    assert not panel.sweep_box.isEnabled() and "Load a model for chat first" in panel.sweep_box.toolTip()
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        w.welcome.starter.click()
    w.models.benchmark.tabs.setCurrentWidget(panel)
    assert panel.sweep_box.isEnabled()
    panel.workload.setCurrentIndex(panel.workload.findData("short"))
    panel.loads.setText("1")
    panel.requests.setValue(requests)
    panel.ttft.setValue(600.0)
    panel.tpot.setValue(60_000.0)
    panel.e2e.setValue(3600.0)
    panel.sweep_box.setChecked(True)
    panel.knob_checks["parallel"].setChecked(True)
    panel.knob_values["parallel"].setText("1,2")
    return w, panel


def test_a_knob_sweep_marks_the_winner_and_saves_it_as_the_models_load_settings(
    qtbot: QtBot, make_window: Callable[..., MainWindow], chat_starter_model: Path
) -> None:
    w, panel = starter_sweep(qtbot, make_window, 2)
    panel.knob_values["parallel"].setText("1,x")
    panel.run_button.click()
    assert panel.status.text() == "Knob sweep, parallel: 'x' is not a whole number."
    panel.knob_values["parallel"].setText("1,2")
    run(qtbot, panel, 300_000)
    assert panel.status.text().startswith("Done"), panel.status.text()
    result = panel.result
    assert result is not None and [s["label"] for s in result["settings"]] == ["parallel=1", "parallel=2"]
    assert result["winner"] in ("parallel=1", "parallel=2") and result["winner"] in result["pareto"]
    labels = [panel.table.item(r, 0).text() for r in range(panel.table.rowCount())]
    assert sorted(labels) == sorted(
        f"parallel={n}:\nconcurrency 1" + (" — ★ winner" if result["winner"] == f"parallel={n}" else
                                          " — on the Pareto front" if f"parallel={n}" in result["pareto"] else "")
        for n in (1, 2)
    )  # fmt: skip
    assert panel.progress.value() == panel.progress.maximum() == 4
    dots = [s.name() for s in panel.chart.series() if s.name() not in ("in load order", "TTFT objective")]
    assert dots == ["parallel=1: concurrency 1", "parallel=2: concurrency 1"]  # (a point per row of the table)
    panel.export(w.data_dir / "sweep.csv", "csv")
    rows = list(csv.DictReader(io.StringIO((w.data_dir / "sweep.csv").read_text())))
    assert [(r["setting"], r["load"]) for r in rows] == [
        ("parallel=1", "concurrency 1"),
        ("parallel=2", "concurrency 1"),
    ]
    assert panel.save_winner.isVisible() and panel.save_winner.text() == "Save as starter's load settings"
    panel.save_winner.click()
    saved = ModelSettingsStore(w.model_settings.path).get("starter")  # (read back from the file)
    assert saved is not None and saved.parallel == result["winner_setting"]["parallel"]
    assert panel.status.text().startswith(f"Saved {result['winner']} as starter's load settings (")
    panel.target.setCurrentIndex(panel.target.findData("url"))
    assert not panel.sweep_box.isEnabled() and "for the model loaded for chat only" in panel.sweep_box.toolTip()


def test_a_knob_sweep_cancelled_keeps_the_settings_that_ran(
    qtbot: QtBot, make_window: Callable[..., MainWindow], chat_starter_model: Path
) -> None:
    _w, panel = starter_sweep(qtbot, make_window, 4)
    with qtbot.waitSignal(panel.run_finished, timeout=300_000):
        panel.run_button.click()
        qtbot.waitUntil(lambda: "parallel=2" in panel.status.text(), timeout=240_000)
        panel.cancel_button.click()
    assert panel.status.text().startswith("Cancelled"), panel.status.text()
    first = panel.result["settings"][0]  # type: ignore[index]
    assert first["label"] == "parallel=1" and first["runs"][0]["completed"] == 4 and not first["runs"][0]["cancelled"]
    assert panel.table.item(0, 0).text().startswith("parallel=1:\nconcurrency 1")


def test_find_servers_lists_what_answered_on_loopback_and_aims_the_run_at_the_one_picked(
    qtbot: QtBot, tmp_path: Path, fake: FakeOpenAI
) -> None:
    """As `bench serve --find`: the usual ports of 127.0.0.1 asked on a worker, what answered listed with
    its models (a server's names shown as text, not markup), the one picked becomes the run's target."""
    from tests.helpers.peer_servers import free_port

    panel = panel_for(qtbot, tmp_path)
    assert panel.find_ports[8080] == "llama-server" and panel.found_list.isHidden()
    nobody = free_port()
    panel.find_ports = {nobody: "", fake.port: "llama-server"}
    fake.models[0]["id"] = "<b>bold</b>"
    panel.find_button.click()
    qtbot.waitUntil(lambda: not panel.found_list.isHidden(), timeout=10_000)
    assert panel.find_button.isEnabled()
    listed = [panel.found_list.itemText(i) for i in range(panel.found_list.count())]
    assert listed[0] == "1 found: pick one"
    assert listed[1].startswith(f"{fake.base_url} (usually llama-server, tests): <b>bold</b>")
    assert panel.found_note.text() == (
        f"1 answered on this computer (127.0.0.1, ports {nobody}, {fake.port} tried): pick one to load-test it."
    )
    assert panel.found_note.textFormat() == Qt.TextFormat.PlainText
    panel.found_list.setCurrentIndex(1)
    panel.found_list.activated.emit(1)
    assert panel.target_kind()[0] == "url" and panel.url.text() == fake.base_url
    assert panel.contacts.text() == f"Contacts {fake.base_url} (this computer)."
    fake.stream(tokens_stream(4))
    panel.workload.setCurrentIndex(panel.workload.findData("short"))
    panel.loads.setText("1")
    panel.requests.setValue(2)
    run(qtbot, panel)
    assert panel.result is not None and panel.result["context"]["base_url"] == fake.base_url
    panel.find_ports = {nobody: ""}
    panel.find_button.click()
    qtbot.waitUntil(lambda: "No server" in panel.found_note.text(), timeout=10_000)
    assert panel.found_note.text() == f"No server answers GET /v1/models on 127.0.0.1 at ports {nobody}."
    assert panel.found_list.isHidden()


def test_two_kept_runs_are_compared_side_by_side(qtbot: QtBot, tmp_path: Path, fake: FakeOpenAI) -> None:
    """The terminal's --compare in the tab: two runs it kept picked, each load both ran with its figures
    in A and B and the ratio; a file that is not one run's result says why."""
    panel = panel_for(qtbot, tmp_path)
    empty = panel.compare_runs()
    assert "Two runs are needed: 0 kept in" in empty.about.text()
    empty.close()
    aim_at(panel, fake.base_url, "1", 2)
    fake.stream(tokens_stream(4))
    run(qtbot, panel)
    first = panel.saved
    aim_at(panel, fake.base_url, "1,2", 2)
    fake.stream(tokens_stream(8))
    run(qtbot, panel)
    second = panel.saved
    assert first is not None and second is not None and first != second
    dialog = panel.compare_runs()
    dialog.pick(first, second)
    assert dialog.compared is not None
    rows = dialog.table_text()
    assert rows[0] == ["concurrency 1", "", "", ""]
    figures = {row[0].strip(): row[1:] for row in rows[1:]}
    a_result, b_result = (json.loads(p.read_text()) for p in (first, second))
    a_tok = a_result["loads"][0]["median"]["output_tokens_per_s"]
    b_tok = b_result["loads"][0]["median"]["output_tokens_per_s"]
    assert figures["output tok/s"][2] == f"{b_tok / a_tok:.2f}"
    assert figures["failed"] == ["0", "0", "—"]  # (a ratio of nothing to nothing: none)
    assert dialog.note.text() == "Only in B: concurrency 2"
    assert dialog.about.text().startswith("A: test-model on ") and first.name in dialog.about.text()
    bad = tmp_path / "data" / "benchmarks" / "serving-99999999-000000.json"
    bad.write_text('{"settings": [], "winner": null}')
    dialog = panel.compare_runs()
    dialog.pick(bad, second)
    assert dialog.compared is None and dialog.table.rowCount() == 0
    assert "is a knob sweep's result (its settings), not one target's runs" in dialog.about.text()


def test_a_speculative_winner_is_said_not_saved(qtbot: QtBot, tmp_path: Path) -> None:
    """Speculative decoding is a chat's setting, not the model's: the knob sweep offers it (the server's
    default), and saving a winner saves its load settings and says the speculative mode was not saved."""
    from ember_chat.engine.core.params import LoadConfig

    store = ModelSettingsStore(tmp_path / "model_settings.json")
    panel = ServingPanel(None, ConnectionStore(tmp_path / "c.json"), tmp_path, model_settings=store,
                         resolve=lambda name: LoadConfig(tmp_path / name))  # fmt: skip
    qtbot.addWidget(panel)
    assert panel.knob_checks["speculative"].text() == "Speculative decoding"
    assert panel.knob_values["speculative"].text() == "off,auto,ngram"
    panel.knob_checks["speculative"].setChecked(True)
    panel.sweep_box.setEnabled(True)
    panel.sweep_box.setChecked(True)
    panel.knob_values["speculative"].setText("off,fast")
    with pytest.raises(EmberError, match="Knob sweep, speculative: 'fast' is not one of off, auto, ngram, draft"):
        panel.knobs()
    panel.result = {"winner": "parallel=2, speculative=off", "winner_setting": {"parallel": 2, "speculative": "off"}}
    panel.measured = (LoadConfig(tmp_path / "m.gguf", n_ctx=1024, threads=1), "m")
    panel.apply_winner()
    saved = ModelSettingsStore(store.path).get("m")
    assert saved is not None and saved.parallel == 2
    assert panel.status.text().startswith("Saved parallel=2 as m's load settings (")
    assert panel.status.text().endswith(
        "Not saved: speculative=off (speculative decoding is a chat's setting, not the model's: set it in the "
        "chat's parameters)."
    )
