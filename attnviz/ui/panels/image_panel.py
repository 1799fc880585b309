"""The attention-over-the-image panel: the selected query's weights (the class token's when none is
selected) over an image source's patches, drawn on the image; clicking a patch selects its token as
the query everywhere; the image's class token is switched on or off here too (an undoable edit). For
long sequences the one row is recomputed from q, k and lse
(:func:`attnviz.model.display.response_views.row_weights`). Without an image the panel draws the
row as a bar chart over every key instead, so it is never a dead end.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QSizePolicy, QStackedLayout, QVBoxLayout,
                               QWidget)

from attnviz.model.commands import AddSource, SetPatch
from attnviz.model.display.response_views import (check_head, default_query, engine_scale, head_mask,
                                                  image_keys, n_heads, patch_weights, row_weights, token_of_patch)
from attnviz.model.sequence import image_patches
from attnviz.model.source_files import IMAGE_FILTER, image_source_from_file
from attnviz.model.state import ImageSource
from attnviz.sources.errors import SourceError
from attnviz.ui.file_actions import Prompts
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.image_overlay import PatchImageView
from attnviz.ui.widgets.label_ticks import clear_label_ticks, label_ticks
from attnviz.ui.widgets.matrix_frame import wrap_plot_title
from attnviz.ui.messages import Level

FOLLOW = "selected head"  # head choice that follows the heatmap's head
BAR_VALUES = 16  # up to this many keys, each bar is labelled with its weight
BAR_WIDTH = 0.8  # of the distance between two keys


def key_colours(segments, Tk: int, fallback: str = "#808080") -> list[str]:
    """(Tk,) colour of each key: its segment's colour."""
    out = [fallback] * Tk
    for seg in segments:
        for j in range(max(seg.start, 0), min(seg.stop, Tk)):
            out[j] = seg.color
    return out


def bars_by_colour(colours) -> dict[str, np.ndarray]:
    """{colour: indices of the keys drawn in it}, in the order the colours first appear."""
    out: dict[str, list[int]] = {}
    for j, c in enumerate(colours):
        out.setdefault(c, []).append(j)
    return {c: np.asarray(ix, dtype=np.int64) for c, ix in out.items()}


class QueryBars(pg.PlotWidget):
    """One query's weights over every key as bars (the image panel's view without an image).

    The bars of one colour (one segment's keys) are one :class:`pyqtgraph.BarGraphItem` with one brush
    and a one-pixel outline of the same colour: its rectangles are drawn in one call, and a bar narrower
    than a pixel (2,900 keys on 600 px) still shows as a line, so a long row is never an empty chart. The
    key labels are as many as fit without overlapping at the plot's width and zoom (:func:`label_ticks`)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMenuEnabled(False)
        self.setMouseEnabled(x=True, y=False)
        self.plotItem.hideButtons()
        wrap_plot_title(self.plotItem)  # a long query label wraps the title, never widens the chart
        self.plotItem.showGrid(y=True, alpha=0.25)
        self.plotItem.setLabel("left", "weight")
        self.plotItem.getAxis("left").enableAutoSIPrefix(False)  # weights read 0.685, not 685 x 0.001
        self._values: list[pg.TextItem] = []
        self.bar_items: list[pg.BarGraphItem] = []  # one per key colour
        self.masked = pg.ScatterPlotItem(symbol="x", size=9)
        self.addItem(self.masked)
        self.weights: np.ndarray | None = None  # (Tk,) drawn heights
        self.ticks = None  # the key labels' keeper (label_ticks), once a row is drawn
        self.on_theme_changed(current_theme())

    def _set_bars(self, w: np.ndarray, colours) -> None:
        for item in self.bar_items:
            self.removeItem(item)
        self.bar_items = []
        x = np.arange(w.shape[0], dtype=np.float64)  # (Tk,)
        for colour, ix in bars_by_colour(colours).items():
            c = QColor(colour)
            item = pg.BarGraphItem(x=x[ix], height=w[ix], width=BAR_WIDTH, brush=pg.mkBrush(c),
                                   pen=pg.mkPen(c, width=1, cosmetic=True))
            self.addItem(item)
            self.bar_items.append(item)
        self.masked.setZValue(1)

    def set_row(self, weights, allowed, labels, colours, title: str) -> None:
        """Draw ``weights`` (Tk,), mark keys not ``allowed`` (Tk,) bool, label ticks with ``labels``."""
        w = np.asarray(weights, dtype=np.float64)  # (Tk,)
        n = w.shape[0]
        self.weights = w
        x = np.arange(n, dtype=np.float64)  # (Tk,)
        self._set_bars(w, colours)
        dead = np.flatnonzero(~np.asarray(allowed, dtype=bool))
        self.masked.setData(x=x[dead], y=np.zeros(dead.size))
        for item in self._values:
            self.removeItem(item)
        self._values = []
        if n <= BAR_VALUES:
            fg = current_theme().plot_foreground
            for j in range(n):
                t = pg.TextItem(f"{w[j]:.3f}", color=fg, anchor=(0.5, 1.0))
                t.setPos(float(j), float(w[j]))
                self.addItem(t)
                self._values.append(t)
        hi = float(w.max()) if n else 1.0
        self.plotItem.setYRange(0.0, hi * 1.12 if hi > 0 else 1.0, padding=0)
        pad = max(0.6, 0.01 * n)  # a few pixels: the first and last bars clear of the axes
        self.plotItem.setXRange(-pad, max(n - 1 + pad, 0.6), padding=0)
        self.plotItem.setTitle(title, size="9pt")
        self.ticks = label_ticks(self.plotItem, list(labels))

    def clear_row(self, title: str) -> None:
        self.weights = None
        for item in self._values:
            self.removeItem(item)
        self._values = []
        for item in self.bar_items:
            self.removeItem(item)
        self.bar_items = []
        self.masked.setData(x=[], y=[])
        clear_label_ticks(self.plotItem)
        self.plotItem.setTitle(title, size="9pt")

    def on_theme_changed(self, theme) -> None:
        self.setBackground(theme.plot_background)
        for name in ("left", "bottom"):
            ax = self.plotItem.getAxis(name)
            ax.setPen(theme.plot_foreground)
            ax.setTextPen(theme.plot_foreground)
        self.masked.setPen(pg.mkPen(theme.marker, width=2))
        self.masked.setBrush(pg.mkBrush(theme.marker))
        for t in getattr(self, "_values", ()):
            t.setColor(theme.plot_foreground)
        self.plotItem.titleLabel.setAttr("color", theme.plot_foreground)
        self.plotItem.titleLabel.setText(self.plotItem.titleLabel.text)


#: the no-image notes' link: it opens the same file dialog as the sidebar's Add ▾ ▸ Image…
ADD_IMAGE_LINK = '<a href="add-image">Add an image…</a>'


class ImagePanel(QWidget):
    """One image source with the selected query's attention over its patches."""

    rendered = Signal()  # the overlay shows the newest response and selection

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self.prompts = Prompts()  # the window gives its own (the tests' scripted answers)
        self._resp = None
        self._failed = ""  # why the last computation failed (then nothing is drawn)
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
        self.source_label = QLabel("image", self)
        bar.addWidget(self.source_label)
        bar.addWidget(self.source_combo)
        self.class_token = QCheckBox("&class token", self)
        self.class_token.setToolTip("prepend a [CLS] token to the image's patches, as ViT does (its weights are "
                                    "drawn when no query is selected)")
        bar.addWidget(self.class_token)
        bar.addSpacing(6)
        bar.addWidget(QLabel("head", self))
        bar.addWidget(self.head_combo)
        bar.addStretch(1)
        self.alpha_note = QLabel("transparent pixels: over white", self)
        self.alpha_note.setToolTip("Transparency is composited over white, as a viewer shows the picture. "
                                   "The Pretrained panel and 'attnviz-cli model' instead ignore it, as transformers' "
                                   "convert(\"RGB\") does, so a checkpoint sees the stored colours it would see there.")
        self.alpha_note.setStyleSheet("color: palette(mid);")
        bar.addWidget(self.alpha_note)

        self._view: PatchImageView | None = None  # made when an image is first shown (see ``view``)
        self.placeholder = QLabel(f"No image source.<br>{ADD_IMAGE_LINK} (or drop an image file onto the window)",
                                  self)
        self._link_label(self.placeholder)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.bars = QueryBars(self)
        self.bars_hint = QLabel("No image source: the bars show the selected query's weights over every key. "
                                f"{ADD_IMAGE_LINK} (or drop one onto the window) to see them on its patches.", self)
        self._link_label(self.bars_hint)
        self.bars_hint.setWordWrap(True)
        self.bars_hint.setContentsMargins(8, 2, 8, 4)
        self.bars_hint.setStyleSheet("color: palette(mid);")
        self.bars_page = QWidget(self)
        bl = QVBoxLayout(self.bars_page)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.setSpacing(0)
        self.bars.setParent(self.bars_page)
        self.bars_hint.setParent(self.bars_page)
        bl.addWidget(self.bars, 1)
        bl.addWidget(self.bars_hint)
        self.stack = QStackedLayout()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.bars_page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(bar)
        self.query_label.setContentsMargins(8, 0, 8, 0)
        layout.addWidget(self.query_label)
        layout.addLayout(self.stack, 1)

        self.source_combo.activated.connect(lambda _i: self._refresh())
        self.class_token.toggled.connect(self._on_class_token_toggled)
        self.head_combo.activated.connect(lambda _i: self._draw_overlay())
        ctx.session.events.sources.connect(self._on_sources_changed)
        ctx.session.events.view.connect(self._on_view_changed)
        ctx.response_changed.connect(self._on_response)
        self._on_sources_changed(ctx.session.state.sources)
        if ctx.response is not None:
            self._on_response(ctx.response)

    @property
    def view(self) -> PatchImageView:
        """The image with its patches' weights, made the first time it is wanted: with no image source (the
        long-context demo) the panel shows bars, and the view, a whole graphics scene with its colour bar,
        would only lengthen the panel's construction."""
        if self._view is None:
            view = PatchImageView(self)
            view.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
            view.set_opacity(self.ctx.session.state.view.overlay_opacity)
            view.slider.valueChanged.connect(self._on_opacity)
            view.patch_clicked.connect(self._on_patch_clicked)
            self._view = view
            self.stack.insertWidget(1, view)  # between the placeholder and the bars, as always
        return self._view

    def has_view(self) -> bool:
        """True once the image view has been made (an image source was shown, or ``view`` was read)."""
        return self._view is not None

    # ------------------------------------------------------------------ state
    def current_source(self) -> ImageSource | None:
        name = self.source_combo.currentText()
        try:
            src = self.ctx.session.state.source(name)
        except KeyError:
            return None
        return src if isinstance(src, ImageSource) else None

    def _link_label(self, label: QLabel) -> None:
        """A note whose link opens the add-image dialog, by mouse or by keyboard (Tab to it, Enter). Its
        format stays automatic: the placeholder's later plain texts keep their line breaks."""
        label.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                      | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        label.linkActivated.connect(lambda _href: self.add_image_dialog())

    def add_image_dialog(self) -> bool:
        """Ask for an image file and add it as a new source at the end (one undo step); False when
        none was added (cancelled, or the file is not an image: said in the status bar)."""
        path = self.prompts.open_file(self, "Add image", IMAGE_FILTER)
        if not path:
            return False
        try:
            src = image_source_from_file(self.ctx.session.state, path)
        except (SourceError, ValueError) as exc:
            self.ctx.report(Level.ERROR, f"cannot add {Path(path).name}: {exc}")
            return False
        return bool(self.ctx.execute(AddSource(src, label="Add image")))

    def current_head(self):
        text = self.head_combo.currentText()
        if text == FOLLOW or not text:
            return check_head(self._resp, self.ctx.session.state.view.head) if self._resp is not None else 0
        return "mean" if text == "mean" else int(text.split()[-1])

    def shown_query(self) -> int | None:
        """The query token whose weights are drawn: the selected one; else the image's class token (or
        first patch) when the image gives queries, else the first query."""
        resp, src = self._resp, self.current_source()
        if resp is None or resp.Tq == 0:
            return None
        q = self.ctx.session.state.view.query
        if isinstance(q, int) and 0 <= q < resp.Tq:
            return q
        d = default_query(resp.query_tokens, src.name) if src is not None else None
        return 0 if d is None else d

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
        if self._view is not None and abs(self.view.opacity - view.overlay_opacity) > 1e-9:
            self.view.set_opacity(view.overlay_opacity)
        self._draw_overlay()

    def _on_response(self, resp) -> None:
        if resp is None or resp.cancelled:
            return
        if not resp.ok:  # the weights on show belong to a state that is gone
            self._resp = None
            self._failed = resp.error or "the attention could not be computed"
            self._refresh()
            return
        self._resp = resp
        self._failed = ""
        items = [FOLLOW, "mean"] + [f"head {h}" for h in range(n_heads(resp))]
        if [self.head_combo.itemText(i) for i in range(self.head_combo.count())] != items:
            keep = self.head_combo.currentText()
            self.head_combo.blockSignals(True)
            self.head_combo.clear()
            self.head_combo.addItems(items)
            self.head_combo.setCurrentIndex(items.index(keep) if keep in items else 0)
            self.head_combo.blockSignals(False)
        self._refresh()

    def _on_class_token_toggled(self, on: bool) -> None:
        src = self.current_source()
        if src is None or src.class_token == on:
            return
        what = "Add" if on else "Remove"
        if not self.ctx.execute(SetPatch(src.name, class_token=on, label=f"{what} the class token of {src.name}")):
            self._show_class_token(self.current_source())  # refused: the box shows the session again

    def _show_class_token(self, src) -> None:
        self.class_token.setVisible(src is not None)
        if src is not None and self.class_token.isChecked() != src.class_token:
            self.class_token.blockSignals(True)
            self.class_token.setChecked(src.class_token)
            self.class_token.blockSignals(False)

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
            self.ctx.report(Level.INFO, f"the patches of {src.name!r} are not among the queries (cross-attention)")
            return
        self.ctx.set_view(query=token)

    # ------------------------------------------------------------------ drawing
    def _refresh(self) -> None:
        src = self.current_source()
        has_images = self.source_combo.count() > 0
        self.source_label.setVisible(has_images)
        self.source_combo.setVisible(has_images)
        self._show_class_token(src)
        if src is None:
            self._shown_image = None
            self._overlay = None
            self._draw_bars()
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

    def _draw_bars(self) -> None:
        """No image: the shown query's weights over every key as bars."""
        resp = self._resp
        if resp is None:
            self.placeholder.setText(f"Nothing to show: {self._failed}" if self._failed else
                                     "No image source.\nThe selected query's weights over the keys appear here "
                                     "once the attention is computed.")
            self.stack.setCurrentWidget(self.placeholder)
            self.query_label.setText("")
            return
        self.stack.setCurrentWidget(self.bars_page)
        q = self.shown_query()
        head = self.current_head()
        rw = row_weights(resp, q, engine_scale(self.ctx.session.state)) if q is not None else None
        if rw is None:
            text = "no query token" if q is None else "this score rule keeps no weights for a long sequence"
            self.bars.clear_row(text)
            self.query_label.setText(text)
            self.rendered.emit()
            return
        w = rw.mean(axis=0) if head == "mean" else rw[head]  # (Tk,)
        allowed = head_mask(resp, head)[q]  # (Tk,)
        who = "mean over heads" if head == "mean" else f"head {head}"
        label = resp.query_labels[q]
        self.bars.set_row(w, allowed, resp.key_labels, key_colours(resp.key_segments, resp.Tk),
                          f"query {q} {label!r} → weights over the {resp.Tk:,} keys · {who}")
        self.query_label.setText(f"query {q} {label!r} · {who} · Σ over keys {w.sum():.3f}")
        self.rendered.emit()

    def bar_weights(self) -> np.ndarray | None:
        """(Tk,) weights drawn as bars, or None (an image is shown, or nothing yet)."""
        return self.bars.weights if self.stack.currentWidget() is self.bars_page else None

    def _draw_overlay(self) -> None:
        resp, src = self._resp, self.current_source()
        if src is None:
            self._draw_bars()
            return
        if self._shown_image is None:
            return
        keys = image_keys(resp.key_tokens, src.name) if resp is not None else None
        if keys is None or keys.grid != self._grid:
            self._set_overlay(None)
            self.view.set_highlight(None)
            self.query_label.setText((f"nothing to show: {self._failed}" if self._failed else
                                      "waiting for the computation…") if resp is None else
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
