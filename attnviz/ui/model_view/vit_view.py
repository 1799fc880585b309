"""VitAttentionView: a ViT checkpoint's attention drawn over the image, in the frame of the model's own
preprocessing and patch grid: the class token's attention in one layer (DINO's view), a clicked
patch's attention, the mean attention each patch receives, or the rollout through all layers. A model
without a class token (SigLIP) offers no class-token view, and its rollout is the mean over every query
row. Extra tokens (DeiT's distillation token) are not patches and are left out of the map; non-square
grids are drawn as they are.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSlider, QVBoxLayout, QWidget

from attnviz.checkpoints import ImageConfig, ModelAttention
from attnviz.checkpoints.views import (HEAD_FUSIONS, OverlaySpec, default_overlay, display_image, display_patch,
                                       grid_label, overlay_caption, overlay_modes, vit_overlay)
from attnviz.ui.widgets.image_overlay import PatchImageView

MODE_LABELS = {"cls": "class token → patches", "patch": "clicked patch → patches",
               "received": "mean attention each patch receives", "rollout": "attention rollout"}
ONE_LAYER_MODES = ("cls", "patch", "received")  # the views of one layer and head
MAX_DISCARD = 0.95  # the slider's top; rollout refuses 1.0 (nothing would be left but the identity)


class VitAttentionView(QWidget):
    """Image + patch grid + the chosen attention map over it."""

    overlay_changed = Signal()  # a new map is drawn (tests, screenshots)
    window_mask_requested = Signal(int)  # a Swin layer whose window mask should open in the Mask workspace

    def __init__(self, parent=None):
        super().__init__(parent)
        self.mode_combo = QComboBox(self)
        for key, label in MODE_LABELS.items():
            self.mode_combo.addItem(label, key)
        self.mode_combo.setToolTip("the class token's attention, a clicked patch's, the mean each patch receives "
                                   "(over every query) in one layer, or rollout through all layers")
        self.layer_combo = QComboBox(self)
        self.layer_combo.setToolTip("layer whose attention is drawn")
        self.head_combo = QComboBox(self)
        self.head_combo.setToolTip("head whose attention is drawn, or the mean over heads")
        self.fusion_combo = QComboBox(self)
        self.fusion_combo.addItems(list(HEAD_FUSIONS))
        self.fusion_combo.setToolTip("how rollout combines each layer's heads")
        self.discard = QSlider(Qt.Orientation.Horizontal, self)
        self.discard.setRange(0, round(MAX_DISCARD * 100))
        self.discard.setToolTip("share of each fused attention matrix's lowest entries set to zero before rollout")
        self.discard_label = QLabel("discard 0 %", self)
        self.model_pixels = QCheckBox("model pixels", self)
        self.model_pixels.setToolTip("show the image exactly as the model received it (its resize, no smoothing)")
        self.window_button = QPushButton("&Window mask → Mask workspace", self)
        self.window_button.setToolTip("open the chosen layer's window mask (Swin: which patches see which, shifted "
                                      "windows on odd layers) as a session in the Mask workspace")
        self.window_button.setVisible(False)
        self.window_button.clicked.connect(lambda: self.window_mask_requested.emit(max(self.layer_combo.currentIndex(), 0)))
        self.info = QLabel(" ", self)
        self.info.setWordWrap(True)
        self.legend = QLabel(" ", self)
        self.legend.setWordWrap(True)  # a long caption wraps instead of widening the tab
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
        row2.addWidget(self.window_button)
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
        self.query_patch = 0  # the "clicked patch" view's query, row-major over the grid
        self._rgb: np.ndarray | None = None
        self._ic: ImageConfig | None = None
        self._patch: tuple[int, int] | None = None  # the model's patch size (P_h, P_w)
        self.overlay_map: np.ndarray | None = None  # (gh, gw) float64 map drawn, exactly as computed
        self.overlay_levels: tuple[float, float] | None = None
        for combo in (self.mode_combo, self.layer_combo, self.head_combo, self.fusion_combo):
            combo.currentIndexChanged.connect(lambda _i: self._draw_overlay())
        self.discard.valueChanged.connect(self._on_discard)
        self.model_pixels.toggled.connect(lambda _on: self._draw_image())
        self.image_view.patch_clicked.connect(self._on_patch_clicked)
        self._sync_enabled()

    # -- public API ----------------------------------------------------------------------------
    def set_windowed(self, windowed: bool) -> None:
        """Offer the window-mask button (a model whose attention is windowed: Swin) or hide it."""
        self.window_button.setVisible(bool(windowed))

    def set_result(self, result: ModelAttention | None, rgb: np.ndarray | None, ic: ImageConfig | None,
                   patch_size: tuple[int, int] = (16, 16), trained_grid: tuple[int, int] | None = None) -> None:
        """Show a ViT forward pass (``result`` with grid, pixels) on the image ``rgb`` it was given."""
        self.result, self._rgb, self._ic, self._patch = result, rgb, ic, tuple(patch_size)
        if result is None or result.grid is None or ic is None:
            self.overlay_map = None
            self.info.setText("No image model loaded.")
            return
        L, nh = result.attentions.shape[:2]
        self._refill_modes(result)
        if self.query_patch >= result.grid[0] * result.grid[1]:
            self.query_patch = 0
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
            patch=self.query_patch,
        )

    def set_spec(self, spec: OverlaySpec) -> None:
        """Set every control at once (draws once)."""
        for w in (self.mode_combo, self.layer_combo, self.head_combo, self.fusion_combo, self.discard):
            w.blockSignals(True)
        try:
            index = self.mode_combo.findData(spec.mode)
            if index < 0:
                offered = [self.mode_combo.itemData(i) for i in range(self.mode_combo.count())]
                why = "this model has no class token" if spec.mode in MODE_LABELS else "unknown overlay"
                raise ValueError(f"{why} ({spec.mode!r}); choose one of {', '.join(offered)}")
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
            n_patch = self.result.grid[0] * self.result.grid[1] if self.result is not None and self.result.grid else 0
            if n_patch and not 0 <= spec.patch < n_patch:
                raise ValueError(f"patch {spec.patch} is out of range for {n_patch} patches")
            self.query_patch = int(spec.patch)
        finally:
            for w in (self.mode_combo, self.layer_combo, self.head_combo, self.fusion_combo, self.discard):
                w.blockSignals(False)
        self._on_discard(self.discard.value())

    # -- drawing -------------------------------------------------------------------------------
    def _refill_modes(self, result: ModelAttention) -> None:
        """The views this result offers (no class-token view without a class token); the current one kept if offered."""
        modes = overlay_modes(result)
        if [self.mode_combo.itemData(i) for i in range(self.mode_combo.count())] == list(modes):
            return
        keep = self.mode_combo.currentData()
        self.mode_combo.blockSignals(True)
        self.mode_combo.clear()
        for key in modes:
            self.mode_combo.addItem(MODE_LABELS[key], key)
        self.mode_combo.setCurrentIndex(modes.index(keep) if keep in modes else modes.index(default_overlay(result)))
        self.mode_combo.blockSignals(False)

    def _on_patch_clicked(self, index: int) -> None:
        """A click on the image makes that patch the query of the "clicked patch" view (and shows it)."""
        if self.result is None or self.result.grid is None:
            return
        self.query_patch = int(index)
        at = self.mode_combo.findData("patch")
        if self.mode_combo.currentData() != "patch" and at >= 0:
            self.mode_combo.setCurrentIndex(at)  # draws
        else:
            self._draw_overlay()

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
        one_layer = self.mode_combo.currentData() in ONE_LAYER_MODES
        for w in (self.layer_combo, self.head_combo):
            w.setEnabled(one_layer)
        for w in (self.fusion_combo, self.discard, self.discard_label):
            w.setEnabled(not one_layer)

    def _on_discard(self, value: int) -> None:
        self.discard_label.setText(f"discard {value} %")
        self._draw_overlay()

    def _draw_overlay(self) -> None:
        self._sync_enabled()
        if self.result is None or self.result.grid is None:
            return
        spec = self.spec()
        self.overlay_map, self.overlay_levels = vit_overlay(self.result, spec)
        self.image_view.set_overlay(self.overlay_map, levels=self.overlay_levels)
        self.image_view.set_highlight(spec.patch if spec.mode == "patch" else None)
        lo, hi = self.overlay_levels
        self.legend.setText(f"overlay: {overlay_caption(self.result, spec)}; colour from {lo:.3g} (dark) to {hi:.3g} (bright)")
        self.overlay_changed.emit()

