"""BlockGrid: the block level of the mask designer, query blocks by key blocks (segments, or their
sub-blocks when split), each cell a thumbnail of what the pair allows and its rule (bold when the
pair's own, italic when the default). It only emits clicks; geometry lives in :class:`GridGeometry`,
plain arithmetic shared by drawing, hit-testing and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from attnviz.model.display.mask_snapshot import Snapshot
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.mask_canvas import mask_colours, mask_rgba

THUMB_MAX = 48  # thumbnail pixels per block side at most (larger blocks are sampled)


@dataclass(frozen=True)
class GridGeometry:
    """Where the headers and cells of an ``n_rows`` x ``n_cols`` block grid are, in widget pixels."""

    left: int  # width of the row-name column
    top: int  # height of the column-name row
    cell: int  # side of a square cell
    n_rows: int  # query blocks
    n_cols: int  # key blocks

    def cell_rect(self, r: int, c: int) -> QRect:
        return QRect(self.left + c * self.cell, self.top + r * self.cell, self.cell, self.cell)

    def row_header(self, r: int) -> QRect:
        return QRect(0, self.top + r * self.cell, self.left, self.cell)

    def col_header(self, c: int) -> QRect:
        return QRect(self.left + c * self.cell, 0, self.cell, self.top)

    def hit(self, x: float, y: float) -> tuple[str, int, int] | None:
        """("cell", r, c), ("row", r, -1), ("col", -1, c) or None for a point."""
        c = int((x - self.left) // self.cell) if x >= self.left else -1
        r = int((y - self.top) // self.cell) if y >= self.top else -1
        if r >= self.n_rows or c >= self.n_cols:
            return None
        if r >= 0 and c >= 0:
            return "cell", r, c
        if r >= 0 and x < self.left:
            return "row", r, -1
        if c >= 0 and y < self.top:
            return "col", -1, c
        return None


class BlockGrid(QWidget):
    """The (query block x key block) grid of rules."""

    cell_clicked = Signal(int, int)  # (query block index, key block index)
    header_menu = Signal(str, int, QPoint)  # ("q"|"k", block index, global position)

    def __init__(self, parent=None, *, min_cell: int = 30, max_cell: int = 92):
        super().__init__(parent)
        self.min_cell, self.max_cell = min_cell, max_cell
        self.snapshot: Snapshot | None = None
        self.placeholder = "waiting for the sequence…"  # drawn while there is no snapshot
        self._thumbs: list[list[QImage]] = []
        self._hover: tuple[int, int] | None = None
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    # -- content -------------------------------------------------------------------------------
    def clear(self, placeholder: str) -> None:
        """Show no blocks, only ``placeholder``."""
        self.snapshot, self._thumbs, self.placeholder = None, [], placeholder
        self.updateGeometry()
        self.update()

    def set_snapshot(self, snap: Snapshot) -> None:
        self.snapshot = snap
        self._thumbs = [[self._thumbnail(snap, bq, bk) for bk in snap.k_blocks] for bq in snap.q_blocks]
        self.updateGeometry()
        self.update()

    @staticmethod
    def _thumbnail(snap: Snapshot, bq, bk) -> QImage:
        rs = _sample(bq.start, bq.stop)
        cs = _sample(bk.start, bk.stop)
        rule = snap.layers.rules[np.ix_(rs, cs)]  # (h, w)
        over = snap.layers.overrides[np.ix_(rs, cs)]  # (h, w)
        rgba = mask_rgba(rule, over, mask_colours(current_theme()), 1)  # (h, w, 4)
        h, w = rgba.shape[:2]
        img = QImage(rgba.tobytes(), w, h, 4 * w, QImage.Format.Format_RGBA8888)
        return img.copy()  # own the bytes

    # -- geometry ------------------------------------------------------------------------------
    def _header_sizes(self) -> tuple[int, int]:
        fm = QFontMetrics(self.font())
        if self.snapshot is None:
            return 80, 80
        q_w = max(fm.horizontalAdvance(_head_text(b)) for b in self.snapshot.q_blocks)
        k_w = max(fm.horizontalAdvance(_head_text(b)) for b in self.snapshot.k_blocks)
        return min(q_w + 22, 200), min(k_w + 22, 200)

    def geometry_now(self) -> GridGeometry:
        left, top = self._header_sizes()
        nr = len(self.snapshot.q_blocks) if self.snapshot else 1
        nc = len(self.snapshot.k_blocks) if self.snapshot else 1
        avail = min((self.width() - left - 4) / max(nc, 1), (self.height() - top - 4) / max(nr, 1))
        cell = int(max(self.min_cell, min(self.max_cell, avail)))
        return GridGeometry(left, top, cell, nr, nc)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        left, top = self._header_sizes()
        nr = len(self.snapshot.q_blocks) if self.snapshot else 4
        nc = len(self.snapshot.k_blocks) if self.snapshot else 4
        # the smallest readable cells: a column that scrolls sizes its content by the hints, so a larger
        # hint would push the controls under the grid out of view; given more room, cells grow to it
        return QSize(left + nc * self.min_cell + 4, top + nr * self.min_cell + 4)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        left, top = self._header_sizes()
        nr = len(self.snapshot.q_blocks) if self.snapshot else 4
        nc = len(self.snapshot.k_blocks) if self.snapshot else 4
        return QSize(left + nc * self.min_cell + 4, top + nr * self.min_cell + 4)

    def cell_centre(self, r: int, c: int) -> QPoint:
        """Widget position of the centre of cell (r, c) (for tests and tooltips)."""
        return self.geometry_now().cell_rect(r, c).center()

    # -- events --------------------------------------------------------------------------------
    def mousePressEvent(self, ev):  # noqa: N802 - Qt's name
        if self.snapshot is None:
            return
        hit = self.geometry_now().hit(ev.position().x(), ev.position().y())
        if hit is None:
            return
        kind, r, c = hit
        if kind == "cell" and ev.button() == Qt.MouseButton.LeftButton:
            self.cell_clicked.emit(r, c)
        elif kind in ("row", "col"):
            self.header_menu.emit("q" if kind == "row" else "k", r if kind == "row" else c,
                                  ev.globalPosition().toPoint())

    def mouseMoveEvent(self, ev):  # noqa: N802 - Qt's name
        if self.snapshot is None:
            return
        hit = self.geometry_now().hit(ev.position().x(), ev.position().y())
        hover = (hit[1], hit[2]) if hit and hit[0] == "cell" else None
        if hover != self._hover:
            self._hover = hover
            if hover is not None:
                bq, bk = self.snapshot.q_blocks[hover[0]], self.snapshot.k_blocks[hover[1]]
                cell = self.snapshot.cells[hover[0]][hover[1]]
                content = block_content(self.snapshot, *hover)
                terms = "" if content is None else f"\nwith the preset terms: {content}"
                self.setToolTip(f"{bq.name} → {bk.name}: rule {cell.rule.label()}"
                                + ("" if cell.explicit else " (default)") + terms + "\nclick to change the rule")
            else:
                self.setToolTip("right-click a block name to split or merge it")
            self.update()

    def leaveEvent(self, ev):  # noqa: N802 - Qt's name
        self._hover = None
        self.update()

    # -- drawing -------------------------------------------------------------------------------
    def paintEvent(self, ev):  # noqa: N802 - Qt's name
        p = QPainter(self)
        theme = current_theme()
        p.fillRect(self.rect(), QColor(theme.window))
        if self.snapshot is None:
            p.setPen(QColor(theme.muted_text))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.placeholder)
            return
        snap, g = self.snapshot, self.geometry_now()
        fg = QColor(theme.text)
        for r, b in enumerate(snap.q_blocks):
            self._draw_header(p, g.row_header(r), b, vertical=False, fg=fg)
        for c, b in enumerate(snap.k_blocks):
            self._draw_header(p, g.col_header(c), b, vertical=True, fg=fg)
        base = QFont(self.font())
        for r in range(g.n_rows):
            for c in range(g.n_cols):
                rect = g.cell_rect(r, c).adjusted(1, 1, -1, -1)
                p.drawImage(QRectF(rect), self._thumbs[r][c])
                cell = snap.cells[r][c]
                f = QFont(base)
                f.setBold(cell.explicit)
                f.setItalic(not cell.explicit)
                f.setPointSizeF(max(6.5, base.pointSizeF() * (0.85 if g.cell < 56 else 0.95)))
                p.setFont(f)
                fm = QFontMetrics(f)
                text = fit_rule_label(cell_label(snap, r, c), g.cell - 8, fm.horizontalAdvance)
                tw, th = fm.horizontalAdvance(text) + 6, fm.height()
                box = QRectF(rect.center().x() - tw / 2, rect.center().y() - th / 2, tw, th)
                p.fillRect(box, QColor(0, 0, 0, 150) if theme.name == "dark" else QColor(255, 255, 255, 200))
                p.setPen(fg)
                p.drawText(box, Qt.AlignmentFlag.AlignCenter, text)
        p.setFont(base)
        # block borders; a thicker line between segments than between sub-blocks of one segment
        grid_pen = QPen(QColor(theme.muted_text))
        for r in range(g.n_rows + 1):
            y = g.top + r * g.cell
            same = 0 < r < g.n_rows and snap.q_blocks[r].segment == snap.q_blocks[r - 1].segment
            grid_pen.setWidthF(1.0 if same else 2.0)
            grid_pen.setStyle(Qt.PenStyle.DotLine if same else Qt.PenStyle.SolidLine)
            p.setPen(grid_pen)
            p.drawLine(g.left, y, g.left + g.n_cols * g.cell, y)
        for c in range(g.n_cols + 1):
            x = g.left + c * g.cell
            same = 0 < c < g.n_cols and snap.k_blocks[c].segment == snap.k_blocks[c - 1].segment
            grid_pen.setWidthF(1.0 if same else 2.0)
            grid_pen.setStyle(Qt.PenStyle.DotLine if same else Qt.PenStyle.SolidLine)
            p.setPen(grid_pen)
            p.drawLine(x, g.top, x, g.top + g.n_rows * g.cell)
        if self._hover is not None:
            pen = QPen(QColor(theme.hover))
            pen.setWidthF(2.5)
            p.setPen(pen)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(g.cell_rect(*self._hover).adjusted(1, 1, -2, -2))
        p.end()

    def _draw_header(self, p: QPainter, rect: QRect, block, vertical: bool, fg: QColor) -> None:
        swatch = QColor(block.color)
        text = _head_text(block)
        p.save()
        if vertical:
            p.fillRect(QRect(rect.left() + 2, rect.bottom() - 9, rect.width() - 4, 8), swatch)
            p.translate(rect.left() + rect.width() / 2, rect.bottom() - 12)
            p.rotate(-90)
            p.setPen(fg)
            fm = QFontMetrics(self.font())
            p.drawText(QPointF(0, fm.ascent() / 2 - 1), fm.elidedText(text, Qt.TextElideMode.ElideRight,
                                                                        rect.height() - 14))
        else:
            p.fillRect(QRect(rect.right() - 9, rect.top() + 2, 8, rect.height() - 4), swatch)
            p.setPen(fg)
            fm = QFontMetrics(self.font())
            p.drawText(rect.adjusted(4, 0, -12, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                       fm.elidedText(text, Qt.TextElideMode.ElideRight, rect.width() - 16))
        p.restore()


def block_content(snap: Snapshot, r: int, c: int) -> str | None:
    """What the rule layer of block (r, c) allows once the design's preset terms are applied —
    "allow", "deny", "causal" or "mixed" — or None when the design has no preset terms (the pair's
    rule then says it). A token-defined preset (prefix-LM, documents by length) is a deny-everything
    rule OR-ed with a term, so the rule alone would call allowed cells "deny"."""
    if not snap.design.presets:
        return None
    bq, bk = snap.q_blocks[r], snap.k_blocks[c]
    rules = snap.layers.rules
    block = rules[..., bq.start:bq.stop, bk.start:bk.stop]  # (h, w)
    if block.all():
        return "allow"
    if not block.any():
        return "deny"
    off = rules.shape[-1] - rules.shape[-2]  # keys after queries (cross-attention aligns the ends)
    causal = np.arange(bk.start, bk.stop)[None, :] <= np.arange(bq.start, bq.stop)[:, None] + off  # (h, w)
    return "causal" if np.array_equal(block, np.broadcast_to(causal, block.shape)) else "mixed"


def cell_label(snap: Snapshot, r: int, c: int) -> str:
    """The label drawn in block cell (r, c): its rule, or what the preset terms make of it."""
    content = block_content(snap, r, c)
    return snap.cells[r][c].rule.label() if content is None else content


def _sample(start: int, stop: int) -> np.ndarray:
    """At most THUMB_MAX evenly spread indices of start..stop-1."""
    n = stop - start
    if n <= THUMB_MAX:
        return np.arange(start, stop)
    return start + (np.arange(THUMB_MAX) * n) // THUMB_MAX


def _head_text(block) -> str:
    return f"{block.name} ({len(block)})"


#: shorter spellings of rule labels, longest first, for cells too small for the full one
_SHORTER = {"allow": ("allow", "✓"), "deny": ("deny", "✗"), "causal": ("causal", "caus", "◣"),
            "anti-causal": ("anti-causal", "anti", "◥"), "mixed": ("mixed", "mix", "±")}


def rule_label_variants(label: str) -> list[str]:
    """The label and ever shorter spellings of it (the last one is at most two characters where one
    is known)."""
    if label in _SHORTER:
        return list(_SHORTER[label])
    short = label.replace("window ", "w").replace(" (causal)", "c").replace(" (block)", "ᵇ")
    out = [label] + ([short] if short != label else [])
    if label.startswith("ar_mask"):
        out.append("ar")
    return out


def fit_rule_label(label: str, width: float, advance) -> str:
    """The longest spelling of ``label`` whose width (``advance(text)`` pixels) fits ``width``; the
    shortest one when none fits."""
    variants = rule_label_variants(label)
    for v in variants:
        if advance(v) + 6 <= width:
            return v
    return variants[-1]
