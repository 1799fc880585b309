"""MaskLegend: what the designer's colours mean — rule cells and painted cells (allow / deny), the
flash-tile marks (partial and full outlines, skipped tiles washed out) and the fully-masked-row
marker — drawn with the very colours the mask canvas uses for the current theme."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from attnviz.ui import theme as theme_module
from attnviz.ui.widgets import mask_canvas

_SWATCH = 14
# outline colours of partial / full tiles as the canvas draws them (amber / green if it names none)
_TILE_FALLBACK = {1: "#f0a020", 2: "#30b060"}


def entries() -> list[tuple[str, str, str]]:
    """(kind, colour, text) per legend entry; kind "fill", "outline", "wash" or "marker"."""
    th = theme_module.current_theme()
    c = mask_canvas.mask_colours(th)
    tiles = getattr(mask_canvas, "TILE_COLOURS", _TILE_FALLBACK)
    return [
        ("fill", c.rule_allow, "allowed by its rule"),
        ("fill", c.rule_deny, "masked by its rule"),
        ("fill", c.override_allow, "painted allow"),
        ("fill", c.override_deny, "painted deny"),
        ("outline", tiles.get(1, _TILE_FALLBACK[1]), "partial tile (mask tested)"),
        ("outline", tiles.get(2, _TILE_FALLBACK[2]), "full tile (no mask test)"),
        ("wash", th.plot_background, "empty tile (skipped)"),
        ("marker", th.marker, "fully masked query row"),
    ]


def legend_columns(width: int, column_width: int) -> int:
    """Two columns when ``width`` holds two, else one (a narrow dock)."""
    return 2 if width >= 2 * column_width else 1


class MaskLegend(QWidget):
    """Colour swatches with their meaning: two columns, or one in a narrow panel."""

    def __init__(self, parent=None):
        super().__init__(parent)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def _row_height(self) -> int:
        return max(_SWATCH, QFontMetrics(self.font()).height()) + 4

    def _column_width(self) -> int:
        fm = QFontMetrics(self.font())
        return max(fm.horizontalAdvance(t) for _, _, t in entries()) + _SWATCH + 14

    def _rows(self, width: int) -> int:
        n = len(entries())
        return -(-n // legend_columns(width, self._column_width()))

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt's name
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt's name
        return self._rows(width) * self._row_height()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        w = 2 * self._column_width()
        return QSize(w, self.heightForWidth(w))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        w = self._column_width()
        return QSize(w, self.heightForWidth(w))

    def paintEvent(self, ev):  # noqa: N802 - Qt's name
        p = QPainter(self)
        th = theme_module.current_theme()
        rh = self._row_height()
        cols = legend_columns(self.width(), self._column_width())
        rows = self._rows(self.width())
        col_w = self.width() // cols
        for i, (kind, colour, text) in enumerate(entries()):
            x, y = (i // rows) * col_w, (i % rows) * rh
            sw = QRect(x + 2, y + (rh - _SWATCH) // 2, _SWATCH, _SWATCH)
            if kind == "fill":
                p.fillRect(sw, QColor(colour))
                p.setPen(QColor(th.muted_text))
                p.drawRect(sw)
            elif kind == "outline":
                pen = QPen(QColor(colour))
                pen.setWidthF(2.0)
                p.setPen(pen)
                p.drawRect(sw.adjusted(1, 1, -1, -1))
            elif kind == "wash":
                half = QRect(sw.left(), sw.top(), _SWATCH, _SWATCH)
                p.fillRect(half, QColor(mask_canvas.mask_colours(th).rule_allow))
                wash = QColor(colour)
                wash.setAlpha(150)
                p.fillRect(half, wash)
                p.setPen(QColor(th.muted_text))
                p.drawRect(sw)
            else:
                p.fillRect(QRect(sw.left() + 4, sw.top(), 6, _SWATCH), QColor(colour))
            p.setPen(QColor(th.text))
            p.drawText(QRect(x + _SWATCH + 8, y, col_w - _SWATCH - 10, rh),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, text)
        p.end()
