"""The attention-over-the-image dock: for the selected query token (the image's class token when
none is selected), its weights over an image source's patches drawn on the image, for one head or
averaged over heads, with an opacity slider.

Clicking a patch selects that patch's token as the query everywhere. The weights come from the
response's full matrix, its requested rows, or — for long sequences — are recomputed for the one row
from q, k and lse (:func:`attnviz.ui.response_views.row_weights`).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QStackedLayout, QVBoxLayout, QWidget

from attnviz.model.sequence import image_patches
from attnviz.model.state import ImageSource
from attnviz.sources.errors import SourceError
from attnviz.ui.panels import PanelSpec, run_panel_alone
from attnviz.ui.response_views import (check_head, default_query, engine_scale, image_keys, n_heads, patch_weights,
                                       row_weights, token_of_patch)
from attnviz.ui.widgets.image_overlay import PatchImageView

FOLLOW = "selected head"  # head choice that follows the heatmap's head


class ImagePanel(QWidget):
    """One image source with the selected query's attention over its patches."""

    rendered = Signal()  # the overlay shows the newest response and selection

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self._resp = None
        self._shown_image = None  # (source data id, patch, policy, target) last drawn
        self._grid = None  # (gh, gw) of the image shown
        self._overlay = None  # (gh, gw) weights drawn
        self.source_combo = QComboBox(self)
        self.source_combo.setToolTip("image source whose patches are shown")
        self.head_combo = QComboBox(self)
        self.head_combo.setToolTip("head whose weights are drawn (selected head follows the heatmap)")
        self.query_label = QLabel("", self)
        self.query_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.query_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 4, 6, 0)
        bar.addWidget(QLabel("image", self))
        bar.addWidget(self.source_combo)
        bar.addSpacing(6)
        bar.addWidget(QLabel("head", self))
        bar.addWidget(self.head_combo)
        bar.addStretch(1)

        self.view = PatchImageView(self)
        self.view.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.placeholder = QLabel("No image source.\nAdd one in the Inputs panel (Add ▸ Image…) or drop an image "
                                  "file onto the window.", self)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.stack = QStackedLayout()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.view)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(bar)
        self.query_label.setContentsMargins(8, 0, 8, 0)
        layout.addWidget(self.query_label)
        layout.addLayout(self.stack, 1)

        self.source_combo.activated.connect(lambda _i: self._refresh())
        self.head_combo.activated.connect(lambda _i: self._draw_overlay())
        self.view.slider.valueChanged.connect(self._on_opacity)
        self.view.patch_clicked.connect(self._on_patch_clicked)
        ctx.session.events.sources.connect(self._on_sources_changed)
        ctx.session.events.view.connect(self._on_view_changed)
        ctx.response_changed.connect(self._on_response)
        self._on_sources_changed(ctx.session.state.sources)
        self.view.set_opacity(ctx.session.state.view.overlay_opacity)
        if ctx.response is not None:
            self._on_response(ctx.response)

    # ------------------------------------------------------------------ state
    def current_source(self) -> ImageSource | None:
        name = self.source_combo.currentText()
        try:
            src = self.ctx.session.state.source(name)
        except KeyError:
            return None
        return src if isinstance(src, ImageSource) else None

    def current_head(self):
        text = self.head_combo.currentText()
        if text == FOLLOW or not text:
            return check_head(self._resp, self.ctx.session.state.view.head) if self._resp is not None else 0
        return "mean" if text == "mean" else int(text.split()[-1])

    def shown_query(self) -> int | None:
        """The query token whose weights are drawn."""
        resp, src = self._resp, self.current_source()
        if resp is None or src is None:
            return None
        q = self.ctx.session.state.view.query
        if isinstance(q, int) and 0 <= q < resp.Tq:
            return q
        return default_query(resp.query_tokens, src.name)

    def overlay_weights(self) -> np.ndarray | None:
        """(gh, gw) weights drawn on the image, or None."""
        return self._overlay

    # ------------------------------------------------------------------ events
    def _on_sources_changed(self, sources) -> None:
        names = [s.name for s in sources if isinstance(s, ImageSource)]
        current = self.source_combo.currentText()
        if [self.source_combo.itemText(i) for i in range(self.source_combo.count())] != names:
            self.source_combo.blockSignals(True)
            self.source_combo.clear()
            self.source_combo.addItems(names)
            if current in names:
                self.source_combo.setCurrentIndex(names.index(current))
            self.source_combo.blockSignals(False)
        self._refresh()

    def _on_view_changed(self, view) -> None:
        if abs(self.view.opacity - view.overlay_opacity) > 1e-9:
            self.view.set_opacity(view.overlay_opacity)
        self._draw_overlay()

    def _on_response(self, resp) -> None:
        if resp is None or not resp.ok:
            return
        self._resp = resp
        items = [FOLLOW, "mean"] + [f"head {h}" for h in range(n_heads(resp))]
        if [self.head_combo.itemText(i) for i in range(self.head_combo.count())] != items:
            keep = self.head_combo.currentText()
            self.head_combo.blockSignals(True)
            self.head_combo.clear()
            self.head_combo.addItems(items)
            self.head_combo.setCurrentIndex(items.index(keep) if keep in items else 0)
            self.head_combo.blockSignals(False)
        self._refresh()

    def _on_opacity(self, value: int) -> None:
        op = value / 100.0
        if abs(self.ctx.session.state.view.overlay_opacity - op) > 1e-9:
            self.ctx.set_view(overlay_opacity=op)

    def _on_patch_clicked(self, patch: int) -> None:
        src = self.current_source()
        if self._resp is None or src is None:
            return
        token = token_of_patch(self._resp.query_tokens, src.name, patch)
        if token is None:
            self.ctx.report(f"the patches of {src.name!r} are not among the queries (cross-attention)", "info")
            return
        self.ctx.set_view(query=token)

    # ------------------------------------------------------------------ drawing
    def _refresh(self) -> None:
        src = self.current_source()
        if src is None:
            self.stack.setCurrentWidget(self.placeholder)
            self._shown_image = None
            self.query_label.setText("")
            return
        self.stack.setCurrentWidget(self.view)
        key = (id(src.data), len(src.data), src.patch, src.policy, src.target)
        if key != self._shown_image:
            try:
                prepared, patches = image_patches(src)
            except (SourceError, ValueError) as exc:
                self.placeholder.setText(f"The image of {src.name!r} cannot be shown: {exc}")
                self.stack.setCurrentWidget(self.placeholder)
                self._shown_image = None
                return
            self.view.set_image(prepared, patches.grid, src.patch)
            self._grid = tuple(patches.grid)
            self._shown_image = key
        self._draw_overlay()

    def _set_overlay(self, w, levels=None) -> None:
        self._overlay = w
        self.view.set_overlay(w, levels=levels)

    def _draw_overlay(self) -> None:
        resp, src = self._resp, self.current_source()
        if src is None or self._shown_image is None:
            return
        keys = image_keys(resp.key_tokens, src.name) if resp is not None else None
        if keys is None or keys.grid != self._grid:
            self._set_overlay(None)
            self.view.set_highlight(None)
            self.query_label.setText("waiting for the computation…" if resp is None else
                                     f"{src.name!r} is not among the keys of the last computation")
            self.rendered.emit()
            return
        q = self.shown_query()
        head = self.current_head()
        rw = row_weights(resp, q, engine_scale(self.ctx.session.state)) if q is not None else None
        if rw is None:
            self._set_overlay(None)
            self.query_label.setText("no query token selected" if q is None else
                                     "this score rule keeps no weights for a long sequence")
        else:
            w = patch_weights(rw, keys, head)  # (gh, gw)
            hi = float(w.max())
            self._set_overlay(w, (0.0, hi if hi > 0 else 1.0))
            label = resp.query_labels[q]
            who = "mean over heads" if head == "mean" else f"head {head}"
            self.query_label.setText(f"query {q} {label!r} · {who} · Σ over patches {w.sum():.3f}")
        t = resp.query_tokens[q] if q is not None and q < len(resp.query_tokens) else None
        if t is not None and t.source == src.name and t.patch is not None:
            self.view.set_highlight(t.patch)
        else:
            self.view.set_highlight(None)
        self.rendered.emit()


PANEL = PanelSpec(id="image", title="Attention over the image", factory=ImagePanel, area="right", order=40,
                  shortcut="Ctrl+3")


if __name__ == "__main__":
    raise SystemExit(run_panel_alone(ImagePanel, demo="vit-image"))
