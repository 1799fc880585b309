"""TileControls: the flash-tile strip under the mask canvas. BLOCK_M x BLOCK_N (the session's kernel
tile size), whether the tile overlay is drawn, the empty / partial / full counts with the share of
skipped tiles, the count of fully masked query rows, and the "Time flash" button with its result.

The measurement itself runs on a :class:`~attnviz.ui.latest_job.LatestJob` worker (never on the GUI
thread) through :func:`attnviz.model.mask.flash_timing.time_flash`; the panel supplies the job.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPushButton, QSpinBox, QVBoxLayout, QWidget

from attnviz.model.display.mask_snapshot import tile_text
from attnviz.model.mask.analysis import TileSummary
from attnviz.ui.widgets.flow_layout import FlowLayout
from attnviz.ui.theme import current_theme


class TileControls(QWidget):
    """Tile size, overlay switch, tile counts, fully masked rows and the flash timing."""

    tile_size_changed = Signal(int, int)  # BLOCK_M, BLOCK_N chosen by the person
    overlay_toggled = Signal(bool)
    time_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.block_m = QSpinBox(self)
        self.block_n = QSpinBox(self)
        for spin, what in ((self.block_m, "BLOCK_M: query rows per flash tile"),
                           (self.block_n, "BLOCK_N: keys per flash tile")):
            spin.setRange(1, 4096)
            spin.setValue(64)
            spin.setKeyboardTracking(False)  # typing "128" is one change, not three
            spin.setToolTip(what)
            spin.valueChanged.connect(self._on_size)
        self.overlay = QCheckBox("Show tiles", self)
        self.overlay.setChecked(True)
        self.overlay.toggled.connect(self.overlay_toggled)
        self.tiles = QLabel("", self)
        self.tiles.setWordWrap(True)
        self.dead = QLabel("", self)
        self.time_button = QPushButton("Time flash", self)
        self.time_button.setToolTip("time the flash kernel on this mask against the dense mask "
                                    "(session q, k, v; median of 5 runs)")
        self.time_button.clicked.connect(self.time_requested)
        self.timing = QLabel("", self)
        self.timing.setWordWrap(True)
        size = QWidget(self)
        sl = QHBoxLayout(size)
        sl.setContentsMargins(0, 0, 0, 0)
        sl.setSpacing(4)
        sl.addWidget(QLabel("Flash tiles", size))
        self.block_m.setParent(size)
        self.block_n.setParent(size)
        sl.addWidget(self.block_m)
        sl.addWidget(QLabel("×", size))
        sl.addWidget(self.block_n)
        row1 = FlowLayout(spacing=10)
        row1.addWidget(size)
        row1.addWidget(self.overlay)
        row1.addWidget(self.dead)
        row2 = QHBoxLayout()
        row2.setContentsMargins(0, 0, 0, 0)
        row2.addWidget(self.time_button)
        row2.addWidget(self.timing, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(row1)
        layout.addWidget(self.tiles)
        layout.addLayout(row2)

    def set_tile_size(self, block_m: int, block_n: int) -> None:
        """Show the session's tile size without emitting a change."""
        for spin, v in ((self.block_m, block_m), (self.block_n, block_n)):
            spin.blockSignals(True)
            spin.setValue(int(v))
            spin.blockSignals(False)

    def set_summary(self, tiles: TileSummary, n_dead: int, scope: str = "") -> None:
        self.tiles.setText(tile_text(tiles) + (f" ({scope})" if scope else ""))
        if n_dead:
            self.dead.setText(f"⚠ {n_dead} fully masked row{'s' if n_dead != 1 else ''}")
            self.dead.setStyleSheet(f"color: {current_theme().marker}; font-weight: bold;")
        else:
            self.dead.setText("no fully masked rows")
            self.dead.setStyleSheet("")

    def set_timing(self, text: str, busy: bool = False, error: bool = False) -> None:
        self.time_button.setEnabled(not busy)
        self.timing.setText(text)
        self.timing.setStyleSheet("color: #d0342c;" if error else "")

    def _on_size(self, *_):
        self.tile_size_changed.emit(self.block_m.value(), self.block_n.value())
