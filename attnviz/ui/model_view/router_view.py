"""The Pretrained panel's "Experts" tab: a mixture-of-experts decoder's routing (Mixtral, Qwen2-MoE, Qwen3-MoE)
as a layers x tokens strip beside the selected head's map. Each cell is one token in one layer, split top to
bottom into the router's top-k experts, most probable first, each band's height its share of the weights and
its colour the expert; a dense layer (no router) is grey. The selected layer's row is outlined: the router of
layer L runs after layer L's attention, and layer L + 1's attention reads the experts' mix. The tooltip names a
cell's experts and weights; clicking a row selects that layer in the panel. The routing comes from the same
pass as the maps (``DecoderAttention.experts``); the tab is enabled for mixture-of-experts runs only.
"""

from __future__ import annotations

import colorsys

import numpy as np
from PySide6.QtCore import QEvent, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPen
from PySide6.QtWidgets import QLabel, QScrollArea, QSizePolicy, QToolTip, QVBoxLayout, QWidget

from attnviz.checkpoints.decoder_experts import expert_load, routing_note, run_routing
from attnviz.ui.theme import current_theme

TAB_TITLE = "Experts"
SUB_ROWS = 24  # image rows per layer: the resolution of the weight bands
MIN_CELL = 4  # px per token at least; more tokens than fit scroll sideways
ROW_PX = (10, 40)  # px per layer row, at least and at most
LEFT, RIGHT, TOP, BOTTOM = 34, 4, 4, 16  # margins: layer labels, token ticks
DENSE_RGB = (150, 150, 150)  # a layer with a dense MLP
SEPARATE_PX = 6  # px per token from which thin gaps part the cells
LABEL_PX = 26  # px per token from which the tokens are written under their columns (else every n-th index)
KEY_LIMIT = 16  # the colour key lists the experts up to this many


def expert_palette(n: int) -> np.ndarray:
    """(n, 3) uint8 colours of experts 0 .. n-1: hues a golden-ratio step apart, saturation and value alternating,
    so neighbouring ids differ and any number of experts gets colours."""
    out = np.empty((max(n, 0), 3), dtype=np.uint8)
    for e in range(n):
        r, g, b = colorsys.hsv_to_rgb((e * 0.618034) % 1.0, 0.55 + 0.3 * (e % 2), 0.92 - 0.22 * ((e // 2) % 2))
        out[e] = (round(r * 255), round(g * 255), round(b * 255))
    return out


def strip_image(experts: np.ndarray, weights: np.ndarray, palette: np.ndarray, sub: int = SUB_ROWS) -> np.ndarray:
    """(L * sub, T, 3) uint8: layer l's rows l*sub .. (l+1)*sub - 1, each token's column split top to bottom into
    its top-k experts' colours, band heights proportional to their weights; dense layers (-1) grey."""
    L, T, k = experts.shape
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)  # (L, T, k)
    total = w.sum(axis=-1, keepdims=True)
    frac = np.where(total > 0, w / np.where(total > 0, total, 1.0), 1.0 / k)  # (L, T, k)
    cum = np.cumsum(frac, axis=-1)  # (L, T, k)
    pos = (np.arange(sub) + 0.5) / sub  # (sub,) centre of each image row in the layer's band
    slot = np.minimum((pos[None, :, None, None] >= cum[:, None, :, :]).sum(axis=-1), k - 1)  # (L, sub, T)
    ids = experts[np.arange(L)[:, None, None], np.arange(T)[None, None, :], slot]  # (L, sub, T) expert drawn
    img = np.empty((L, sub, T, 3), dtype=np.uint8)
    dense = ids < 0
    img[~dense] = palette[ids[~dense] % max(len(palette), 1)]
    img[dense] = DENSE_RGB
    return img.reshape(L * sub, T, 3)


class ExpertStrip(QWidget):
    """Layers x tokens routing, drawn from one image; the selected layer's row outlined."""

    layer_clicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.experts: np.ndarray | None = None  # (L, T, k)
        self.weights: np.ndarray | None = None  # (L, T, k)
        self.labels: list[str] = []
        self.layer = 0
        self._image: QImage | None = None
        self._rgb: np.ndarray | None = None  # kept alive while the QImage reads it

    def set_routing(self, experts, weights, labels, n_experts: int) -> None:
        self.experts, self.weights, self.labels = experts, weights, list(labels)
        L, T, _ = experts.shape
        self._rgb = np.ascontiguousarray(strip_image(experts, weights, expert_palette(n_experts)))
        h, w = self._rgb.shape[:2]
        self._image = QImage(self._rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888)
        self.setMinimumSize(LEFT + RIGHT + T * MIN_CELL, TOP + BOTTOM + L * ROW_PX[0])
        self.update()

    def set_layer(self, layer: int) -> None:
        self.layer = int(layer)
        self.update()

    def plot_rect(self) -> QRectF:
        """Where the cells are drawn: rows of at most ROW_PX[1] px from the top, the width the tokens get."""
        if self.experts is None:
            return QRectF()
        L = self.experts.shape[0]
        row = min(ROW_PX[1], max(ROW_PX[0], (self.height() - TOP - BOTTOM) / L))
        return QRectF(LEFT, TOP, max(1, self.width() - LEFT - RIGHT), row * L)

    def cell_at(self, x: float, y: float) -> tuple[int, int] | None:
        """(layer, token) under widget point (x, y), or None outside the cells."""
        r = self.plot_rect()
        if self.experts is None or not r.contains(x, y):
            return None
        L, T, _ = self.experts.shape
        layer = min(L - 1, int((y - r.top()) / r.height() * L))
        token = min(T - 1, int((x - r.left()) / r.width() * T))
        return layer, token

    def tooltip_at(self, x: float, y: float) -> str:
        cell = self.cell_at(x, y)
        if cell is None:
            return ""
        layer, token = cell
        label = self.labels[token] if token < len(self.labels) else ""
        return routing_note(self.experts, self.weights, layer, token, label)

    def event(self, ev) -> bool:
        if ev.type() == QEvent.Type.ToolTip:
            text = self.tooltip_at(ev.pos().x(), ev.pos().y())
            if text:
                QToolTip.showText(ev.globalPos(), text, self)
            else:
                QToolTip.hideText()
            return True
        return super().event(ev)

    def mousePressEvent(self, ev) -> None:  # noqa: N802 - Qt's name
        cell = self.cell_at(ev.position().x(), ev.position().y())
        if cell is not None and ev.button() == Qt.MouseButton.LeftButton:
            self.layer_clicked.emit(cell[0])
        super().mousePressEvent(ev)

    def paintEvent(self, _ev) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        theme = current_theme()
        p.fillRect(self.rect(), QColor(theme.window))
        if self._image is None:
            p.end()
            return
        r = self.plot_rect()
        L, T, _ = self.experts.shape
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        p.drawImage(r, self._image)
        row = r.height() / L
        font = QFont(p.font())
        font.setPointSizeF(max(6.5, min(9.0, row * 0.6)))
        text = QColor(theme.text)
        muted = QColor(theme.muted_text)
        for layer in range(L):
            f = QFont(font)
            f.setBold(layer == self.layer)
            p.setFont(f)
            p.setPen(text if layer == self.layer else muted)
            dense = bool((self.experts[layer] < 0).all())
            p.drawText(QRectF(0, r.top() + layer * row, LEFT - 4, row),
                       Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                       f"L{layer}" + ("·d" if dense else ""))
        cw = r.width() / T
        back = QColor(theme.window)
        if cw >= SEPARATE_PX:  # thin gaps between tokens and layers, so equal neighbours stay apart
            p.setPen(QPen(back, 1))
            for t in range(1, T):
                x = round(r.left() + t * cw)
                p.drawLine(x, round(r.top()), x, round(r.bottom()))
            for layer in range(1, L):
                y = round(r.top() + layer * row)
                p.drawLine(round(r.left()), y, round(r.right()), y)
        p.setFont(font)
        p.setPen(muted)
        metrics = p.fontMetrics()
        if cw >= LABEL_PX:  # the tokens themselves under their columns
            for t in range(T):
                label = self.labels[t] if t < len(self.labels) else str(t)
                text = metrics.elidedText(label, Qt.TextElideMode.ElideRight, int(cw) - 2)
                p.drawText(QRectF(r.left() + t * cw, r.bottom() + 1, cw, BOTTOM - 2), Qt.AlignmentFlag.AlignHCenter,
                           text)
        else:  # every n-th token's index
            step = max(1, int(np.ceil(30 / cw)))
            for t in range(0, T, step):
                x = r.left() + (t + 0.5) * cw
                p.drawText(QRectF(x - 20, r.bottom() + 1, 40, BOTTOM - 2), Qt.AlignmentFlag.AlignHCenter, str(t))
        if 0 <= self.layer < L:
            pen = QPen(QColor(theme.highlight))
            pen.setWidth(2)
            p.setPen(pen)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(r.left() - 1, r.top() + self.layer * row - 1, r.width() + 2, row + 2).toRect())
        p.end()

    def on_theme_changed(self, _theme) -> None:
        self.update()


class RouterView(QWidget):
    """The legend, the strip (scrolling sideways when the tokens do not fit) and the selected layer's load."""

    layer_clicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.legend = QLabel("", self)
        self.legend.setWordWrap(True)
        self.legend.setContentsMargins(6, 2, 6, 0)
        self.strip = ExpertStrip(self)
        self.scroll = QScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.scroll.setWidget(self.strip)
        self.load = QLabel("", self)
        self.load.setWordWrap(True)
        self.load.setContentsMargins(6, 0, 6, 0)
        self.load.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.key = QLabel("", self)
        self.key.setWordWrap(True)
        self.key.setContentsMargins(6, 0, 6, 2)
        for w in (self.legend, self.load, self.key):
            w.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widen the tab
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.legend)
        layout.addWidget(self.scroll, 1)
        layout.addWidget(self.load)
        layout.addWidget(self.key)
        self.strip.layer_clicked.connect(self.layer_clicked)
        self.n_experts = 0
        self.top_k = 0

    def set_result(self, result, config=None) -> bool:
        """Show the routing ``result`` kept (a mixture-of-experts run); False, and cleared, for any other run."""
        routing = run_routing(result)
        moe = getattr(getattr(config, "decoder", None), "moe", None)
        if routing is None:
            self.strip.experts = self.strip._image = None
            self.strip.update()
            for w in (self.legend, self.load, self.key):
                w.setText("")
            return False
        experts, weights = routing
        self.top_k = experts.shape[-1]
        self.n_experts = int(moe.n_experts) if moe is not None else int(max(experts.max() + 1, 1))
        labels = getattr(result, "labels", [])
        self.strip.set_routing(experts, weights, labels, self.n_experts)
        shared = " + a shared expert every token passes" if moe is not None and moe.shared else ""
        self.legend.setText(
            f"Each token's top-{self.top_k} of {self.n_experts} experts, layer by layer{shared}: colour = expert, "
            "band height = its weight, most probable on top, grey = a dense layer. The router of layer L runs "
            "after layer L's attention; layer L + 1's attention reads the experts' mix. Click a row to select it.")
        self._key()
        self.set_layer(min(self.strip.layer, experts.shape[0] - 1))
        return True

    def set_layer(self, layer: int) -> None:
        """Outline ``layer``'s row and say where its router sends the tokens."""
        self.strip.set_layer(layer)
        experts = self.strip.experts
        if experts is None or not 0 <= layer < experts.shape[0]:
            return
        if (experts[layer] < 0).all():
            self.load.setText(f"L{layer}: a dense MLP, no router (every token passes the same MLP).")
            return
        counts = expert_load(experts, layer, self.n_experts)
        busiest = np.argsort(-counts, kind="stable")[:3]
        T = experts.shape[1]
        top = ", ".join(f"expert {int(e)} ({int(counts[e])} of {T})" for e in busiest if counts[e])
        self.load.setText(f"L{layer}: its {T} tokens go to {int((counts > 0).sum())} of {self.n_experts} experts; "
                          f"most used: {top}.")

    def _key(self) -> None:
        pal = expert_palette(self.n_experts)
        if self.n_experts > KEY_LIMIT:
            self.key.setText(f"{self.n_experts} experts: the colours repeat their hues; the tooltip names each cell's "
                             "experts and weights.")
            return
        chips = " ".join(f"<span style='color:#{r:02x}{g:02x}{b:02x}'>\u25a0</span>&nbsp;{e}"
                         for e, (r, g, b) in enumerate(pal.tolist()))
        self.key.setText(f"experts: {chips}")


def install(panel) -> RouterView:
    """Add the view as an "Experts" tab of a ModelViewPanel, enabled while the run shown routes through a
    mixture of experts, following the selected layer (clicking a row selects that layer, same head)."""
    view = RouterView(panel)
    index = panel.tabs.addTab(view, TAB_TITLE)
    panel.tabs.setTabEnabled(index, False)
    panel.tabs.setTabToolTip(index, "the experts each token's router picks, layer by layer (mixture-of-experts models)")

    def on_ready(result) -> None:
        ckpt = panel.ckpt
        shown = view.set_result(result, getattr(ckpt, "config", None) if ckpt is not None else None)
        if not shown and panel.tabs.currentWidget() is view:  # back to the grid (Qt would pick a neighbour)
            panel.tabs.setCurrentIndex(0)
        panel.tabs.setTabEnabled(panel.tabs.indexOf(view), shown)

    panel.attention_ready.connect(on_ready)
    panel.head_selected.connect(lambda layer, _head: view.set_layer(layer))
    view.layer_clicked.connect(lambda layer: panel.select_head(layer, panel.selected[1]))
    return view
