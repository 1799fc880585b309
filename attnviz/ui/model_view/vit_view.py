"""VitAttentionView: a ViT checkpoint's attention drawn over the image, in the frame of the model's own
preprocessing and patch grid: the class token's attention in one layer (DINO's view) or the rollout
through all layers. Extra tokens (DeiT's distillation token) are not patches and are left out of the
map; non-square grids are drawn as they are.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from attnviz.checkpoints import ImageConfig, ModelAttention
from attnviz.checkpoints.views import HEAD_FUSIONS, OverlaySpec, display_image, display_patch, grid_label, vit_overlay
from attnviz.ui.widgets.image_overlay import PatchImageView

MODE_LABELS = {"cls": "class token → patches", "rollout": "attention rollout"}
MAX_DISCARD = 0.95  # the slider's top; rollout refuses 1.0 (nothing would be left but the identity)


class VitAttentionView(QWidget):
    """Image + patch grid + the chosen attention map over it."""

    overlay_changed = Signal()  # a new map is drawn (tests, screenshots)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.mode_combo = QComboBox(self)
        for key, label in MODE_LABELS.items():
            self.mode_combo.addItem(label, key)
        self.mode_combo.setToolTip("class token's attention in one layer, or rollout through all layers")
        self.layer_combo = QComboBox(self)
        self.layer_combo.setToolTip("layer whose class-token attention is drawn")
        self.head_combo = QComboBox(self)
        self.head_combo.setToolTip("head whose class-token attention is drawn, or the mean over heads")
        self.fusion_combo = QComboBox(self)
        self.fusion_combo.addItems(list(HEAD_FUSIONS))
        self.fusion_combo.setToolTip("how rollout combines each layer's heads")
        self.discard = QSlider(Qt.Orientation.Horizontal, self)
        self.discard.setRange(0, round(MAX_DISCARD * 100))
        self.discard.setToolTip("share of each fused attention matrix's lowest entries set to zero before rollout")
        self.discard_label = QLabel("discard 0 %", self)
        self.model_pixels = QCheckBox("model pixels", self)
        self.model_pixels.setToolTip("show the image exactly as the model received it (its resize, no smoothing)")
        self.info = QLabel(" ", self)
        self.info.setWordWrap(True)
        self.legend = QLabel(" ", self)
        self.legend.setToolTip("the overlay's colour scale (inferno: dark is low, bright is high)")

        row1 = QHBoxLayout()
        row1.setContentsMargins(6, 2, 6, 0)
        row1.addWidget(self.mode_combo)
        row1.addSpacing(8)
        row1.addWidget(QLabel("layer", self))
        row1.addWidget(self.layer_combo)
        row1.addWidget(QLabel("head", self))
        row1.addWidget(self.head_combo)
        row1.addStretch(1)
        row1.addWidget(self.model_pixels)
        row2 = QHBoxLayout()
        row2.setContentsMargins(6, 0, 6, 0)
        row2.addWidget(QLabel("rollout fusion", self))
        row2.addWidget(self.fusion_combo)
        row2.addSpacing(8)
        row2.addWidget(self.discard_label)
        row2.addWidget(self.discard, 1)
        self.image_view = PatchImageView(self)
        self.image_view.set_colormap("inferno")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(row1)
        layout.addLayout(row2)
        layout.addWidget(self.info)
        layout.addWidget(self.legend)
        layout.addWidget(self.image_view, 1)

        self.result: ModelAttention | None = None
        self._rgb: np.ndarray | None = None
        self._ic: ImageConfig | None = None
        self._patch: tuple[int, int] | None = None  # the model's patch size (P_h, P_w)
        self.overlay_map: np.ndarray | None = None  # (gh, gw) float64 map drawn, exactly as computed
        self.overlay_levels: tuple[float, float] | None = None
        for combo in (self.mode_combo, self.layer_combo, self.head_combo, self.fusion_combo):
            combo.currentIndexChanged.connect(lambda _i: self._draw_overlay())
        self.discard.valueChanged.connect(self._on_discard)
        self.model_pixels.toggled.connect(lambda _on: self._draw_image())
        self._sync_enabled()

    # -- public API ----------------------------------------------------------------------------
    def set_result(self, result: ModelAttention | None, rgb: np.ndarray | None, ic: ImageConfig | None,
                   patch_size: tuple[int, int] = (16, 16), trained_grid: tuple[int, int] | None = None) -> None:
        """Show a ViT forward pass (``result`` with grid, pixels) on the image ``rgb`` it was given."""
        self.result, self._rgb, self._ic, self._patch = result, rgb, ic, tuple(patch_size)
        if result is None or result.grid is None or ic is None:
            self.overlay_map = None
            self.info.setText("No image model loaded.")
            return
        L, nh = result.attentions.shape[:2]
        self._refill(self.layer_combo, [f"{i}" for i in range(L)], default=L - 1)
        self._refill(self.head_combo, ["mean"] + [f"{h}" for h in range(nh)], default=0)
        self.info.setText(grid_label(result, ic, patch_size, trained_grid))
        self._draw_image()
        self._draw_overlay()

    def spec(self) -> OverlaySpec:
        """The overlay the controls ask for."""
        head = self.head_combo.currentText() or "mean"
        return OverlaySpec(
            mode=self.mode_combo.currentData(),
            layer=max(self.layer_combo.currentIndex(), 0),
            head="mean" if head == "mean" else int(head),
            fusion=self.fusion_combo.currentText(),
            discard_ratio=self.discard.value() / 100.0,
        )

    def set_spec(self, spec: OverlaySpec) -> None:
        """Set every control at once (draws once)."""
        for w in (self.mode_combo, self.layer_combo, self.head_combo, self.fusion_combo, self.discard):
            w.blockSignals(True)
        try:
            index = self.mode_combo.findData(spec.mode)
            if index < 0:
                raise ValueError(f"unknown overlay {spec.mode!r}; choose one of {', '.join(MODE_LABELS)}")
            self.mode_combo.setCurrentIndex(index)
            n_layers = self.layer_combo.count()
            if n_layers:
                if not -n_layers <= spec.layer < n_layers:
                    raise ValueError(f"layer {spec.layer} is out of range for {n_layers} layers")
                self.layer_combo.setCurrentIndex(spec.layer % n_layers)
            head = self.head_combo.findText(str(spec.head))
            if self.head_combo.count() and head < 0:
                raise ValueError(f"head {spec.head!r} is not one of {self.head_combo.count() - 1} heads or mean")
            self.head_combo.setCurrentIndex(max(head, 0))
            if spec.fusion not in HEAD_FUSIONS:
                raise ValueError(f"head fusion {spec.fusion!r} is not one of {', '.join(HEAD_FUSIONS)}")
            self.fusion_combo.setCurrentText(spec.fusion)
            if not 0.0 <= spec.discard_ratio <= MAX_DISCARD:
                raise ValueError(f"discard ratio must be within 0..{MAX_DISCARD} (got {spec.discard_ratio})")
            self.discard.setValue(round(spec.discard_ratio * 100))
        finally:
            for w in (self.mode_combo, self.layer_combo, self.head_combo, self.fusion_combo, self.discard):
                w.blockSignals(False)
        self._on_discard(self.discard.value())

    # -- drawing -------------------------------------------------------------------------------
    def _refill(self, combo: QComboBox, items: list[str], default: int) -> None:
        if [combo.itemText(i) for i in range(combo.count())] == items:
            return
        combo.blockSignals(True)
        combo.clear()
        combo.addItems(items)
        combo.setCurrentIndex(default)
        combo.blockSignals(False)

    def _draw_image(self) -> None:
        r = self.result
        if r is None or r.grid is None or self._ic is None:
            return
        P = display_patch(r.grid)
        img = display_image(self._rgb, r.pixels, self._ic, r.grid, P, self.model_pixels.isChecked(), self._patch)
        self.image_view.set_image(img, grid=r.grid, patch=P)
        if self.overlay_map is not None:
            self.image_view.set_overlay(self.overlay_map, levels=self.overlay_levels)

    def _sync_enabled(self) -> None:
        cls = self.mode_combo.currentData() == "cls"
        for w in (self.layer_combo, self.head_combo):
            w.setEnabled(cls)
        for w in (self.fusion_combo, self.discard, self.discard_label):
            w.setEnabled(not cls)

    def _on_discard(self, value: int) -> None:
        self.discard_label.setText(f"discard {value} %")
        self._draw_overlay()

    def _draw_overlay(self) -> None:
        self._sync_enabled()
        if self.result is None or self.result.grid is None:
            return
        self.overlay_map, self.overlay_levels = vit_overlay(self.result, self.spec())
        self.image_view.set_overlay(self.overlay_map, levels=self.overlay_levels)
        lo, hi = self.overlay_levels
        spec = self.spec()
        if spec.mode == "rollout":
            what = f"rollout of [CLS] through {self.result.attentions.shape[0]} layers ({spec.fusion} over heads), / its max"
        else:
            head = "mean over heads" if spec.head == "mean" else f"head {spec.head}"
            what = f"[CLS] → patches, layer {spec.layer}, {head}"
        self.legend.setText(f"overlay: {what}; colour from {lo:.3g} (dark) to {hi:.3g} (bright)")
        self.overlay_changed.emit()
