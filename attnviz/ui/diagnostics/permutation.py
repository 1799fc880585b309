"""The Permutation tab (seeds 001 and 002): attention is blind to word order. Shuffling the token
embeddings shuffles the outputs the same way (up to rounding) without a positional encoding, and not
with one; under cross-attention, shuffling the key-value pairs together leaves the output unchanged.
The check uses the session's embeddings and projections (hand-set q/k components are not part of it)
and runs off the GUI thread.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QCheckBox, QComboBox, QGroupBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from attnviz.model import compute
from attnviz.model.compute import compile_mask
from attnviz.model.diagnostics.permutation import cross_permutation_check, permutation_check
from attnviz.model.heads import init_weights
from attnviz.model.positional import PositionalConfig
from attnviz.model.sequence import assemble
from attnviz.ui.diagnostics.common import fmt_sci, selected_head
from attnviz.ui.diagnostics.tab import STUDY_MEMORY_MESSAGE, DiagnosticTab
from attnviz.ui.diagnostics.titled_view import TitledView
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.widgets.flow_layout import flow_row, labelled
from attnviz.ui.widgets.heatmap import AttentionHeatmap

ENCODINGS = ("sinusoidal", "learned", "rope", "alibi")
MAX_TOKENS = 1024  # tokens shuffled at most (the reference runs (nh, T, T) in float64, four times)
TOLERANCE = 1e-9  # a deviation at or below this is rounding


def run_permutation(state, seed: int, kind: str, use_mask: bool):
    """Both checks, without and with the encoding ``kind`` (pure; runs on the worker).

    Returns a dict: ``cross``, ``plain`` and ``encoded`` check results (``encoded`` may be the text
    of why it cannot run), ``labels`` (query labels), ``kv_labels``, ``note``.
    """
    qseq, kseq = assemble(state, [])
    W = init_weights(state.model)
    notes = []
    pos = state.positional
    enc = PositionalConfig(kind, base=pos.base, seed=pos.seed, scale=pos.scale)
    none = PositionalConfig("none")
    xq, xk = qseq.embeddings, kseq.embeddings  # (Tq, d_model), (Tk, d_model) before positions
    if xq.shape[0] > MAX_TOKENS or xk.shape[0] > MAX_TOKENS:
        notes.append(f"only the first {MAX_TOKENS} tokens are shuffled")
        xq, xk = xq[:MAX_TOKENS], xk[:MAX_TOKENS]
    if xq.shape[0] < 2:
        raise ValueError("shuffling needs at least two tokens")
    out = {"cross": state.cross is not None, "labels": qseq.labels[:xq.shape[0]],
           "kv_labels": kseq.labels[:xk.shape[0]]}
    if state.cross is not None:
        out["plain"] = cross_permutation_check(xq, xk, W.W_q, W.W_k, W.W_v, none, seed=seed, tol=TOLERANCE)
        try:
            out["encoded"] = cross_permutation_check(xq, xk, W.W_q, W.W_k, W.W_v, enc, seed=seed, tol=TOLERANCE)
        except ValueError as exc:
            out["encoded"] = str(exc)
    else:
        mask = None
        if use_mask:
            n = xq.shape[0]
            if qseq.T * kseq.T > compute.DENSE_MASK_CELLS:  # a long sequence: only the rows shuffled, never the whole mask
                m = np.asarray(state.mask.compile_rows(list(qseq.segments), list(kseq.segments), qseq.T, kseq.T,
                                                       nh=state.model.nh, rows=(0, n)))[..., :n]  # (n, n) or (nh, n, n)
            else:
                m = compile_mask(state, qseq, kseq)
            if m.ndim == 3:
                notes.append("the mask differs per head: the check runs without it")
            else:
                mask = m[:xq.shape[0], :xq.shape[0]]  # (T, T)
        out["plain"] = permutation_check(xq, W.W_q, W.W_k, W.W_v, none, seed=seed, mask=mask, tol=TOLERANCE)
        try:
            out["encoded"] = permutation_check(xq, W.W_q, W.W_k, W.W_v, enc, seed=seed, mask=mask, tol=TOLERANCE)
        except ValueError as exc:
            out["encoded"] = str(exc)
    out["note"] = " · ".join(notes)
    return out


def verdict(deviation: float, what: str, holds: str, fails: str) -> str:
    return f"{what}: max deviation {fmt_sci(deviation)} → " + (holds if deviation <= TOLERANCE else fails)


class PermutationTab(DiagnosticTab):
    """Shuffle button, deviations without and with a positional encoding, and the outputs."""

    title = "Permutation"

    def __init__(self, ctx, parent=None):
        super().__init__(ctx, parent)
        self.shuffle = QPushButton("Shuffle tokens", self)
        self.encoding = QComboBox(self)
        self.encoding.addItems(ENCODINGS)
        kind = ctx.session.state.positional.kind
        self.encoding.setCurrentText(kind if kind in ENCODINGS else "sinusoidal")
        self.use_mask = QCheckBox("apply the session's mask (it stays with the slots)", self)
        self.busy = QLabel(" ", self)
        self.busy.setWordWrap(True)  # a long result line wraps instead of widening the window
        bar = flow_row((self.shuffle, labelled("compare with positional &encoding", self.encoding, self),
                        self.use_mask))
        self.order = QLabel(" ", self)
        self.order.setWordWrap(True)
        self.plain_box = QGroupBox("without a positional encoding", self)
        self.plain_label = QLabel(" ", self)
        self.plain_label.setWordWrap(True)
        QVBoxLayout(self.plain_box).addWidget(self.plain_label)
        self.encoded_box = QGroupBox("with a positional encoding", self)
        self.encoded_label = QLabel(" ", self)
        self.encoded_label.setWordWrap(True)
        QVBoxLayout(self.encoded_box).addWidget(self.encoded_label)
        self.expected = TitledView(AttentionHeatmap())  # each title whole above its map
        self.plain_map = TitledView(AttentionHeatmap())
        self.encoded_map = TitledView(AttentionHeatmap())
        boxes = QHBoxLayout()
        boxes.addWidget(self.plain_box, 1)
        boxes.addWidget(self.encoded_box, 1)
        maps = QHBoxLayout()
        for m in (self.expected, self.plain_map, self.encoded_map):
            maps.addWidget(m, 1)
        self.outer.addLayout(bar)
        self.outer.addWidget(self.busy)
        self.outer.addWidget(self.order)
        self.outer.addLayout(boxes)
        self.outer.addLayout(maps, 1)
        self.outer.addWidget(self.status)
        self.seed = 0
        self.result = None  # the dict of the last check drawn
        self.job = LatestJob("attnviz-permutation", self, memory_message=STUDY_MEMORY_MESSAGE)
        self.job.done.connect(self._on_result)
        self.job.failed.connect(self._on_failed)
        self.shuffle.clicked.connect(self.reshuffle)
        self.encoding.currentIndexChanged.connect(lambda *_: self.run())
        self.use_mask.toggled.connect(lambda *_: self.run())

    def reshuffle(self) -> int:
        """A new shuffle (the next seed)."""
        self.seed += 1
        return self.run()

    def run(self) -> int:
        self.busy.setText("running…")
        return self.job.submit(run_permutation, self.ctx.session.state, self.seed, self.encoding.currentText(),
                               self.use_mask.isChecked())

    def redraw(self, resp, state):
        self.use_mask.setEnabled(state.cross is None)
        self.run()

    def _on_failed(self, _jid, msg: str):
        self.busy.setText(msg)
        self.result = None

    def _on_result(self, _jid, r):
        self.result = r
        self.busy.setText(f"{self.job.last_seconds * 1000:.0f} ms" + (f" · {r['note']}" if r["note"] else ""))
        kind = self.encoding.currentText()
        self.encoded_box.setTitle(f"with the {kind} positional encoding")
        state = self.ctx.session.state
        h, _ = selected_head(state, state.model.nh)
        self.plain_map.setVisible(not r["cross"])
        self.encoded_map.setVisible(not r["cross"])
        if r["cross"]:
            self._draw_cross(r, kind)
        else:
            self._draw_self(r, kind, h)

    def _draw_self(self, r, kind, h):
        p, e = r["plain"], r["encoded"]
        labels = list(r["labels"])
        perm = p.perm
        shown = 40
        before = " ".join(labels[:shown]) + (" …" if len(labels) > shown else "")
        after = " ".join(labels[t] for t in perm[:shown]) + (" …" if len(labels) > shown else "")
        self.order.setText(f"tokens:  {before}\nshuffled:  {after}")
        self.plain_label.setText(verdict(p.max_deviation, "outputs of the shuffled tokens vs the old outputs shuffled",
                                         "they permute with the tokens (equivariant)",
                                         "they do not permute with the tokens"))
        if isinstance(e, str):
            self.encoded_label.setText(f"cannot run: {e}")
        else:
            self.encoded_label.setText(verdict(e.max_deviation, "same comparison",
                                               "they still permute with the tokens",
                                               "they do not permute: the positions stayed while the content moved"))
        shuffled = [labels[t] for t in perm]
        hv = p.out.shape[2]
        cols = [f"v{c}" for c in range(hv)]
        shown = [p.out[h][perm], p.out_perm[h]] + ([] if isinstance(e, str) else [e.out_perm[h]])
        lo, hi = min(float(m.min()) for m in shown), max(float(m.max()) for m in shown)
        levels = (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)  # one colour scale: equal colours = equal numbers
        self.expected.set_matrix(shown[0], row_labels=shuffled, col_labels=cols, value_label="output",
                                 title=f"old outputs, shuffled (head {h})", levels=levels)
        self.plain_map.set_matrix(shown[1], row_labels=shuffled, col_labels=cols, value_label="output",
                                  title="outputs of the shuffled tokens, no encoding", levels=levels)
        if isinstance(e, str):
            self.encoded_map.clear()
        else:
            self.encoded_map.set_matrix(shown[2], row_labels=shuffled, col_labels=cols, value_label="output",
                                        title=f"outputs of the shuffled tokens, {kind}", levels=levels)

    def _draw_cross(self, r, kind):
        p, e = r["plain"], r["encoded"]
        ql, kl = list(r["labels"]), list(r["kv_labels"])
        self.order.setText("queries:  " + " ".join(ql) + "   →   " + " ".join(ql[t] for t in p.query_perm)
                           + "\nkey-value pairs:  " + " ".join(kl) + "   →   " + " ".join(kl[t] for t in p.kv_perm))

        def text(c):
            return (verdict(c.query_deviation, "queries shuffled", "the outputs permute with them (equivariant)",
                            "the outputs do not permute with them") + "\n"
                    + verdict(c.kv_deviation, "key-value pairs shuffled together",
                              "the outputs do not change (invariant)", "the outputs change"))
        self.plain_label.setText(text(p))
        self.encoded_label.setText(f"cannot run: {e}" if isinstance(e, str) else text(e))
        hv = p.out.shape[2]
        cols = [f"v{c}" for c in range(hv)]
        self.expected.set_matrix(p.out[0], row_labels=ql, col_labels=cols, value_label="output",
                                 title="outputs (head 0), queries in order")
