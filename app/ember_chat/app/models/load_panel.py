"""The load settings of one local model (the ⚙ beside the model picker): context length, GPU layers (a
number, "all", or "auto": as many as fit in free VRAM), threads for decoding and for the prompt, batch
size, flash attention, KV cache type, mmap and mlock, and a draft model (speculative decoding). The
memory estimate follows every change, and saving settings that will not fit asks first. They apply when
the model is loaded. A context longer than the model was trained for (its GGUF header says) is warned
about, and GPU layers on a llama.cpp build without GPU offload say they have no effect. Its widgets are
made from the load parameters of the parameter table (a spin box, a check box or a list each, named and
explained by the table), so a parameter added there is here too.

The free VRAM comes from nvidia-smi, a subprocess: it is asked off the GUI thread, and the estimate
says "checking the GPU…" until it answers."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.qt.plain_text import ask
from ember_chat.app.style.theme import active_colors
from ember_chat.engine.core.params import LOAD_SPECS, ParamSpec
from ember_chat.engine.core.states import FitLabel
from ember_chat.engine.inference.llama.loader import gpu_offload_supported
from ember_chat.engine.models import fit as fit_module
from ember_chat.engine.models.fit import FitEstimate, estimate_fit, free_ram_bytes
from ember_chat.engine.models.gguf_inspect import ModelInfo
from ember_chat.engine.storage.model_settings import AUTO_GPU_LAYERS, ModelLoadSettings, auto_gpu_layers


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


class LoadSettingsDialog(QDialog):
    saved = Signal(object, bool)  # ModelLoadSettings, load the model now
    gpu_checked = Signal()  # the free VRAM is known (GUI thread; tests wait on this)

    def __init__(
        self,
        name: str,
        info: ModelInfo,
        current: ModelLoadSettings,
        parent: QWidget | None = None,
        free_ram: int | None = None,
        free_vram: int | None = -1,
        gpu_offload: bool | None = None,
    ) -> None:
        """`free_ram` / `free_vram`: measured unless given (tests); free_vram None: no GPU, -1: ask
        nvidia-smi off the GUI thread (until it answers the estimate assumes no GPU and says so).
        `gpu_offload`: whether this llama.cpp build can offload layers (asked of it unless given)."""
        super().__init__(parent)
        self.setWindowTitle(self.tr("Load settings: {name}").format(name=name))
        self.setAccessibleName(self.tr("Load settings"))
        self.info = info
        self.free_ram = free_ram_bytes() if free_ram is None else free_ram
        self.tasks = TaskRunner(self, workers=1)
        self.checking_gpu = free_vram == -1
        self.gpu_offload = gpu_offload_supported() if gpu_offload is None else gpu_offload
        self.free_vram = None if self.checking_gpu else free_vram

        # one widget for each load parameter of the table, by its name, made from its entry
        self.inputs: dict[str, QSpinBox | QCheckBox | QComboBox] = {
            spec.name: self._input(spec, getattr(current, spec.name)) for spec in LOAD_SPECS
        }
        self.n_ctx = self._spin("n_ctx")
        self.threads = self._spin("threads")
        self.threads_batch = self._spin("threads_batch")
        self.n_batch = self._spin("n_batch")
        self.gpu_layers = self._spin("gpu_layers")
        self.gpu_layers.setMinimum(AUTO_GPU_LAYERS)  # one more choice below the table's -1 (all)
        self.gpu_layers.setSpecialValueText(self.tr("auto"))  # shown for the minimum, -2
        self.gpu_layers.setValue(current.gpu_layers)
        self.gpu_layers.setToolTip(
            self.tr("Layers on the GPU: auto (as many as fit in free VRAM), -1 (all), 0 (none) or a number")
        )
        self.flash, self.mmap, self.mlock = (self._check(name) for name in ("flash_attn", "use_mmap", "use_mlock"))
        kv = self.inputs["kv_cache_type"]
        assert isinstance(kv, QComboBox)
        self.kv = kv

        warning = f"color: {active_colors().warning}"
        self.ctx_warning = QLabel()
        self.ctx_warning.setWordWrap(True)
        self.ctx_warning.setStyleSheet(warning)
        self.ctx_warning.setAccessibleName(self.tr("Context length warning"))
        self.gpu_note = QLabel(
            self.tr(
                "No effect: this build of llama.cpp has no GPU support, so the whole model runs on the CPU. "
                "Install a CUDA or Metal build to use a GPU."
            )
        )
        self.gpu_note.setWordWrap(True)
        self.gpu_note.setStyleSheet(warning)
        self.gpu_note.setAccessibleName(self.tr("GPU layers have no effect"))
        if not self.gpu_offload:
            self.gpu_layers.setToolTip(
                self.tr("{tip}. This build of llama.cpp has no GPU support: they have no effect.").format(
                    tip=self.gpu_layers.toolTip()
                )
            )
        self.form = form = QFormLayout()
        row_labels = {"threads": self.tr("Decode threads"), "kv_cache_type": self.tr("KV cache")}
        notes = {"n_ctx": self.ctx_warning, "gpu_layers": self.gpu_note}
        for spec in LOAD_SPECS:  # in the table's order
            widget = self.inputs[spec.name]
            if isinstance(widget, QCheckBox):
                form.addRow(widget)
            else:
                form.addRow(row_labels.get(spec.name, spec.label), widget)
            if spec.name in notes:
                form.addRow("", notes[spec.name])
        self.draft_model = current.draft_model
        form.addRow(self.tr("Draft model"), self._draft_row())
        self.estimate = QLabel()
        self.estimate.setWordWrap(True)
        self.estimate.setAccessibleName(self.tr("Memory estimate"))
        buttons = QDialogButtonBox()
        self.save_button = buttons.addButton(self.tr("Save"), QDialogButtonBox.ButtonRole.AcceptRole)
        self.load_button = buttons.addButton(self.tr("Save and load"), QDialogButtonBox.ButtonRole.ApplyRole)
        cancel = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        for b, tip in (
            (self.save_button, self.tr("Keep these settings for the next time this model is loaded")),
            (self.load_button, self.tr("Keep these settings and load the model with them now")),
            (cancel, self.tr("Close without saving")),
        ):
            b.setToolTip(tip)
            b.setAccessibleName(b.text())
        self.save_button.clicked.connect(lambda: self.submit(load_now=False))
        self.load_button.clicked.connect(lambda: self.submit(load_now=True))
        cancel.clicked.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.estimate)
        layout.addWidget(buttons)
        for widget in self.inputs.values():  # the estimate follows every change
            if isinstance(widget, QCheckBox):
                widget.toggled.connect(self._update)
            elif isinstance(widget, QComboBox):
                widget.currentTextChanged.connect(self._update)
            else:
                widget.valueChanged.connect(self._update)
        self._update()
        if self.checking_gpu:
            self.tasks.run(lambda: fit_module.free_vram_bytes(), self._gpu_known, lambda _m: self._gpu_known(None))

    def _gpu_known(self, free_vram: int | None) -> None:
        self.checking_gpu = False
        self.free_vram = free_vram
        self._update()
        self.gpu_checked.emit()

    def done(self, result: int) -> None:  # Qt override: closing the dialog
        self.tasks.shutdown()  # a GPU query still out is not waited for
        super().done(result)

    def _input(self, spec: ParamSpec, value: object) -> QSpinBox | QCheckBox | QComboBox:
        """The widget of one load parameter: a check box for a switch, a list for a choice, else a spin box;
        named and explained by the table."""
        widget: QSpinBox | QCheckBox | QComboBox
        if spec.kind is bool:
            widget = QCheckBox(spec.label)
            widget.setChecked(bool(value))
        elif spec.choices:
            widget = QComboBox()
            widget.addItems(list(spec.choices))
            widget.setCurrentText(str(value))
        else:
            widget = QSpinBox()
            widget.setRange(int(spec.low), int(spec.high))
            widget.setSingleStep(int(spec.step))
            widget.setValue(int(value))  # type: ignore[call-overload]
        widget.setAccessibleName(spec.label)
        widget.setToolTip(spec.description)
        return widget

    def _draft_row(self) -> QWidget:
        """The draft model's file (speculative decoding): its name, Choose… and None."""
        row = QWidget()
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        self.draft_label = QLabel()
        self.draft_label.setAccessibleName(self.tr("Draft model"))
        self.draft_label.setToolTip(
            self.tr(
                "A smaller model of the same family (the same tokenizer), loaded with this one: it drafts the "
                "next tokens and this model checks several at once (greedy decoding, Speculative decoding on "
                "Auto or Draft model: the same answer, faster when the drafts are right). One that cannot be "
                "used (another vocabulary, a larger or damaged file) is refused with the reason, and the model "
                "loads without it."
            )
        )
        choose = QPushButton(self.tr("Choose…"))
        choose.setAccessibleName(self.tr("Choose a draft model"))
        choose.setToolTip(self.tr("Pick the draft model's GGUF file"))
        choose.clicked.connect(self._choose_draft)
        self.draft_clear = QPushButton(self.tr("None"))
        self.draft_clear.setAccessibleName(self.tr("No draft model"))
        self.draft_clear.setToolTip(self.tr("Load this model without a draft model"))
        self.draft_clear.clicked.connect(lambda: self.set_draft_model(None))
        line.addWidget(self.draft_label, 1)
        line.addWidget(choose)
        line.addWidget(self.draft_clear)
        self.set_draft_model(self.draft_model)
        return row

    def _choose_draft(self) -> None:
        start = str(Path(self.draft_model).parent) if self.draft_model else ""
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Draft model"), start, self.tr("GGUF models (*.gguf)"))
        if path:
            self.set_draft_model(path)

    def set_draft_model(self, path: str | None) -> None:
        """The draft model's file (None: none), as the Choose… and None buttons set it."""
        self.draft_model = path or None
        self.draft_label.setText(Path(path).name if path else self.tr("none"))
        self.draft_clear.setEnabled(path is not None)

    def _spin(self, name: str) -> QSpinBox:
        widget = self.inputs[name]
        assert isinstance(widget, QSpinBox)
        return widget

    def _check(self, name: str) -> QCheckBox:
        widget = self.inputs[name]
        assert isinstance(widget, QCheckBox)
        return widget

    def settings(self) -> ModelLoadSettings:
        """What the widgets say, one value for each load parameter of the table."""
        values: dict[str, object] = {}
        for name, widget in self.inputs.items():
            if isinstance(widget, QCheckBox):
                values[name] = widget.isChecked()
            elif isinstance(widget, QComboBox):
                values[name] = widget.currentText()
            else:
                values[name] = widget.value()
        return ModelLoadSettings(**values, draft_model=self.draft_model)  # type: ignore[arg-type]

    def fit(self) -> FitEstimate:
        s = self.settings()
        layers = s.gpu_layers if self.gpu_offload else 0  # a CPU-only build puts nothing on a GPU
        if layers == AUTO_GPU_LAYERS:
            layers = auto_gpu_layers(self.info, s.n_ctx, s.kv_cache_type, self.free_vram)
        return estimate_fit(
            self.info.file_size, s.n_ctx, self.info, free_ram=self.free_ram, free_vram=self.free_vram,
            gpu_layers=layers, kv_type=s.kv_cache_type,
        )  # fmt: skip

    def _update(self) -> None:
        s = self.settings()
        trained = self.info.context_length
        self.ctx_warning.setVisible(bool(trained) and s.n_ctx > (trained or 0))
        if trained and s.n_ctx > trained:
            self.ctx_warning.setText(
                self.tr(
                    "Longer than the {trained} tokens this model was trained for: beyond them its answers "
                    "usually get worse."
                ).format(trained=f"{trained:,}")
            )
        self.gpu_note.setVisible(not self.gpu_offload and s.gpu_layers != 0)
        fit = self.fit()
        parts = [
            self.tr("Needs about {ram} of RAM ({free} free)").format(ram=_gb(fit.ram_bytes), free=_gb(self.free_ram))
        ]
        if fit.vram_bytes:
            parts.append(
                self.tr("{vram} of VRAM ({free} free)").format(vram=_gb(fit.vram_bytes), free=_gb(self.free_vram or 0))
            )
        if self.checking_gpu:
            parts.append(self.tr("checking the GPU…"))
        elif s.gpu_layers == AUTO_GPU_LAYERS:
            n = auto_gpu_layers(self.info, s.n_ctx, s.kv_cache_type, self.free_vram)
            parts.append(self.tr("auto: {n} GPU layers").format(n=n))
        verdict = {
            FitLabel.FITS: self.tr("fits"),
            FitLabel.TIGHT: self.tr("fits, with little to spare"),
            FitLabel.WONT_FIT: self.tr("will not fit"),
            FitLabel.UNKNOWN: self.tr("free memory unknown"),
        }[fit.label]
        problem = ""
        if s.kv_cache_type != "f16" and not s.flash_attn:
            problem = " " + self.tr("A quantized KV cache needs flash attention.")
        self.estimate.setText(" · ".join(parts) + f": {verdict}.{problem}")
        colors = active_colors()
        bad = fit.label is FitLabel.WONT_FIT or bool(problem)
        self.estimate.setStyleSheet(f"color: {colors.error if bad else colors.text}")
        self.save_button.setEnabled(not problem)
        self.load_button.setEnabled(not problem)

    def submit(self, load_now: bool, confirm: bool | None = None) -> bool:
        """Save (and maybe load); settings that will not fit ask first (`confirm` answers for tests)."""
        if self.fit().label is FitLabel.WONT_FIT:
            if confirm is None:
                answer = ask(
                    self,
                    self.tr("Will not fit"),
                    self.tr("With these settings the model will not fit in free memory. Save them anyway?"),
                )
                confirm = answer == QMessageBox.StandardButton.Yes
            if not confirm:
                return False
        self.saved.emit(self.settings(), load_now)
        self.accept()
        return True
