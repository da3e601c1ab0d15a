"""The load settings of one local model (the ⚙ beside the model picker): context length, GPU layers (a
number, "all", or "auto": as many as fit in free VRAM), threads for decoding and for the prompt, batch
size, flash attention, KV cache type, mmap and mlock. The memory estimate follows every change, and
saving settings that will not fit asks first. They apply when the model is loaded. A context longer
than the model was trained for (its GGUF header says) is warned about, and GPU layers on a llama.cpp
build without GPU offload say they have no effect.

The free VRAM comes from nvidia-smi, a subprocess: it is asked off the GUI thread, and the estimate
says "checking the GPU…" until it answers."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QMessageBox,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.qt.tasks import TaskRunner
from ember_chat.app.style.theme import active_colors
from ember_chat.engine.core.params import KV_CACHE_TYPES, SPECS
from ember_chat.engine.core.states import FitLabel
from ember_chat.engine.inference.llama_loader import gpu_offload_supported
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

        def spin(key: str, value: int) -> QSpinBox:
            spec = SPECS[key]
            box = QSpinBox()
            box.setRange(int(spec.low), int(spec.high))
            box.setSingleStep(spec.step)
            box.setValue(value)
            box.setAccessibleName(spec.label)
            box.setToolTip(spec.description)
            box.valueChanged.connect(self._update)
            return box

        self.n_ctx = spin("n_ctx", current.n_ctx)
        self.threads = spin("threads", current.threads)
        self.threads_batch = spin("threads", current.threads_batch)
        self.threads_batch.setAccessibleName(self.tr("Prompt threads"))
        self.threads_batch.setToolTip(self.tr("CPU threads for evaluating the prompt (it can use more than decoding)"))
        self.n_batch = spin("n_batch", current.n_batch)
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(AUTO_GPU_LAYERS, 100_000)
        self.gpu_layers.setSpecialValueText(self.tr("auto"))  # shown for the minimum, -2
        self.gpu_layers.setValue(current.gpu_layers)
        self.gpu_layers.setAccessibleName(self.tr("GPU layers"))
        self.gpu_layers.setToolTip(
            self.tr("Layers on the GPU: auto (as many as fit in free VRAM), -1 (all), 0 (none) or a number")
        )
        self.gpu_layers.valueChanged.connect(self._update)
        self.flash = QCheckBox(self.tr("Flash attention"))
        self.flash.setChecked(current.flash_attn)
        self.flash.setToolTip(self.tr("Faster attention; needed for a quantized KV cache"))
        self.kv = QComboBox()
        self.kv.addItems(list(KV_CACHE_TYPES))
        self.kv.setCurrentText(current.kv_cache_type)
        self.kv.setAccessibleName(self.tr("KV cache type"))
        self.kv.setToolTip(self.tr("f16 is exact; q8_0 halves the cache, q4_0 quarters it (needs flash attention)"))
        self.mmap = QCheckBox(self.tr("Memory-map the file (mmap)"))
        self.mmap.setChecked(current.use_mmap)
        self.mmap.setToolTip(self.tr("Load the weights on demand from the file; off: read them all at once"))
        self.mlock = QCheckBox(self.tr("Keep the weights in RAM (mlock)"))
        self.mlock.setChecked(current.use_mlock)
        self.mlock.setToolTip(self.tr("Never let the system swap the weights out"))
        for box in (self.flash, self.mmap, self.mlock):
            box.setAccessibleName(box.text())
            box.toggled.connect(self._update)
        self.kv.currentTextChanged.connect(self._update)

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
        form = QFormLayout()
        form.addRow(SPECS["n_ctx"].label, self.n_ctx)
        form.addRow("", self.ctx_warning)
        form.addRow(self.tr("GPU layers"), self.gpu_layers)
        form.addRow("", self.gpu_note)
        form.addRow(self.tr("Decode threads"), self.threads)
        form.addRow(self.tr("Prompt threads"), self.threads_batch)
        form.addRow(SPECS["n_batch"].label, self.n_batch)
        form.addRow(self.tr("KV cache"), self.kv)
        form.addRow(self.flash)
        form.addRow(self.mmap)
        form.addRow(self.mlock)
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

    def settings(self) -> ModelLoadSettings:
        return ModelLoadSettings(
            n_ctx=self.n_ctx.value(),
            threads=self.threads.value(),
            threads_batch=self.threads_batch.value(),
            gpu_layers=self.gpu_layers.value(),
            n_batch=self.n_batch.value(),
            flash_attn=self.flash.isChecked(),
            kv_cache_type=self.kv.currentText(),
            use_mmap=self.mmap.isChecked(),
            use_mlock=self.mlock.isChecked(),
        )

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
                answer = QMessageBox.question(
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
