"""The editor of a custom block: robot state, actions or noise as tokens."""

from __future__ import annotations

from pathlib import Path
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QFormLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from attnviz.model.commands import SetCustomBlock
from attnviz.model.sequence import MAX_TOKENS
from attnviz.model.state import CUSTOM_GENERATORS, CustomSource
from attnviz.model.source_files import VALUES_FILTER
from attnviz.sources.errors import SourceError
from attnviz.ui.source_editors.common import spin_box
from attnviz.ui.messages import Level


class CustomEditor(QWidget):
    """Count, generator, seed and scale of a custom token block."""

    def __init__(self, panel):
        super().__init__(panel)
        self.panel = panel
        self.ctx = panel.ctx
        self.name: str | None = None
        self.count = spin_box(1, MAX_TOKENS, "number of tokens in the block")
        self.generator = QComboBox(self)
        self.generator.addItems(list(CUSTOM_GENERATORS))
        self.generator.setToolTip("zeros · seeded Gaussian noise · values loaded from a .npy/.csv file")
        self.seed = spin_box(0, 2**31 - 1, "noise seed")
        self.scale = QDoubleSpinBox(self)
        self.scale.setRange(0.0, 1000.0)
        self.scale.setDecimals(3)
        self.scale.setSingleStep(0.1)
        self.scale.setKeyboardTracking(False)
        self.scale.setToolTip("noise standard deviation")
        self.load_button = QPushButton("Load values…", self)
        self.info = QLabel("", self)
        self.info.setWordWrap(True)
        form = QFormLayout()
        form.addRow("tokens", self.count)
        form.addRow("generator", self.generator)
        form.addRow("seed", self.seed)
        form.addRow("scale", self.scale)
        form.addRow("", self.load_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addWidget(self.info)
        layout.addStretch(1)
        self.count.valueChanged.connect(lambda v: self._run(SetCustomBlock(self.name, count=v)))
        self.generator.activated.connect(self._on_generator)
        self.seed.valueChanged.connect(lambda v: self._run(SetCustomBlock(self.name, seed=v)))
        self.scale.valueChanged.connect(lambda v: self._run(SetCustomBlock(self.name, scale=v)))
        self.load_button.clicked.connect(self._load)

    def show_source(self, src: CustomSource) -> None:
        self.name = src.name
        ws = (self.count, self.generator, self.seed, self.scale)
        for w in ws:
            w.blockSignals(True)
        self.count.setValue(src.count)
        self.generator.setCurrentIndex(CUSTOM_GENERATORS.index(src.generator))
        self.seed.setValue(src.seed)
        self.scale.setValue(src.scale)
        file = src.generator == "file"
        self.count.setEnabled(not file)
        self.seed.setEnabled(src.generator == "noise")
        self.scale.setEnabled(src.generator == "noise")
        for w in ws:
            w.blockSignals(False)
        shape = "" if src.values is None else f" · values {src.values.shape[0]} × {src.values.shape[1]}"
        self.info.setText(f"{src.count} tokens labelled {src.name}0 … {src.name}{src.count - 1}{shape}")

    def _run(self, cmd) -> None:
        if self.name is not None and not self.ctx.execute(cmd):
            self.panel.refresh_editor()

    def _on_generator(self, index: int) -> None:
        gen = CUSTOM_GENERATORS[index]
        if gen == "file":
            self._load()
            self.panel.refresh_editor()
            return
        self._run(SetCustomBlock(self.name, generator=gen, values=None))

    def _load(self) -> None:
        path = self.panel.prompts.open_file(self, "Load token values", VALUES_FILTER)
        if not path:
            return
        from attnviz.sources.custom import load_block_values

        try:
            values = load_block_values(path, self.ctx.session.state.model.d_model)  # (count, d_model)
        except (SourceError, ValueError) as exc:
            self.ctx.report(Level.ERROR, f"cannot load {Path(path).name}: {exc}")
            return
        self._run(SetCustomBlock(self.name, count=int(values.shape[0]), generator="file", values=values))
