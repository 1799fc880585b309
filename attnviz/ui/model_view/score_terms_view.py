"""The Pretrained panel's "Score terms" tab: DeBERTa's disentangled attention of the selected head as its three
terms — content to content, content to position, position to content — and their sum, the score the softmax
takes, side by side on one colour scale, under a one-line legend of the formula. Hovering a cell of any map
reads that cell's three terms, their sum and the weight. The tab is enabled for DeBERTa runs only (the maps
come from :mod:`attnviz.checkpoints.score_terms`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from attnviz.checkpoints.score_terms import (LEGEND_DETAIL, TOTAL, TermMaps, cell_note, deberta_legend,
                                            has_deberta_terms, head_terms)
from attnviz.ui import colormaps
from attnviz.ui.widgets.heatmap import AttentionHeatmap

TAB_TITLE = "Score terms"
ROW_WIDTH = 880  # px: at least this wide, the four maps stand in one row; narrower, two by two


def _term_map(own_bar: bool) -> AttentionHeatmap:
    h = AttentionHeatmap()
    if not own_bar:  # one colour scale for the four: only the total keeps its colour bar
        h.frame.ci.layout.removeItem(h.colorbar)  # out of the layout only: the scene still owns (and deletes) it
        h.colorbar.hide()
    return h


# The four maps (c2c, c2p, p2c, total), made ahead one a turn before the view (together they held a turn
# for a tenth of a second); each step gives a list of maps, in order.
MAP_STEPS = (lambda: [_term_map(False)], lambda: [_term_map(False)], lambda: [_term_map(False)],
             lambda: [_term_map(True)])


class ScoreTermsView(QWidget):
    """Three DeBERTa term maps and their total for one head, sharing one colour scale; ``maps``: the four
    made ahead by :data:`MAP_STEPS`, else made here."""

    def __init__(self, parent=None, maps: list | None = None):
        super().__init__(parent)
        self.legend = QLabel("", self)
        self.legend.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.legend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens the tab
        self.legend.setWordWrap(True)  # one line where the tab is wide enough, two in a narrow one
        self.legend.setContentsMargins(6, 2, 6, 0)
        if maps is None or len(maps) != 4:
            maps = [m for step in MAP_STEPS for m in step()]
        self.maps = list(maps)  # c2c, c2p, p2c, total
        for h in self.maps:
            h.setParent(self)
        self._grid = QGridLayout()
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setSpacing(2)
        self._in_row: bool | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.legend)
        layout.addLayout(self._grid, 1)
        self._arrange(True)
        self.result = None
        self.config = None  # the DeBERTa CheckpointConfig of the run (its head size and terms), or None
        self.shown: TermMaps | None = None
        self.selected: tuple[int, int] = (0, 0)

    # -- public API ----------------------------------------------------------------------------
    def set_result(self, result, config=None) -> bool:
        """Hold ``result`` (a ModelAttention) and show the selected head; False (and cleared) when the run keeps
        no DeBERTa score terms."""
        if result is None or not has_deberta_terms(result):
            self.result = self.shown = None
            for h in self.maps:
                h.clear()
            self.legend.setText("")
            return False
        self.result, self.config = result, config
        self.legend.setText(deberta_legend(config))
        self.legend.setToolTip(f"{self.legend.text()}\n{LEGEND_DETAIL}")
        L, nh = result.attentions.shape[:2]
        layer, head = self.selected
        self.set_head(layer if layer < L else 0, head if head < nh else 0)
        return True

    def set_head(self, layer: int, head: int) -> None:
        """Show the terms of ``head`` of ``layer`` (nothing happens without a DeBERTa run)."""
        self.selected = (int(layer), int(head))
        if self.result is None:
            return
        L, nh = self.result.attentions.shape[:2]
        if not (0 <= layer < L and 0 <= head < nh):  # a head of the next run, announced before that run is shown
            return
        maps = head_terms(self.result, layer, head, self.config)
        self.shown = maps
        levels = maps.levels
        r = self.result
        entries = [(name + ("" if present else " (not in this model)"), m) for name, m, present in maps.terms]
        entries.append((f"{TOTAL}  L{layer} h{head}", maps.total))
        for h, (title, m) in zip(self.maps, entries):
            h.set_matrix(m, row_labels=r.labels, col_labels=r.labels, levels=levels, title=title, value_label="score")
            h.set_readout_provider(lambda i, j, mp=maps: cell_note(mp, i, j, r.labels[i], r.labels[j]))

    def set_colormap(self, name: str) -> None:
        if name in colormaps.NAMES:
            for h in self.maps:
                h.set_colormap(name)

    # -- layout --------------------------------------------------------------------------------
    def _arrange(self, in_row: bool) -> None:
        if in_row == self._in_row:
            return
        self._in_row = in_row
        for h in self.maps:
            self._grid.removeWidget(h)
        for i, h in enumerate(self.maps):
            self._grid.addWidget(h, 0 if in_row else i // 2, i if in_row else i % 2)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._arrange(self.width() >= ROW_WIDTH)


def install(panel, maps: list | None = None) -> ScoreTermsView:
    """Add the view as a "Score terms" tab of a ModelViewPanel, enabled while the run shown is a DeBERTa one,
    following the selected head and the session's colour map (``maps``: see :class:`ScoreTermsView`)."""
    view = ScoreTermsView(panel, maps)
    index = panel.tabs.addTab(view, TAB_TITLE)
    panel.tabs.setTabEnabled(index, False)
    panel.tabs.setTabToolTip(index, "DeBERTa's disentangled attention: the selected head's score as its three terms")

    def on_ready(result) -> None:
        ckpt = panel.ckpt
        config = getattr(ckpt, "config", None) if ckpt is not None else None
        shown = view.set_result(result, config)
        if not shown and panel.tabs.currentWidget() is view:  # back to the grid (Qt would pick a neighbour)
            panel.tabs.setCurrentIndex(0)
        panel.tabs.setTabEnabled(panel.tabs.indexOf(view), shown)

    panel.attention_ready.connect(on_ready)
    panel.head_selected.connect(view.set_head)
    view.set_colormap(panel.ctx.session.state.view.colormap)
    panel.ctx.session.events.view.connect(lambda v: view.set_colormap(v.colormap))
    return view
