"""The Flash-vs-reference tab: the session's q, k, v and mask through every engine kernel, compared
with the float64 reference (``attnviz.model.diagnostics.flash_check``).

On "Run check" (off the GUI thread: the first flash call compiles for a few seconds) it shows a
heatmap of the largest output error per kernel and head (log10), and a table with each kernel's
largest output and lse error, its median time and the largest working buffer it holds — the flash
kernel never builds the (T, T) matrix the reference does. The accuracy rule (flash-attention's own)
is stated against the naive kernel in the same precision: at most twice its error.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtWidgets import QComboBox, QLabel, QPushButton, QSpinBox, QSplitter, QVBoxLayout, QWidget
from PySide6.QtCore import Qt

from attnviz.model.diagnostics.flash_check import flash_check
from attnviz.model.score_rules import DOT_FAMILY, dot_scale
from attnviz.ui.diagnostics.common import cell, fit_height, fmt_bytes, fmt_sci, new_table
from attnviz.ui.diagnostics.tab import STUDY_MEMORY_MESSAGE, DiagnosticTab
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.widgets.flow_layout import flow_row, labelled
from attnviz.ui.widgets.heatmap import AttentionHeatmap

COLUMNS = ("kernel", "max |out error|", "max |lse error|", "lse ±inf mismatches", "median time", "largest buffer",
           "what the buffer is")
REFERENCE_LIMIT = 256 << 20  # bytes the float64 reference may hold for the check
ERROR_FLOOR = 1e-18  # errors are drawn as log10(max(error, floor)); an exact 0 sits at the floor


def check_inputs(resp, state, precision: str):
    """(q, k, v, mask, scale, note) for ``flash_check`` from a response, in ``precision``."""
    dtype = np.float32 if precision == "float32" else np.float64
    q, k, v = (np.ascontiguousarray(a, dtype=dtype) for a in (resp.q, resp.k, resp.v))  # (nh, T, d) each
    hs = q.shape[2]
    rule = state.score_rule.name
    note = ""
    if rule in DOT_FAMILY:
        scale = dot_scale(rule, hs)
    else:
        scale = 1.0 / math.sqrt(hs)
        note = f"the session's {rule} rule runs on the numpy path; the kernels are checked on q·k/√{hs}"
    if state.positional.kind == "alibi":
        note = "ALiBi's bias is not an engine input: the kernels are checked without it"
    mask = resp.mask if resp.mask is not None else resp.block_mask  # a long sequence: a TiledMask
    return q, k, v, mask, scale, note


def query_rows_within(nh: int, Tq: int, Tk: int, limit: int = REFERENCE_LIMIT) -> int:
    """Query rows whose float64 reference (three (nh, rows, Tk) matrices) fits in ``limit`` bytes."""
    per_row = 3 * nh * max(Tk, 1) * 8
    return max(1, min(Tq, limit // per_row))


CHART_ROW_PX = 64  # height of one kernel's row in the error chart


def chart_height(n_rows: int, line_px: int) -> int:
    """Height of the error chart for ``n_rows`` kernels: rows of CHART_ROW_PX plus the title, the
    head labels, the band and the readout line (each about a text line), not the whole tab."""
    return int(n_rows * CHART_ROW_PX + 7 * line_px + 24)


class FlashCheckTab(DiagnosticTab):
    """Per-head error heatmap, times and memory of the engine kernels against the reference."""

    title = "Flash vs reference"

    def __init__(self, ctx, parent=None):
        super().__init__(ctx, parent)
        self.run_button = QPushButton("Run check", self)
        self.precision = QComboBox(self)
        self.precision.addItems(["float32", "float64"])
        self.repeats = QSpinBox(self)
        self.repeats.setRange(1, 50)
        self.repeats.setValue(3)
        self.repeats.setPrefix("timed calls ")
        self.busy = QLabel("press Run check to compare the kernels on the current session", self)
        self.busy.setWordWrap(True)  # under the controls: a long line wraps instead of widening the tab
        bar = flow_row((self.run_button, labelled("&precision", self.precision, self), self.repeats))
        self.heatmap = AttentionHeatmap()
        self.table = new_table(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.horizontalHeader().setDefaultSectionSize(110)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setVisible(False)
        self.heatmap.setMinimumWidth(440)  # its title, the kernel names and the colour bar always fit
        # before the first check: empty axes at the height of a two-kernel chart, saying what to do
        # (not a sliver squeezed to the height of its title)
        self.heatmap.setFixedHeight(chart_height(2, self.heatmap.fontMetrics().height()))
        self.heatmap.clear("no check yet: press Run check")
        left = QWidget(self)  # the chart keeps rows of a readable height; the space below stays empty
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.heatmap)
        ll.addStretch(1)
        self.verdict = QLabel(" ", self)
        self.verdict.setWordWrap(True)
        right = QWidget(self)
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.table)
        rl.addWidget(self.verdict)
        rl.addStretch(1)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([480, 720])
        self.outer.addLayout(bar)
        self.outer.addWidget(self.busy)
        self.outer.addWidget(split, 1)
        self.outer.addWidget(self.status)
        self.check = None  # the last FlashCheck drawn
        self.job = LatestJob("attnviz-flash-check", self, memory_message=STUDY_MEMORY_MESSAGE)
        self.job.done.connect(self._on_check)
        self.job.failed.connect(self._on_failed)
        self.run_button.clicked.connect(self.run)

    def redraw(self, resp, state):
        self.run_button.setEnabled(resp is not None and resp.q is not None)
        if self.check is not None:
            self.busy.setText("the session changed since the last check: run it again to compare")

    def run(self) -> int:
        """Start the check on the newest response off the GUI thread (-1 when there is none)."""
        resp = self.ctx.response
        if resp is None or not resp.ok or resp.q is None:
            self.busy.setText("nothing computed yet")
            return -1
        state = self.ctx.session.state
        q, k, v, mask, scale, note = check_inputs(resp, state, self.precision.currentText())
        rows = query_rows_within(q.shape[0], resp.Tq, resp.Tk)
        if hasattr(mask, "rows"):  # a TiledMask: the rows checked, made dense (the reference needs them)
            mask = mask.rows(np.arange(rows))  # (nh or 1, rows, Tk)
        if rows < resp.Tq:  # the float64 reference holds (nh, rows, Tk) matrices: check the first rows
            q = q[:, :rows]  # (nh, rows, hs)
            if mask is not None and mask.shape[-2] != rows:
                mask = np.ascontiguousarray(np.asarray(mask)[..., :rows, :])
            note = "; ".join(n for n in (note, f"the first {rows} of {resp.Tq} query rows (all keys), so the "
                                               f"reference stays within {fmt_bytes(REFERENCE_LIMIT)}") if n)
        self._note = note
        kc = state.kernel
        self.run_button.setEnabled(False)
        self.busy.setText("running… (the first run compiles the kernels, a few seconds)")
        return self.job.submit(flash_check, q, k, v, mask, scale=scale, kernels=("naive", "flash"),
                               repeats=self.repeats.value(), block_m=kc.block_m, block_n=kc.block_n)

    _note = ""

    def _on_failed(self, _jid, msg):
        self.run_button.setEnabled(True)
        self.busy.setText(msg)

    def _on_check(self, _jid, fc):
        self.check = fc
        self.run_button.setEnabled(True)
        nh, Tq, Tk, hs, hv = fc.shape
        self.busy.setText(f"{fc.dtype}, nh={nh}, Tq={Tq}, Tk={Tk}, hs={hs}, hv={hv}; "
                          f"whole check {self.job.last_seconds:.2f} s" + (f" · {self._note}" if self._note else ""))
        avail = [r for r in fc.kernels if r.available]
        if avail:
            err = np.stack([r.out_error for r in avail])  # (n_kernels, nh)
            self.heatmap.set_matrix(np.log10(np.maximum(err, ERROR_FLOOR)), row_labels=[r.kernel for r in avail],
                                    col_labels=[f"head {h}" for h in range(nh)], value_label="log10 |error|",
                                    title=f"largest output error per kernel, head ({fc.dtype})")
            self.heatmap.set_readout_provider(lambda i, j, e=err: f"max |error| {e[i, j]:.3g}")
            self.heatmap.setFixedHeight(chart_height(len(avail), self.heatmap.fontMetrics().height()))
        else:
            self.heatmap.clear()
        rows = (fc.reference,) + fc.kernels
        self.table.setRowCount(len(rows))
        for r, rep in enumerate(rows):
            if not rep.available:
                vals = (rep.kernel, "unavailable", "", "", "", "", rep.message)
            else:
                vals = (rep.kernel, "0 (the spec)" if rep.kernel == "reference" else fmt_sci(rep.max_error),
                        "" if rep.kernel == "reference" else fmt_sci(float(rep.lse_error.max(initial=0.0))),
                        "" if rep.kernel == "reference" else str(int(rep.lse_mismatch.sum())),
                        f"{rep.time_s * 1000:.3g} ms", fmt_bytes(rep.intermediate_bytes), rep.memory_note)
            for c, text in enumerate(vals):
                self.table.setItem(r, c, cell(text, tooltip=text))
        self.table.resizeColumnsToContents()
        fit_height(self.table)
        self.verdict.setText(self._verdict(fc))

    @staticmethod
    def _verdict(fc) -> str:
        by = {r.kernel: r for r in fc.kernels if r.available}
        if "flash" not in by or "naive" not in by:
            return "a kernel is unavailable: no accuracy comparison"
        f, n = by["flash"].max_error, by["naive"].max_error
        if n == 0:
            ok = f == 0
            ratio = "both exact" if ok else f"naive is exact, flash {fmt_sci(f)}"
        else:
            ok = f <= 2 * n
            ratio = f"flash / naive error = {f / n:.2g}"
        fb, rb = by["flash"].intermediate_bytes, fc.reference.intermediate_bytes
        return (f"{ratio} → {'within' if ok else 'OUTSIDE'} the rule 'at most 2x the naive error in the same "
                f"precision'.\nLargest buffer: flash {fmt_bytes(fb)}, reference {fmt_bytes(rb)} — the reference's "
                "score matrix grows as Tq x Tk, flash's tiles stay the same size whatever the sequence length.")
