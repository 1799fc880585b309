"""The Score-rule variants tab (seed 001): scaled dot product, dot product, uniform, additive
(Bahdanau), multiplicative (Luong) and linear attention. Choosing a rule executes ``SetScoreRule``
(undoable; everything recomputes); below, the selected query's weights under every rule side by
side, on the same q and k (additive and multiplicative use their own seeded parameters, as the
session would).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QLabel, QSpinBox

from attnviz.model.commands import SetScoreRule
from attnviz.model.diagnostics.variants import RULE_FORMULAS, rule_formula
from attnviz.model.score_rules import (DOT_FAMILY, RULES, ScoreRuleConfig, dot_scale, linear_normalise,
                                       masked_softmax, rule_params, rule_scores)
from attnviz.ui.diagnostics.common import cell, connect_event, fit_height, fmt, head_mask, new_table, selected_head
from attnviz.ui.diagnostics.tab import DiagnosticTab

MAX_KEYS = 40  # key columns of the comparison table at most


def row_under_rule(config: ScoreRuleConfig, q, k, mask_row, nh: int, h: int) -> np.ndarray:
    """Weights (Tk,) of one query row q (hs,) against k (Tk, hs) under ``config`` for head h of nh."""
    hs = q.shape[0]
    q3, k3 = q[None, None, :], k[None]  # (1, 1, hs), (1, Tk, hs)
    if config.name in DOT_FAMILY:
        s = np.einsum("hqd,hkd->hqk", q3, k3) * dot_scale(config.name, hs)  # (1, 1, Tk)
    else:
        s = rule_scores(config, q3, k3, rule_params(config, nh, hs), head=h)  # (1, 1, Tk)
    m = mask_row[None, None, :]  # (1, 1, Tk)
    w, _ = linear_normalise(s, m) if config.name == "linear" else masked_softmax(s, m)
    return w[0, 0]  # (Tk,)


class VariantsTab(DiagnosticTab):
    """Rule selector (a session command), its formula, and every rule on the selected query."""

    title = "Score rules"

    def __init__(self, ctx, parent=None):
        super().__init__(ctx, parent)
        self.rule = QComboBox(self)
        for name, f in RULE_FORMULAS.items():
            self.rule.addItem(f.title, name)
        self.seed = QSpinBox(self)
        self.seed.setRange(0, 1_000_000)
        self.seed.setToolTip("Seed of the additive / multiplicative rule's own parameters")
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Score rule", self))
        bar.addWidget(self.rule)
        bar.addWidget(QLabel("parameter seed", self))
        bar.addWidget(self.seed)
        bar.addStretch(1)
        self.formula = QLabel(" ", self)
        self.formula.setStyleSheet("font-size: 15pt;")
        self.formula.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.weights_text = QLabel(" ", self)
        self.note = QLabel(" ", self)
        self.note.setWordWrap(True)
        form = QFormLayout()
        form.addRow("formula", self.formula)
        form.addRow("weights", self.weights_text)
        form.addRow("why", self.note)
        self.compare_title = QLabel(" ", self)
        self.table = new_table()
        self.outer.addLayout(bar)
        self.outer.addLayout(form)
        self.outer.addWidget(self.compare_title)
        self.outer.addWidget(self.table)
        self.outer.addStretch(1)
        self.outer.addWidget(self.status)
        self._show_rule(ctx.session.state.score_rule)
        self.rule.currentIndexChanged.connect(self._on_rule_chosen)
        self.seed.valueChanged.connect(self._on_rule_chosen)
        connect_event(self, ctx.session.events.score_rule, self._on_score_rule_changed)
        connect_event(self, ctx.session.events.view, lambda *_: self.invalidate())

    def _on_rule_chosen(self, *_):
        cur = self.ctx.session.state.score_rule
        new = replace(cur, name=self.rule.currentData(), seed=int(self.seed.value()))
        if new != cur:
            self.ctx.execute(SetScoreRule(new))

    def _on_score_rule_changed(self, config):
        self._show_rule(config)
        self.invalidate()

    def _show_rule(self, config):
        for w, value in ((self.rule, self.rule.findData(config.name)), (self.seed, int(config.seed))):
            w.blockSignals(True)
            (w.setCurrentIndex if w is self.rule else w.setValue)(value)
            w.blockSignals(False)
        f = rule_formula(config.name)
        self.formula.setText(f.unicode)
        self.formula.setToolTip(f.plain)
        self.weights_text.setText(f.weights)
        self.note.setText(f.note)
        self.seed.setEnabled(config.name in ("additive", "multiplicative"))

    def redraw(self, resp, state):
        self._show_rule(state.score_rule)
        self.table.clear()
        if resp is None or resp.q is None or resp.Tq == 0 or resp.Tk == 0:
            return
        nh = resp.q.shape[0]
        h, note = selected_head(state, nh)
        i = state.view.query if state.view.query is not None and state.view.query < resp.Tq else 0
        nk = min(resp.Tk, MAX_KEYS)
        mask_row = head_mask(resp, h, [i])[0]  # (Tk,)
        cur = state.score_rule
        self.table.setRowCount(len(RULES))
        self.table.setColumnCount(nk)
        self.table.setHorizontalHeaderLabels([str(s) for s in resp.key_labels[:nk]])
        self.table.setVerticalHeaderLabels([RULE_FORMULAS[r].title for r in RULES])
        for r, name in enumerate(RULES):
            w = row_under_rule(replace(cur, name=name), resp.q[h, i], resp.k[h], mask_row, nh, h)  # (Tk,)
            for j in range(nk):
                self.table.setItem(r, j, cell(fmt(w[j], 2), tooltip=repr(float(w[j])), bold=name == cur.name))
        fit_height(self.table, len(RULES))
        extra = f" (first {nk} of {resp.Tk} keys)" if nk < resp.Tk else ""
        alibi = "; ALiBi's bias is left out here" if state.positional.kind == "alibi" else ""
        self.compare_title.setText(f"weights of query {i} {resp.query_labels[i]!r} under every rule, head {h}"
                                   f"{extra}{alibi}" + (f" — {note}" if note else ""))
