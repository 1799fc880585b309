"""The Normalisation tab (seed 002): the selected head's raw dot products turned into weights by the
Scaled, No sqrt(d_k) or Uniform rule, with each query row's entropy (nats, against the uniform row's
log n) and largest weight. The selector is ``view.normalisation`` (through ``ctx.set_view``), so every
view that follows it changes together.

``compute`` (a worker past SYNC_CELLS) makes what the tab draws of all three rules (the maps as float32,
their levels, the entropy curves, the tables' text; :mod:`attnviz.model.diagnostics.normalisation_display`),
so ``present`` only hands arrays to the widgets, and a switch of rule on the same response is drawn from the
numbers held. An edit of a long input updates the entropy lines in place (no items or legend made again).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QRadioButton, QSplitter, QWidget, QVBoxLayout
from PySide6.QtCore import Qt, QTimer

import pyqtgraph as pg

from attnviz.model.diagnostics.normalisation import MODES, compare_modes
from attnviz.model.diagnostics.normalisation_display import (BAR_LIMIT, entropy_curves, entropy_range,  # noqa: F401
                                                             keys_drawn, map_display, weight_levels)

from attnviz.ui.diagnostics.common import (KEY_COLOUR, QUERY_COLOUR, cell, connect_event, fit_height, fmt, head_mask,
                                         make_plot, new_table, selected_head)
from attnviz.ui.diagnostics.tab import SYNC_CELLS, DiagnosticTab
from attnviz.ui.diagnostics.titled_view import TitledView
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.label_ticks import label_ticks

MODE_TITLES = {"scaled": "Scaled  softmax(q·k / √dₖ)", "unscaled": "No √dₖ  softmax(q·k)",
               "uniform": "Uniform  1 / n"}
#: query rows studied at most (each row is independent; beyond this only the first rows are shown)
MAX_ROWS = 512
TABLE_ROWS_SHOWN = 6  # rows the table shows before it scrolls: the entropy plot keeps room at 1024 x 700
TABLE_CHUNK = 64  # table rows filled per turn of the event loop
MODE_COLOURS = {"scaled": KEY_COLOUR, "unscaled": QUERY_COLOUR, "uniform": "#999999"}
TABLE_COLUMNS = ("query", "entropy (nats)", "uniform log n", "max weight", "attends most to")


def clip_segments(segments, stop: int) -> list:
    """The segments of keys ``0 <= t < stop``, the last one cut at ``stop``."""
    return [replace(s, stop=min(s.stop, stop)) for s in segments if s.start < stop]


def row_table(cur, query_labels, key_labels) -> list[tuple[str, ...]]:
    """The table's text per query row of one normalisation: token, entropy, its maximum, the largest
    weight and the key it goes to (or the tie)."""
    ties = np.count_nonzero(np.abs(cur.weights - cur.max_weight[:, None]) <= 1e-12, axis=1)  # (rows,)
    out = []
    for i in range(cur.weights.shape[0]):
        a = int(cur.argmax[i])
        best = ("— (no allowed key)" if a < 0 else f"{a} {key_labels[a]}" if ties[i] == 1
                else f"a tie of {int(ties[i])} keys")
        out.append((f"{i} {query_labels[i]}", fmt(cur.entropy_nats[i], 3), fmt(cur.max_entropy_nats[i], 3),
                    fmt(cur.max_weight[i], 3), best))
    return out


class NormalisationTab(DiagnosticTab):
    """Scaled / No sqrt(d_k) / Uniform, bound to ``view.normalisation``."""

    title = "Normalisation"

    def __init__(self, ctx, parent=None):
        super().__init__(ctx, parent)
        self.buttons = {}
        self.group = QButtonGroup(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Normalisation:", self))
        for n, mode in enumerate(MODES):
            b = QRadioButton(MODE_TITLES[mode], self)
            self.buttons[mode] = b
            self.group.addButton(b, n)
            row.addWidget(b)
        row.addStretch(1)
        self.group.idClicked.connect(lambda n: self.ctx.set_view(normalisation=MODES[n]))
        self.summary = QLabel(" ", self)
        self.summary.setWordWrap(True)
        self.heatmap = TitledView(AttentionHeatmap())  # its title whole above it
        self.table = new_table(0, len(TABLE_COLUMNS))
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setDefaultSectionSize(100)
        self.table.verticalHeader().setVisible(False)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.heatmap)
        right = QWidget(self)
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.summary)
        rl.addWidget(self.table)
        self.entropy_plot = make_plot("row entropy under each rule (nats)", "query", "entropy")
        self.entropy_items = []
        rl.addWidget(self.entropy_plot, 1)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self.heatmap.setMinimumWidth(360)
        split.setSizes([560, 700])
        self.outer.addLayout(row)
        self.outer.addWidget(split, 1)
        self.outer.addWidget(self.status)
        self.modes = None  # {mode: Normalisation} of the last redraw
        self._drawn = None  # (response, view.head, numbers) drawn last: another rule of them needs no compute
        self._curve_layout = None  # (rows, selected rule) of the entropy lines on the plot; None: bars or none
        self._tick_labels = None  # the query labels the entropy plot's axis names
        self._table_rows: list = []  # the text of every row of the table being filled
        self.rows_filled = 0  # how many of them the table shows so far
        self._presented = 0  # calls of present that drew a response (the newest one's rest follows it)
        self._sync_buttons(ctx.session.state.view)
        connect_event(self, ctx.session.events.view, self._on_view_changed)

    def _sync_buttons(self, view):
        b = self.buttons[view.normalisation]
        if not b.isChecked():
            b.setChecked(True)

    def _on_view_changed(self, view):
        self._sync_buttons(view)
        self.invalidate()

    @property
    def drawn_last(self):
        """(response, view.head, numbers) drawn last, or None."""
        return self._drawn

    @property
    def rows_to_fill(self) -> int:
        """How many rows the table is filled with (rows_filled reaches it once the last is shown)."""
        return len(self._table_rows)

    def work_size(self, resp, state) -> int:
        return 0 if resp is None or resp.q is None else min(resp.Tq, MAX_ROWS) * resp.Tk * 3

    def redraw(self, response, state):
        """Draw ``response``; another rule (or the same one again) of the response and head already
        computed is drawn from the numbers held, without computing again."""
        drawn = self._drawn
        if drawn is not None and response is not None and drawn[0] is response and drawn[1] == state.view.head:
            if self._numbers_job is not None:
                self._numbers_job.cancel()  # an older request (another head) must not arrive after this
            self.present(drawn[2], response, state)
            return
        super().redraw(response, state)

    def compute(self, resp, state):
        """The three normalisations of the selected head's first MAX_ROWS query rows and what the tab draws
        of each (no Qt): the maps as the heatmap takes them, the entropy curves, the table's text."""
        if resp is None or resp.q is None:
            return None
        h, note = selected_head(state, resp.q.shape[0])
        rows = min(resp.Tq, MAX_ROWS)
        q, k = resp.q[h, :rows], resp.k[h]  # (rows, hs), (Tk, hs)
        if rows == 0 or k.shape[0] == 0:
            return {"empty": True}
        dots = q @ k.T  # (rows, Tk) raw q·k, before any scale
        mask = head_mask(resp, h, slice(0, rows))  # (rows, Tk)
        modes = compare_modes(dots, mask, d_k=q.shape[1])
        return {"empty": False, "h": h, "note": note, "rows": rows, "dots": dots, "modes": modes,
                "map": map_display(modes, mask), "curves": entropy_curves(modes, rows),
                "tables": {m: row_table(modes[m], resp.query_labels, resp.key_labels) for m in MODES}}

    def present(self, numbers, resp, state):
        """Hand the ready arrays and texts of ``numbers`` to the widgets (the table fills over later turns)."""
        if numbers is None or numbers["empty"]:
            self._drawn = None
            self.heatmap.clear()
            self.table.setRowCount(0)
            if numbers is not None:
                self.status.setText("the sequence is empty")
            return
        h, rows, dots, shown = (numbers[n] for n in ("h", "rows", "dots", "map"))
        self.modes = numbers["modes"]
        self._drawn = (resp, state.view.head, numbers)
        mode = state.view.normalisation
        cols, cur = shown.cols, shown.maps[mode]
        ql, kl = list(resp.query_labels[:rows]), list(resp.key_labels)
        self.heatmap.set_matrix(cur.values, mask=shown.mask, row_labels=ql, col_labels=kl[:cols],
                                row_segments=[s for s in resp.query_segments if s.stop <= rows],
                                col_segments=clip_segments(resp.key_segments, cols), levels=cur.levels,
                                title=f"weights under {MODE_TITLES[mode].split('  ')[0]} (head {h})",
                                value_label="weight")
        self.heatmap.set_readout_provider(lambda i, j, d=dots: f"q·k {d[i, j]:.4g}")
        self.table.setRowCount(rows)
        self._table_rows = numbers["tables"][mode]
        self.rows_filled = 0
        self._presented += 1
        if self.work_size(resp, state) <= SYNC_CELLS:
            self._present_rest(numbers, resp, ql, mode)
            return
        # a long input: the map is drawn on this turn, the table, the chart and the summary on the next
        # (together with the map's first painting they held up the window for twice as long)
        QTimer.singleShot(0, self, lambda n=self._presented: n == self._presented
                          and self._present_rest(numbers, resp, ql, mode))

    @property
    def presented(self) -> int:
        """How many times ``present`` has drawn a response (the table, chart and summary of a long input
        follow on the next turn of the event loop)."""
        return self._presented

    def _present_rest(self, numbers, resp, ql, mode) -> None:
        """The table (filled over this and later turns), the entropy chart and the summary of ``numbers``."""
        rows, shown, note = numbers["rows"], numbers["map"], numbers["note"]
        Tq, Tk, cols = resp.Tq, resp.Tk, shown.cols
        self._fill_table(0)
        fit_height(self.table, TABLE_ROWS_SHOWN)
        curves = numbers["curves"]
        self._plot_entropies(curves, ql, mode)
        means = "   ".join(f"{MODE_TITLES[m].split('  ')[0]} {fmt(curves.means[m], 3)}" for m in MODES)
        extra = [note] if note else []
        if Tq > rows:
            extra.append(f"showing the first {rows} of {Tq} query rows")
        if cols < Tk:
            extra.append(f"the map ends at key {cols - 1}: no query shown may attend to a later one")
        self.summary.setText(f"mean row entropy (nats):  {means}\n"
                             "Lower entropy = a sharper, more hard-lookup-like row; uniform has the most."
                             + ("\n" + " · ".join(extra) if extra else ""))

    def _fill_table(self, start: int) -> None:
        """Fill TABLE_CHUNK rows of the table from ``start``, the rest on later turns of the event loop
        (512 rows of items take a few hundred ms: the window answers clicks in between)."""
        rows = self._table_rows
        stop = min(len(rows), start + TABLE_CHUNK)
        left = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        table = self.table
        for i in range(start, stop):
            for c, text in enumerate(rows[i]):
                item = table.item(i, c)
                if item is not None:  # a row the last fill made: only its text changes (a tenth of the time)
                    item.setText(text)
                else:
                    table.setItem(i, c, cell(text, align=left) if c in (0, 4) else cell(text))
        self.rows_filled = stop
        if stop < len(rows):
            QTimer.singleShot(0, self.table, lambda r=rows, s=stop: self._table_rows is r and self._fill_table(s))

    def _plot_entropies(self, curves, labels, selected):
        """Draw the entropy series of ``curves``: grouped bars are made anew; lines of as many rows as the
        last ones keep their items, restyled for the selected rule, and only take the new arrays (an edit or
        a switch of rule on a long input: no items made)."""
        plot = self.entropy_plot.getPlotItem()
        x, rows = curves.x, len(curves.x)  # (rows,)
        if not curves.bars and self._curve_layout is not None and self._curve_layout[0] == rows:
            self._restyle_lines(selected)
        layout = (rows, selected)
        if curves.bars or layout != self._curve_layout:
            for it in self.entropy_items:
                plot.removeItem(it)
            self.entropy_items = []
            w = 0.27
            for n, m in enumerate(MODES):
                e = curves.entropy[m]  # (rows,)
                colour = MODE_COLOURS[m]
                name = MODE_TITLES[m].split("  ")[0] + (" (selected)" if m == selected else "")
                if curves.bars:
                    # outlined in the bar's own colour: a dark outline covered the fill of thin bars (64
                    # queries: the selected rule's bars were drawn black), and no outline at all lets a bar
                    # narrower than a pixel vanish; the legend names the selected rule
                    item = pg.BarGraphItem(x=x + (n - 1) * w, height=e, width=w, brush=colour,
                                           pen=pg.mkPen(colour, width=1), name=name)
                    plot.addItem(item)
                else:
                    pen, name = self._line_style(m, selected)
                    item = plot.plot(x, e, pen=pen, name=name)
                self.entropy_items.append(item)
            self._curve_layout = None if curves.bars else layout
            self._show_legend(selected, curves.bars)
        else:
            for item, m in zip(self.entropy_items, MODES):
                item.setData(x, curves.entropy[m])
        if labels != self._tick_labels:
            label_ticks(plot, labels)  # as many as fit, never overlapping
            self._tick_labels = labels
        lo, hi = curves.y_range
        plot.enableAutoRange(axis="x")
        plot.setYRange(lo, hi, padding=0)

    def _line_style(self, mode: str, selected: str):
        """(pen, legend name) of ``mode``'s entropy line when ``selected`` is the rule shown."""
        name = MODE_TITLES[mode].split("  ")[0] + (" (selected)" if mode == selected else "")
        return pg.mkPen(MODE_COLOURS[mode], width=2 if mode == selected else 1), name

    def _restyle_lines(self, selected: str) -> None:
        """Mark another rule as selected on the lines already drawn: pens change and the legend is written
        again (three labels), the lines stay (a switch of rule on a long input makes no curves)."""
        if self._curve_layout[1] == selected:
            return
        for item, m in zip(self.entropy_items, MODES):
            pen, name = self._line_style(m, selected)
            item.setPen(pen)
            item.opts["name"] = name
        self._show_legend(selected, False)
        self._curve_layout = (self._curve_layout[0], selected)

    def _show_legend(self, selected: str, bars: bool) -> None:
        """The legend is a line above the plot (wrapping between entries at a narrow width): it never
        covers a bar or a line, and is never cut at the plot's right edge."""
        self.entropy_plot.set_legend([(MODE_COLOURS[m], self._line_style(m, selected)[1], "bar" if bars else "line")
                                      for m in MODES])

    def legend_overlaps_data(self) -> bool:
        """True when a legend is drawn inside the plot area, or its line is not above the plot (for tests)."""
        if self.entropy_plot.getPlotItem().legend is not None:
            return True
        legend, view = self.entropy_plot.legend, self.entropy_plot.view
        return legend.isVisible() and legend.geometry().bottom() >= view.geometry().top()

    def entropies(self) -> list[str]:
        """The entropy column as shown (for tests)."""
        return [self.table.item(r, 1).text() for r in range(self.table.rowCount())]
