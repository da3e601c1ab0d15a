"""The side panel: live metrics with a small chart of tokens/s over the current answer and session
percentiles, and the parameters (params_panel.py: system prompt and sampling parameters, saved per
conversation)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QElapsedTimer, QEvent, Qt, QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QLabel,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.qt.layout_boundary import LayoutBoundary
from ember_chat.app.side_panel.context_meter import ContextMeter
from ember_chat.app.side_panel.params_panel import ParamsPanel
from ember_chat.app.side_panel.project_why import ProjectWhy
from ember_chat.app.side_panel.speed_chart import SpeedChart
from ember_chat.engine.inference.events import KnowledgeUsed
from ember_chat.engine.inference.metrics import GenerationMetrics, percentile
from ember_chat.engine.projects.records import Project

SESSION_TTFT_SAMPLES = 1_000
SESSION_ITL_SAMPLES = 20_000

CONTEXT_UPDATE_MS = 500
CHART_MAX_HEIGHT = 380  # px: on a tall screen the rest stays empty below the figures
LIVE_UPDATE_MS = 500  # the running figures and the chart twice a second (each update repaints labels and the chart)


def _fmt(value: float | None, unit: str, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f} {unit}"


class MetricsPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        live = QGroupBox(self.tr("Current answer"))
        form = self.live_form = QFormLayout(live)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # a narrow panel: the value under its label
        self.ttft = QLabel("—")
        self.decode = QLabel("—")
        self.prefill = QLabel("—")
        self.output = QLabel("—")
        self.thinking = QLabel("—")
        self.thinking.setToolTip(self.tr("Output tokens spent thinking, and when the answer proper began"))
        self.speculative = QLabel()
        self.speculative.setToolTip(
            self.tr(
                "Speculative decoding: of the tokens drafted from the conversation (the second figure), "
                "the share the model accepted"
            )
        )
        self.speedup = QLabel()  # (a row of its own: beside the share, the value was wider than its column)
        self.speedup.setToolTip(
            self.tr(
                "How much faster the answer was decoded with speculative decoding than it would have been "
                "without it. 'Stopped': Auto was not drafting at the end of the answer, as it did not pay"
            )
        )
        self.context = ContextMeter()  # (the number beside its bar, never under the fill)
        self.context.bar.setAccessibleName(self.tr("Context used"))
        self._show_no_context()
        for label, w in (
            (self.tr("Time to first token"), self.ttft),
            (self.tr("Decode"), self.decode),
            (self.tr("Prefill"), self.prefill),
            (self.tr("Output tokens"), self.output),
            (self.tr("Thinking"), self.thinking),
            (self.tr("Speculative"), self.speculative),
            (self.tr("Speedup"), self.speedup),
            (self.tr("Context"), self.context),
        ):
            w.setAccessibleName(label)
            form.addRow(label, w)
        self._show_speculation(None)  # only for an answer where speculation ran
        layout.addWidget(LayoutBoundary(live))

        self.why = QLabel()
        self.why.setWordWrap(True)
        self.why.hide()  # until an answer has its figures
        self.why.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.why.setAccessibleName(self.tr("Why this speed"))
        self.why.setToolTip(self.tr("What the last answer's prompt and model cost: the figures behind its speed"))
        layout.addWidget(self.why)
        self.project_why = ProjectWhy()  # a project chat's answer: its instructions and sources
        layout.addWidget(self.project_why)

        self.chart = SpeedChart()
        # the chart takes the spare height, up to a size where it still reads as a small chart
        self.chart.view.setMaximumHeight(CHART_MAX_HEIGHT)
        layout.addWidget(self.chart.view, 1)

        session = self.session_box = QGroupBox(self.tr("This session"))
        sform = self.session_form = QFormLayout(session)
        sform.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.session_ttft = QLabel("—")
        self.session_itl = QLabel("—")
        self.session_ttft.setAccessibleName(self.tr("Session TTFT percentiles"))
        self.session_itl.setAccessibleName(self.tr("Session inter-token latency percentiles"))
        sform.addRow(self.tr("TTFT p50/p95/p99"), self.session_ttft)
        sform.addRow(self.tr("ITL p50/p95/p99"), self.session_itl)
        self._reserve_session_widths()
        layout.addWidget(session)

        # dictation's figures (voice/dictation.py computes them; shown here as they come, and kept after)
        dictating = self.dictation_box = QGroupBox(self.tr("Dictation"))
        dform = QFormLayout(dictating)
        dform.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.dictation_rtf = QLabel("—")
        self.dictation_first = QLabel("—")
        self.dictation_words = QLabel("—")
        self.dictation_model = QLabel("—")
        self.dictation_rtf.setToolTip(
            self.tr("Recognition time over the sound it read: under 1, recognition keeps up with the speaker")
        )
        self.dictation_first.setToolTip(self.tr("From the first sound heard to the first words in the box"))
        self.dictation_words.setToolTip(self.tr("Words recognised per second of sound heard"))
        for label, w in (
            (self.tr("Real-time factor"), self.dictation_rtf),
            (self.tr("First words"), self.dictation_first),
            (self.tr("Words/s"), self.dictation_words),
            (self.tr("Model"), self.dictation_model),
        ):
            w.setAccessibleName(label)
            dform.addRow(label, w)
        dictating.hide()  # (until a dictation)
        layout.insertWidget(0, dictating)  # (on top: seen while dictating, the tab scrolling on a short window)
        layout.addStretch(0)  # (what a capped chart leaves: below everything, not between)

        # The session's percentiles are over its latest answers and tokens: bounded, so a long session
        # neither grows without end nor makes the sort after each answer slower and slower.
        self._ttft_samples: deque[float] = deque(maxlen=SESSION_TTFT_SAMPLES)
        self._itl_samples: deque[float] = deque(maxlen=SESSION_ITL_SAMPLES)
        self.session_ttft.setToolTip(
            self.tr("Time to first token over this session's last {n} answers").format(n=f"{SESSION_TTFT_SAMPLES:,}")
        )
        self.session_itl.setToolTip(
            self.tr("Inter-token latency over this session's last {n} tokens").format(n=f"{SESSION_ITL_SAMPLES:,}")
        )
        self._clock = QElapsedTimer()
        self._context_clock = QElapsedTimer()
        self._live_clock = QElapsedTimer()
        self._prefill: tuple[int, int] | None = None
        self._waiting = QTimer(self)
        self._waiting.setInterval(100)
        self._waiting.timeout.connect(self._tick)

    def _reserve_session_widths(self) -> None:
        """The session's percentiles keep the width of four-digit figures in the font in use, so the
        panel's minimum width (and the window's first layout) leaves them room whole, whatever the
        system font's width (DejaVu Sans is a tenth wider than Noto Sans): the row then puts the value
        under its label rather than cutting it."""
        widest = self._pcts(deque([8888.8]), 1.0, "ms")
        for value in (self.session_ttft, self.session_itl):
            value.setMinimumWidth(value.fontMetrics().horizontalAdvance(widest))

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.FontChange:
            self._reserve_session_widths()
        super().changeEvent(event)

    def reset(self) -> None:
        """Another chat is open: "Current answer" starts over (the session's figures stay)."""
        self._waiting.stop()
        self.chart.begin()
        for w in (self.ttft, self.decode, self.prefill, self.output, self.thinking):
            w.setText("—")
        self.why.hide()
        self.why.clear()
        self.project_why.clear()
        self._show_speculation(None)
        self._show_no_context()

    def show_project(self, project: Project | None, used: KnowledgeUsed | None) -> None:
        """Why this answer: the project it was made in, its instructions and sources (project_why.py)."""
        self.project_why.show_project(project, used)

    def follow_project(self, read: Callable[[int], Project | None]) -> None:
        """A project may be renamed: Why this answer names it as `read(folder_id)` has it now."""
        self.project_why.follow_project(read)

    def show_dictation(
        self,
        listening: bool,
        real_time_factor: float,
        first_words_s: float | None,
        words_per_s: float,
        model: str | None,
        threads: int,
    ) -> None:
        """A dictation's figures, while it listens ("Dictation — listening") and after it (the last one's)."""
        if not listening and model is None and self.dictation_box.isHidden():
            return  # (no dictation yet: nothing to show)
        self.dictation_box.setTitle(self.tr("Dictation — listening") if listening else self.tr("Last dictation"))
        self.dictation_rtf.setText(f"{real_time_factor:.2f}" if real_time_factor > 0 else "—")
        self.dictation_first.setText(_fmt(first_words_s, "s"))
        self.dictation_words.setText(f"{words_per_s:.1f}" if words_per_s > 0 else "—")
        self.dictation_model.setText(
            self.tr("{model}, {threads} threads").format(model=model, threads=threads) if model else "—"
        )
        self.dictation_box.show()

    def _show_speculation(self, m: GenerationMetrics | None) -> None:
        """The Speculative and Speedup rows: shown for an answer where speculation drafted."""
        drafted = m is not None and bool(m.speculative_drafted)
        if m is not None and drafted:
            share = m.speculative_share()
            self.speculative.setText(self.tr("{percent} % of {drafted} accepted").format(**share))
            speedup = self.tr("{speedup}×").format(**share) if share["speedup"] else "—"
            self.speedup.setText(
                self.tr("{speedup} · stopped").format(speedup=speedup) if m.speculative_stopped else speedup
            )
        self.live_form.setRowVisible(self.speculative, drafted)
        self.live_form.setRowVisible(self.speedup, drafted)

    def _show_no_context(self) -> None:
        self.context.show_text(self.tr("no answer yet"))

    def begin(self) -> None:
        self.chart.begin()
        for w in (self.decode, self.prefill, self.output, self.thinking):
            w.setText("—")
        self.why.hide()
        self._show_speculation(None)
        self.ttft.setText(self.tr("{s:.1f} s …").format(s=0.0))
        self._clock.start()
        self._prefill: tuple[int, int] | None = None
        self._live_clock.invalidate()
        self._waiting.start()

    def _tick(self) -> None:
        elapsed = self._clock.elapsed() / 1000
        if self._prefill is None:
            self.ttft.setText(self.tr("{s:.1f} s …").format(s=elapsed))
            return
        done, total = self._prefill  # a long prompt: its progress and the time left at this pace
        left = elapsed * (total - done) / done if done else 0.0
        self.ttft.setText(
            self.tr("{s:.1f} s … prompt {pct} %, {left:.0f} s left").format(
                s=elapsed, pct=done * 100 // total, left=left
            )
        )

    def show_prefill(self, done: int, total: int) -> None:
        self._prefill = (done, total)
        self._tick()

    def update_live(self, snap: dict[str, Any]) -> None:
        """TTFT and prefill as soon as the first token is there; the running figures and the chart at
        most every LIVE_UPDATE_MS (each repaint of a label or the chart is CPU the model could use;
        the final figures replace them exactly)."""
        if snap.get("ttft_s") is not None and self._waiting.isActive():
            self._waiting.stop()
            self.ttft.setText(_fmt(snap["ttft_s"], "s"))
            self.chart.first_token(snap["ttft_s"])
            if snap.get("prefill_tokens_per_s") is not None:
                self.prefill.setText(_fmt(snap["prefill_tokens_per_s"], "tok/s", 1))
        if self._live_clock.isValid() and self._live_clock.elapsed() < LIVE_UPDATE_MS:
            return
        self._live_clock.start()
        tps = snap.get("decode_tokens_per_s")
        if tps is not None:
            self.decode.setText(_fmt(tps, "tok/s", 1))
            self.chart.add(snap.get("elapsed_s") or 0.0, tps, int(snap.get("output_tokens") or 0))
        self.output.setText(str(snap.get("output_tokens", 0)))
        self.thinking.setText(self._thinking_text(snap.get("thinking_tokens") or 0, snap.get("ttfat_s")))
        if snap.get("n_ctx"):
            self._show_context(int(snap["context_used"]), int(snap["n_ctx"]), live=True)

    def _show_context(self, used: int, n_ctx: int, live: bool) -> None:
        """QProgressBar repaints itself at once on every change, outside the window's next repaint
        (a paint and a flush of its own): while streaming, at most twice a second, the range only
        when it changes, and with updates off meanwhile, so the bar is repainted with the rest."""
        if live and self._context_clock.isValid() and self._context_clock.elapsed() < CONTEXT_UPDATE_MS:
            return
        self._context_clock.start()
        value = min(used, n_ctx)
        if self.context.maximum() == n_ctx and self.context.value() == value:
            return
        self.context.setUpdatesEnabled(False)
        if self.context.maximum() != n_ctx:
            self.context.reserve(self.tr("{used} / {n_ctx} tokens").format(used=f"{n_ctx:,}", n_ctx=f"{n_ctx:,}"))
        text = self.tr("{used} / {n_ctx} tokens").format(used=f"{value:,}", n_ctx=f"{n_ctx:,}")
        self.context.show_used(value, n_ctx, text)
        self.context.setUpdatesEnabled(True)  # (schedules the repaint)

    def finish(self, m: GenerationMetrics | None, itl_ms: list[float]) -> None:
        self._waiting.stop()
        if m is None:
            if self.ttft.text().endswith("…"):
                self.ttft.setText("—")
            return
        self.chart.finish(m, itl_ms)
        self._show_figures(m)
        if m.ttft_s is not None:
            self._ttft_samples.append(m.ttft_s)
        self._itl_samples.extend(itl_ms)
        self.session_ttft.setText(self._pcts(self._ttft_samples, 1000.0, "ms"))
        self.session_itl.setText(self._pcts(self._itl_samples, 1.0, "ms"))

    def show_saved(self, m: GenerationMetrics | None, project: Project | None, used: KnowledgeUsed | None) -> None:
        """A chat opened: its last answer as it was right after it was made (conversation/last_answer.py),
        the figures its metrics kept and, in a project's chat, Why this answer — the project. The session's
        figures stay this session's answers' (an answer shown again is not one more)."""
        if m is not None:
            self._show_figures(m)
        self.show_project(project, used)

    def _show_figures(self, m: GenerationMetrics) -> None:
        """An answer's final figures, its why line and its context."""
        self.ttft.setText(_fmt(m.ttft_s, "s"))
        self.decode.setText(_fmt(m.decode_tokens_per_s, "tok/s", 1))
        self.prefill.setText(_fmt(m.prefill_tokens_per_s, "tok/s", 1))
        self.output.setText(str(m.output_tokens))
        self.thinking.setText(self._thinking_text(m.thinking_tokens, m.ttfat_s))
        self._show_speculation(m)
        self.why.setText(self.why_text(m))
        self.why.show()
        self._show_context(m.context_used, m.n_ctx, live=False)

    def why_text(self, m: GenerationMetrics) -> str:
        """Why this answer was as fast as it was, in one line: prompt evaluated vs reused, trimming,
        thinking, and where it ran."""
        evaluated = m.prompt_tokens - m.prompt_tokens_reused
        restored = m.prompt_tokens_restored  # (of the reused: from a saved conversation cache, a KV snapshot)
        if restored:
            prompt = self.tr("Prompt: {restored} tokens restored from a snapshot, {evaluated} evaluated").format(
                restored=f"{restored:,}", evaluated=f"{evaluated:,}"
            )
            if m.prompt_tokens_reused > restored:
                prompt += self.tr(", {reused} reused from the cache").format(
                    reused=f"{m.prompt_tokens_reused - restored:,}"
                )
        else:
            prompt = (
                self.tr("Prompt: {evaluated} token evaluated, {reused} reused from the cache")
                if evaluated == 1
                else self.tr("Prompt: {evaluated} tokens evaluated, {reused} reused from the cache")
            ).format(evaluated=f"{evaluated:,}", reused=f"{m.prompt_tokens_reused:,}")
        parts = [prompt]
        if m.dropped_messages == 1:
            parts.append(self.tr("1 old message left out to fit the context"))
        elif m.dropped_messages:
            parts.append(self.tr("{n} old messages left out to fit the context").format(n=m.dropped_messages))
        else:
            parts.append(self.tr("nothing left out"))
        if m.thinking_tokens:
            parts.append(
                self.tr("{n} of {total} tokens were thinking").format(n=m.thinking_tokens, total=m.output_tokens)
            )
        if m.image_encode_ms:
            parts.append(self.tr("images encoded in {ms} ms").format(ms=f"{m.image_encode_ms:,.1f}"))
        elif m.image_encode_ms is not None:
            parts.append(self.tr("images from the cache (not encoded again)"))
        if m.speculative_off:
            parts.append(self._speculation_off_text(m.speculative_off))
        if m.connection:
            parts.append(self.tr("remote: {name}").format(name=m.connection))
        else:
            text = (
                self.tr("{backend}, 1 thread, {layers} GPU layers")
                if m.threads == 1
                else self.tr("{backend}, {threads} threads, {layers} GPU layers")
            )
            parts.append(text.format(backend=m.backend, threads=m.threads, layers=m.gpu_layers))
        return " · ".join(parts)

    def _speculation_off_text(self, why: str) -> str:
        """Why speculative decoding, asked for, did not run (speculative.OFF_*)."""
        texts = {
            "grammar": self.tr("no speculation: a grammar or JSON format constrains the answer"),
            "images": self.tr("no speculation: the prompt has images"),
            "logprobs": self.tr("no speculation: log-probabilities were asked for"),
            "recurrent": self.tr("no speculation: this model's memory cannot take back a rejected draft"),
        }
        return texts.get(why, self.tr("no speculation: {why}").format(why=why))

    def _thinking_text(self, tokens: int, ttfat_s: float | None) -> str:
        """e.g. '212 tokens · answer at 4.10 s' (time to the first answer token)."""
        if not tokens:
            return "—"
        if ttfat_s is None:
            return (
                self.tr("1 token · still thinking") if tokens == 1 else self.tr("{n} tokens · still thinking")
            ).format(n=tokens)
        text = self.tr("1 token · answer at {s:.2f} s") if tokens == 1 else self.tr("{n} tokens · answer at {s:.2f} s")
        return text.format(n=tokens, s=ttfat_s)

    @staticmethod
    def _pcts(values: deque[float], scale: float, unit: str) -> str:
        if not values:
            return "—"
        ordered = sorted(values)
        p = [percentile(ordered, q) or 0.0 for q in (50, 95, 99)]
        return " / ".join(f"{v * scale:.1f}" for v in p) + f" {unit}"


class SidePanel(QTabWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.params = ParamsPanel()
        self.metrics = MetricsPanel()
        # A short window (1024×640) has less height than the figures, the chart and the session's figures
        # need: the layout squeezed each below its least size (the context's number cut by its bar, the
        # chart's axis labels "…"). The tab scrolls instead; on a tall window it is as before.
        page = QScrollArea()
        page.setWidget(self.metrics)
        page.setWidgetResizable(True)
        page.setFrameShape(QScrollArea.Shape.NoFrame)
        page.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # (the panel's width fits it)
        page.viewport().setAutoFillBackground(False)  # (the tab's own background, as before)
        page.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # (no extra Tab stop: the wheel scrolls it)
        self.metrics.setAutoFillBackground(False)
        self.addTab(page, self.tr("Metrics"))
        self.addTab(self.params, self.tr("Parameters"))
        self.setTabToolTip(0, self.tr("Live figures of the current answer and of this session"))
        self.setTabToolTip(1, self.tr("System prompt and sampling parameters of this chat"))
        self.setAccessibleName(self.tr("Side panel"))
        self.tabBar().setAccessibleDescription(self.tr("Metrics or parameters; the arrow keys switch"))
        self.setMinimumWidth(250)
