"""Screenshot gallery: every widget with sample data, in the light and dark theme, saved as PNGs
(``python -m attnviz.ui.widgets.gallery OUT_DIR``; the docs keep them under
docs/screenshots/widgets)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget

from attnviz.ui.export import export_png
from attnviz.ui.theme import apply_theme
from attnviz.ui.widgets import samples
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.image_overlay import PatchImageView
from attnviz.ui.widgets.mask_canvas import ALLOW, DENY, MaskCanvas
from attnviz.ui.widgets.small_multiples import HeadGrid
from attnviz.ui.widgets.token_chips import TokenChips


def _settle(app: QApplication, w: QWidget, size) -> None:
    w.resize(*size)
    w.show()
    QTest.qWait(300)  # past the debounced re-pooling after the resize


def _heatmap(theme: str) -> AttentionHeatmap:
    ex = samples.river_bank()
    w = AttentionHeatmap()
    w.set_matrix(ex.weights, mask=ex.mask, row_labels=ex.tokens, col_labels=ex.tokens, row_segments=ex.segments,
                 col_segments=ex.segments, title=f"head 0 · weights ({theme})", value_label="weight")
    w.set_readout_provider(lambda i, j: f"score {ex.scores[i, j]:.3f}")
    w.set_selected_row(7)
    return w


def _mask_canvas() -> MaskCanvas:
    ex = samples.river_bank()
    over = np.zeros(ex.mask.shape, dtype=np.int8)  # (T, T)
    over[4:8, 8:10] = ALLOW
    over[1, 0:3] = DENY
    c = MaskCanvas()
    c.set_mask(ex.mask, over, row_labels=ex.tokens, col_labels=ex.tokens, row_segments=ex.segments,
               col_segments=ex.segments, title="mask · rule + painted cells · tiles 4x4")
    eff = c.effective_mask()
    states = np.zeros((3, 3), dtype=np.int8)  # (nQt, nKt)
    for a in range(3):
        for b in range(3):
            t = eff[4 * a:4 * a + 4, 4 * b:4 * b + 4]
            states[a, b] = 2 if t.all() else (1 if t.any() else 0)
    c.set_tiles(states, 4, 4)
    return c


def render_all(out_dir) -> list[Path]:
    app = QApplication.instance() or QApplication(sys.argv)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    keep = []
    for theme in ("light", "dark"):
        apply_theme(app, theme)
        w = _heatmap(theme)
        keep.append(w)
        _settle(app, w, (760, 640))
        w.readout.setText(w.readout_text(7, 6))
        written.append(export_png(w, out / f"heatmap_{theme}.png"))

        big = AttentionHeatmap()
        keep.append(big)
        wts, mask = samples.peaked_matrix(512, seed=1)
        big.set_matrix(wts, mask=mask, title=f"T = 512, causal ({theme})", value_label="weight", log_scale=True)
        _settle(app, big, (760, 640))
        written.append(export_png(big, out / f"heatmap_T512_log_{theme}.png"))

        c = _mask_canvas()
        keep.append(c)
        _settle(app, c, (700, 640))
        written.append(export_png(c, out / f"mask_canvas_{theme}.png"))

    apply_theme(app, "light")
    pooled = AttentionHeatmap()
    wts, mask = samples.peaked_matrix(4096, seed=2)
    pooled.set_matrix(wts, mask=mask, title="T = 4096, max-pooled to the view's pixels", value_label="weight")
    keep.append(pooled)
    _settle(app, pooled, (760, 640))
    written.append(export_png(pooled, out / "heatmap_T4096_pooled.png"))

    grid = HeadGrid()
    maps = np.stack([np.stack([samples.peaked_matrix(128, seed=12 * r + c)[0] for c in range(12)]) for r in range(6)])
    grid.set_matrices(maps, [f"L{r}" for r in range(6)], [f"h{c}" for c in range(12)])
    grid.set_selected(2, 5)
    keep.append(grid)
    _settle(app, grid, (1100, 600))
    written.append(export_png(grid, out / "head_grid.png"))

    view = PatchImageView()
    view.set_image(samples.sample_image(224, 224), grid=(14, 14), patch=16)
    yy, xx = np.mgrid[0:14, 0:14]
    view.set_overlay(np.exp(-((yy - 4) ** 2 + (xx - 10) ** 2) / 8.0))
    view.set_highlight(4 * 14 + 10)
    keep.append(view)
    _settle(app, view, (560, 620))
    written.append(export_png(view, out / "patch_image.png"))

    ex = samples.river_bank()
    chips = TokenChips()
    chips.set_tokens(ex.tokens * 3, ex.ids * 3, [samples.Segment(s.name, s.start, s.stop, s.color) for s in ex.segments])
    chips.set_selected(7)
    keep.append(chips)
    _settle(app, chips, (520, 180))
    written.append(export_png(chips, out / "token_chips.png"))
    for w in keep:
        w.close()
    return written


if __name__ == "__main__":
    for p in render_all(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots/widgets"):
        print(p)
