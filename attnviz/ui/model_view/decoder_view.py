"""Decoder LLMs in the Pretrained panel: a long input drawn from q, k and lse.

Past the size where every (L, nh, T, T) map is held, a decoder run is a
:class:`~attnviz.checkpoints.study.LongOutcome` keeping only q, k and the log-sum-exp.
:class:`LongMapView` then draws the chosen (layer, head) in the panel's detail heatmap at screen
resolution with the engine's overview machinery, recomputing the visible block on every zoom or pan
until it shows single cells.
"""

from __future__ import annotations

import numpy as np

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.study import LongOutcome, head_title
from attnviz.ui import latest_job
from attnviz.ui.model_view.jobs import EXPECTED, MEMORY_MESSAGE


class LongMapView:
    """Draws one (layer, head) of a LongOutcome in an AttentionHeatmap, refined on zoom and pan."""

    def __init__(self, heatmap, parent):
        self.heatmap = heatmap
        self.outcome: LongOutcome | None = None
        self.head: tuple[int, int] = (0, 0)
        self.job = latest_job.LatestJob("attnviz-pretrained-overview", parent, expected=EXPECTED + (CheckpointError,),
                                        memory_message=MEMORY_MESSAGE)
        self.job.done.connect(self._on_done)
        heatmap.view_region_changed.connect(self._on_region)

    def shutdown(self) -> None:
        self.job.shutdown()

    def clear(self) -> None:
        self.outcome = None

    def show(self, outcome: LongOutcome, layer: int, head: int) -> None:
        """Draw ``head`` of ``layer`` whole (the visible block follows when zoomed)."""
        self.outcome, self.head = outcome, (int(layer), int(head))
        self._request(None, None)

    def _shape(self, rows: int, cols: int) -> tuple[int, int]:
        vb = self.heatmap.frame.view.sceneBoundingRect()
        ratio = self.heatmap.devicePixelRatioF()
        cap = self.heatmap.config.max_display
        return (min(rows, int(min(cap, max(64, vb.height() * ratio)))),
                min(cols, int(min(cap, max(64, vb.width() * ratio)))))

    def _request(self, rows, cols) -> None:
        out = self.outcome
        if out is None:
            return
        dec, (layer, head) = out.decoder, self.head
        rows = rows or (0, dec.T)
        cols = cols or (0, dec.T)
        shape = self._shape(rows[1] - rows[0], cols[1] - cols[0])
        self.job.submit(lambda: (out, (layer, head), rows, cols, dec.overview(layer, head, shape, rows, cols)))

    def _on_region(self, r0: int, r1: int, c0: int, c1: int) -> None:
        if self.outcome is None or (r0, r1, c0, c1) == (0, self.outcome.decoder.T, 0, self.outcome.decoder.T):
            return
        self._request((r0, r1), (c0, c1))

    def _on_done(self, _jid: int, result) -> None:
        out, (layer, head), rows, cols, img = result
        if out is not self.outcome or (layer, head) != self.head:
            return
        dec = out.decoder
        T = dec.T
        img = np.asarray(img, dtype=np.float32).copy()  # (H, W)
        r_edges = rows[0] + (np.arange(img.shape[0] + 1) * (rows[1] - rows[0])) // img.shape[0]
        c_edges = cols[0] + (np.arange(img.shape[1] + 1) * (cols[1] - cols[0])) // img.shape[1]
        future = c_edges[:-1][None, :] > (r_edges[1:] - 1)[:, None]  # pixels wholly after their last row: causal
        img[future] = np.nan
        full = rows == (0, T) and cols == (0, T)
        levels = None
        if full:
            finite = img[~np.isnan(img)]
            levels = (0.0, float(finite.max()) if finite.size and finite.max() > 0 else 1.0)
        self.heatmap.set_overview(img, (rows[0], rows[1], cols[0], cols[1]), T, T, levels=levels,
                                  row_labels=dec.labels, col_labels=dec.labels,
                                  title=head_title(dec, layer, head) + " · max per pixel", value_label="max weight")
        if full:
            region = self.heatmap.frame.visible_region()
            if region != (0, T, 0, T):
                self._request(region[:2], region[2:])
