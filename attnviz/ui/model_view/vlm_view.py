"""VlmView: a vision-language(-action) model in the Pretrained panel. The picture with the selected
query's attention over its patches (each patch group — the image, or SmolVLM's tiles and, on a page of
its own, the global image — its grid of values over its box of the picture; the selected head, the mean
over the layer's heads, or the query's row of the rollout through the language model's layers); under
it the token strip, where clicking a word, an action token or an image token (or a patch of the picture)
selects the query; beside it the layers x heads grid (click a head to select it), the selected head's
whole map under the model's own mask and the head summaries, over a chart per layer of how much the
text (or action) tokens give to the image, the text and the first token. What it draws is computed by
:mod:`attnviz.checkpoints.study`; the panel hands it a :class:`~attnviz.checkpoints.study.VlmOutcome`.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QTabWidget, QVBoxLayout,
                               QWidget)

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.study import (MODE_LABELS, QUERY_MODES, default_query, head_title, map_levels, patch_maps,
                                       query_rows, query_values, token_patch)
from attnviz.model.display.patch_groups import Placed, pages
from attnviz.model.segments import Segment
from attnviz.model.state import PALETTE
from attnviz.ui import colormaps
from attnviz.ui.model_view.share_chart import ShareChart
from attnviz.ui.model_view.summary_view import HeadSummaryView
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.patch_groups_view import PatchGroupsView
from attnviz.ui.widgets.small_multiples import HeadGrid
from attnviz.ui.widgets.token_chips import ChipStyle, TokenChips
from attnviz.ui.workspaces.area import ShareSplitter

TAB_GRID, TAB_HEAD, TAB_SUMMARY = 0, 1, 2
STRIP_ROWS = 3  # token rows the strip shows before it scrolls


def _short(label: str, n: int = 24) -> str:
    s = str(label).replace("\n", "↵")
    return s if len(s) <= n else s[: n - 1] + "…"


# The page's plots, made ahead on turns of the event loop before the page's own (a tenth of a second together,
# most of it again on one turn of their own): PART_STEPS[i] names the plots step i makes.
PART_STEPS = (("grid",), ("detail", "summary"), ("picture",))
_MAKERS = {"grid": HeadGrid, "detail": AttentionHeatmap, "summary": HeadSummaryView, "picture": PatchGroupsView}


def make_parts(names=tuple(_MAKERS)) -> dict:
    """The plots a :class:`VlmView` takes as ``parts`` (those named, by default all of them)."""
    return {name: _MAKERS[name]() for name in names}


class VlmView(QWidget):
    """Picture + token strip | layers x heads grid, selected head, summaries + share chart."""

    head_clicked = Signal(int, int)  # (layer, head) chosen in one of the grids
    query_changed = Signal(int)  # the token whose attention is drawn
    overlay_changed = Signal()  # a new map is drawn over the picture (tests, screenshots)
    mask_requested = Signal()  # "Open mask in Mask workspace"

    def __init__(self, parent=None, parts: dict | None = None):
        super().__init__(parent)
        made = dict(parts or {})  # plots made ahead by make_parts, by name; the others are made here

        def part(name, make):
            got = made.pop(name, None)
            return make() if got is None else got

        self.mode_combo = QComboBox(self)
        for key in QUERY_MODES:
            self.mode_combo.addItem(MODE_LABELS[key], key)
        self.mode_combo.setToolTip("the selected head's weights, the mean over the heads of its layer, or the "
                                   "query's row of the attention rollout through every layer")
        for combo in (self.mode_combo,):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(12)
        self.page_combo = QComboBox(self)
        self.page_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.page_combo.setMinimumContentsLength(9)
        self.page_combo.setToolTip("which patch groups are drawn: the tiles of the picture, or its global image")
        self.page_label = QLabel("picture", self)
        self.page_combo.setVisible(False)  # shown for a run with tiles, or several pictures
        self.page_label.setVisible(False)
        self.mask_button = QPushButton("Open mask in Mask workspace", self)
        self.mask_button.setMinimumWidth(60)  # the text is cut before the window widens
        self.mask_button.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.mask_button.setToolTip("a new session of the model's segments whose mask design is the model's own "
                                    "mask, to compare with the presets and export as code")
        top = QHBoxLayout()
        top.setContentsMargins(6, 2, 6, 0)
        top.addWidget(QLabel("show", self))
        top.addWidget(self.mode_combo)
        top.addWidget(self.page_label)
        top.addWidget(self.page_combo)
        top.addStretch(1)
        self.caption = QLabel(" ", self)
        self.caption.setWordWrap(True)
        self.caption.setContentsMargins(6, 0, 6, 0)
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.picture = part("picture", lambda: PatchGroupsView(self))
        self.strip_label = QLabel("query token (click one; or a patch of the picture)", self)
        self.strip_label.setContentsMargins(6, 0, 6, 0)
        self.strip_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        strip_bar = QHBoxLayout()
        strip_bar.setContentsMargins(0, 0, 6, 0)
        strip_bar.addWidget(self.strip_label, 1)
        strip_bar.addWidget(self.mask_button)
        self.chips = TokenChips(self, style=ChipStyle(max_chars=16))
        row_h = self.chips._row_h + self.chips.chip_style.gap
        self.chips.setFixedHeight(self.chips.chip_style.gap + STRIP_ROWS * row_h + 2)
        left = QWidget(self)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.setSpacing(2)
        lv.addLayout(top)
        lv.addWidget(self.caption)
        lv.addWidget(self.picture, 1)
        lv.addLayout(strip_bar)
        lv.addWidget(self.chips)

        self.grid = part("grid", lambda: HeadGrid(self))
        self.detail = part("detail", lambda: AttentionHeatmap(self))
        self.summary = part("summary", lambda: HeadSummaryView(self))
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.grid, "Layers × heads")
        self.tabs.addTab(self.detail, "Selected head")
        self.tabs.addTab(self.summary, "Head summaries")
        self.chart = ShareChart(self)
        self.side = ShareSplitter(Qt.Orientation.Vertical, self)
        self.side.addWidget(self.tabs)
        self.side.addWidget(self.chart)
        self.side.set_shares([0.6, 0.4])
        self.body = ShareSplitter(Qt.Orientation.Horizontal, self)
        self.body.addWidget(left)
        self.body.addWidget(self.side)
        self.body.set_shares([0.56, 0.44])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.body)

        self.outcome = None
        self.placed: list[Placed] = []
        self.pages = []
        self.query: int | None = None
        self.selected: tuple[int, int] = (0, 0)
        self.overlay_maps: list[np.ndarray] | None = None  # (gh, gw) per patch group, exactly as computed
        self.overlay_levels: tuple[float, float] | None = None
        self._generated = None  # (mode, layer, head) -> ((T,) values, who) or None: a generated token's row
        self.mode_combo.currentIndexChanged.connect(lambda _i: self._draw_overlay())
        self.page_combo.currentIndexChanged.connect(lambda _i: self._draw_picture())
        self.chips.token_clicked.connect(self.select_query)
        self.picture.patch_clicked.connect(self._on_patch_clicked)
        self.grid.head_clicked.connect(self.head_clicked.emit)
        self.summary.head_clicked.connect(self.head_clicked.emit)
        self.detail.row_clicked.connect(self.select_query)
        self.mask_button.clicked.connect(self.mask_requested.emit)

    # -- public API ----------------------------------------------------------------------------
    @property
    def result(self):
        return None if self.outcome is None else self.outcome.result

    @property
    def mode(self) -> str:
        return self.mode_combo.currentData()

    def set_mode(self, mode: str) -> None:
        """Draw the selected head ("head"), the mean over the layer's heads ("mean") or the rollout row."""
        index = self.mode_combo.findData(mode)
        if index < 0:
            raise ValueError(f"unknown view {mode!r}; choose one of {', '.join(QUERY_MODES)}")
        self.mode_combo.setCurrentIndex(index)

    def set_colormap(self, name: str) -> None:
        if name in colormaps.NAMES:
            self.grid.set_colormap(name)
            self.detail.set_colormap(name)
            self.summary.heatmap.set_colormap(name)

    def set_outcome(self, outcome, layer: int = 0, head: int = 0) -> None:
        """Show a vision-language run; the query starts at the token that predicts the answer (a policy:
        its first action token)."""
        self.outcome = outcome
        r = outcome.result
        L, nh = r.attentions.shape[:2]
        self.grid.set_matrices(r.attentions, [f"L{i}" for i in range(L)], [f"h{j}" for j in range(nh)],
                               mask=np.asarray(r.mask, dtype=bool))
        self.summary.set_summaries(outcome.summaries)
        self.chart.set_shares(outcome.shares)
        segs = [Segment(s.name, s.start, s.stop, PALETTE[i % len(PALETTE)]) for i, s in enumerate(r.segments)]
        self.chips.set_tokens(r.labels, r.ids, segs)
        self.placed = [Placed(g.image, g.name, g.grid, g.box) for g in r.patches]
        self.pages = pages(self.placed)
        self.page_combo.blockSignals(True)
        self.page_combo.clear()
        for p in self.pages:
            self.page_combo.addItem(p.title)
        self.page_combo.setCurrentIndex(0)
        self.page_combo.blockSignals(False)
        many = len(self.pages) > 1
        self.page_combo.setVisible(many)
        self.page_label.setVisible(many)
        self.query = default_query(r)
        self.selected = (min(layer, L - 1), min(head, nh - 1))
        self._draw_picture(draw_overlay=False)
        self.select_head(*self.selected)
        self.chips.set_selected(self.query)

    def select_head(self, layer: int, head: int) -> None:
        """Select ``head`` of ``layer``: outlined in the grids, its whole map in "Selected head", and drawn
        over the picture when the view is "selected head" (the mean: that layer's heads)."""
        r = self.result
        if r is None:
            return
        self.selected = (int(layer), int(head))
        self.grid.set_selected(layer, head)
        self.summary.set_selected(layer, head)
        self.detail.set_matrix(r.attentions[layer, head], mask=np.asarray(r.mask, dtype=bool), row_labels=r.labels,
                               col_labels=r.labels, title=head_title(r, layer, head), value_label="weight")
        if self.query is not None:
            self.detail.set_selected_row(self.query)
        self._draw_overlay()

    def select_query(self, token: int) -> None:
        """Draw the attention of ``token`` (a word, an action token or an image token)."""
        r = self.result
        if r is None:
            return
        if not 0 <= int(token) < r.T:
            raise ValueError(f"token {token} is out of range for {r.T} tokens")
        self.query = int(token)
        self._generated = None  # a token of the run chosen: its row is drawn, not the generated token's
        self.chips.set_selected(self.query)
        self.detail.set_selected_row(self.query)
        self._draw_overlay()
        self.query_changed.emit(self.query)

    def set_generated(self, source) -> None:
        """Draw over the picture what ``source(mode, layer, head)`` gives — ((T,) values over this run's tokens,
        who) for a token the Generate tab selected — instead of the query's row; None: the query's row again."""
        self._generated = source
        self._draw_overlay()

    def shown_page(self):
        return self.pages[self.page_combo.currentIndex()] if self.pages else None

    def set_page(self, index: int) -> None:
        if not 0 <= index < len(self.pages):
            raise ValueError(f"page {index} is out of range for {len(self.pages)} pages")
        self.page_combo.setCurrentIndex(index)

    # -- drawing -------------------------------------------------------------------------------
    def _on_patch_clicked(self, group: int, index: int) -> None:
        self.select_query(int(self.result.patches[group].tokens[index]))

    def _draw_picture(self, draw_overlay: bool = True) -> None:
        r, page = self.result, self.shown_page()
        if r is None or page is None or page.image >= len(r.images):
            self.picture.setVisible(False)
            return
        self.picture.setVisible(True)
        self.picture.set_picture(r.images[page.image], self.placed, page.groups)
        if draw_overlay:
            self._draw_overlay()

    def _draw_overlay(self) -> None:
        out, q = self.outcome, self.query
        if out is not None and self._generated is not None and self._draw_generated():
            return
        if out is None or q is None:
            return
        r = out.result
        layer, head = self.selected
        mode = self.mode
        try:
            values = query_values(out, q, mode, layer, head)  # (T,)
        except ValueError as exc:
            self.overlay_maps = None
            self.picture.set_maps(None)
            self.caption.setText(str(exc))
            self.overlay_changed.emit()
            return
        hit = token_patch(r, q)
        self.picture.set_highlight(hit)
        if not r.patches:
            self.overlay_maps, self.overlay_levels = None, None
            self.caption.setText(f"{self._who(q)}: this run has no image tokens")
            self.overlay_changed.emit()
            return
        maps = patch_maps(r, values)
        self.overlay_maps, self.overlay_levels = maps, map_levels(maps)
        self.picture.set_maps(maps, self.overlay_levels, value_label="rollout" if mode == "rollout" else "weight")
        on_image = float(values[r.image_tokens()].sum())
        what = {"head": f"layer {layer} · head {head}", "mean": f"layer {layer} · mean over heads",
                "rollout": f"rollout through {r.attentions.shape[0]} layers (mean over heads)"}[mode]
        _rows, seen = query_rows(r, q)
        blind = "" if seen[r.image_tokens()].any() else " (the mask hides the image from it)"
        lo, hi = self.overlay_levels
        self.caption.setText(f"{self._who(q)} → image patches · {what} · {on_image:.3g} of its attention on the "
                             f"image{blind}; colour {lo:.3g} … {hi:.3g}")
        self.overlay_changed.emit()

    def _draw_generated(self) -> bool:
        """The generated token's row over the picture; False when the source has nothing to draw."""
        r = self.result
        layer, head = self.selected
        mode = self.mode
        try:
            got = self._generated(mode, layer, head)
        except (CheckpointError, ValueError) as exc:
            self.overlay_maps = None
            self.picture.set_maps(None)
            self.caption.setText(str(exc))
            self.overlay_changed.emit()
            return True
        if got is None:
            return False
        values, who = got
        self.picture.set_highlight(None)
        if not r.patches:
            self.overlay_maps, self.overlay_levels = None, None
            self.picture.set_maps(None)
            self.caption.setText(f"{who}: this run has no image tokens")
            self.overlay_changed.emit()
            return True
        maps = patch_maps(r, values)
        self.overlay_maps, self.overlay_levels = maps, map_levels(maps)
        self.picture.set_maps(maps, self.overlay_levels, value_label="rollout" if mode == "rollout" else "weight")
        on_image = float(values[r.image_tokens()].sum())
        what = {"head": f"layer {layer} · head {head}", "mean": f"layer {layer} · mean over heads",
                "rollout": f"rollout through {r.attentions.shape[0]} layers (mean over heads)"}[mode]
        lo, hi = self.overlay_levels
        self.caption.setText(f"{who} → image patches · {what} · {on_image:.3g} of its attention on the image; "
                             f"colour {lo:.3g} … {hi:.3g}")
        self.overlay_changed.emit()
        return True

    def _who(self, q: int) -> str:
        r = self.result
        seg = next((s.name for s in r.segments if s.start <= q < s.stop), "")
        return f"'{_short(r.labels[q])}' (token {q}{', ' + seg if seg else ''})"
