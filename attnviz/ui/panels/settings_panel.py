"""The model settings dock: sizes, seeds, positional encoding, score rule (and the soft cap c of the
softcap rule), engine kernel and flash tile sizes. Every change is one undoable command; a change the model refuses is reported and the control
returns to the session's value. Hand-set weights (the seeds' worked examples) survive a seed change;
a size change drops them, says so, and Undo brings them back.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QSizePolicy, QSpinBox, QVBoxLayout, QWidget)

from attnviz.model.commands import SetKernel, SetPositional, SetScoreRule, set_model
from attnviz.model.positional import KINDS as POSITIONAL_KINDS
from attnviz.model.score_rules import FORMULAS, MAX_CAP, RULES
from attnviz.model.state import KERNEL_NAMES
from attnviz.ui.messages import Level

SIZE_FIELDS = ("d_model", "nh", "hs", "hv")  # changing these invalidates hand-set weight shapes
BASE_KINDS = ("sinusoidal", "rope")  # encodings whose frequencies follow the base
LEARNED_KINDS = ("learned",)  # encodings with a seeded table (scale and seed)


def _spin(lo: int, hi: int, tip: str, step: int = 1) -> QSpinBox:
    s = QSpinBox()
    s.setMinimumWidth(60)
    s.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)  # not as wide as 2**31
    s.setRange(lo, hi)
    s.setSingleStep(step)
    s.setKeyboardTracking(False)  # typed numbers apply on Enter / focus out, not per digit
    s.setToolTip(tip)
    return s


def _double(lo: float, hi: float, decimals: int, step: float, tip: str) -> QDoubleSpinBox:
    s = QDoubleSpinBox()
    s.setMinimumWidth(60)
    s.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
    s.setRange(lo, hi)
    s.setDecimals(decimals)
    s.setSingleStep(step)
    s.setKeyboardTracking(False)
    s.setToolTip(tip)
    return s


class SettingsPanel(QWidget):
    """Form over ``state.model``, ``positional``, ``score_rule`` and ``kernel``."""

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self.d_model = _spin(1, 4096, "embedding width of every token")
        self.nh = _spin(1, 256, "number of attention heads")
        self.hs_auto = QCheckBox("auto", self)
        self.hs_auto.setToolTip("head size d_k = d_model / heads (as in the original transformer)")
        self.hs = _spin(1, 4096, "query/key size per head, d_k")
        self.hv_auto = QCheckBox("= hs", self)
        self.hv_auto.setToolTip("value size per head equals the head size hs")
        self.hv = _spin(1, 4096, "value size per head, d_v (the width of each head's output)")
        self.seed = _spin(0, 2**31 - 1, "seed of W_q, W_k, W_v and W_o")
        self.embed_seed = _spin(0, 2**31 - 1, "seed of token, patch and class-token embeddings")
        self.handset_note = QLabel("", self)
        self.handset_note.setWordWrap(True)
        self.handset_note.setStyleSheet("color: palette(mid);")

        self.positional = QComboBox(self)
        self.positional.addItems(list(POSITIONAL_KINDS))
        self.positional.setToolTip("none · sinusoidal and learned add a table to X · RoPE rotates q and k · "
                                   "ALiBi biases the scores")
        self.pos_base = _double(1.01, 1e9, 2, 1000.0, "frequency base of the sinusoidal table or of RoPE: "
                                "w_i = base^(-2i/d); larger bases give longer wavelengths (10000 in the "
                                "original transformer)")
        self.pos_scale = _double(0.0, 100.0, 4, 0.01, "standard deviation of the learned position table")
        self.pos_seed = _spin(0, 2**31 - 1, "seed of the learned position table")
        self.score_rule = QComboBox(self)
        self.score_rule.addItems(list(RULES))
        for i, name in enumerate(RULES):
            self.score_rule.setItemData(i, FORMULAS.get(name, name), Qt.ItemDataRole.ToolTipRole)
        self.cap = _double(0.01, MAX_CAP, 2, 5.0, "soft cap c of the softcap rule: scaled scores s become "
                           "c·tanh(s/c), about s while |s| ≪ c and never beyond ±c (Gemma 2 uses 50)")
        self.kernel = QComboBox(self)
        self.kernel.addItems(list(KERNEL_NAMES))
        self.kernel.setToolTip("flash: tiled online softmax with block-sparse tile skipping · naive: full "
                               "matrix · reference: float64 numpy")
        self.block_m = _spin(1, 4096, "BLOCK_M: query rows per flash tile", 16)
        self.block_n = _spin(1, 4096, "BLOCK_N: key columns per flash tile", 16)

        model_box = QGroupBox("Sizes and seeds", self)
        f = QFormLayout(model_box)
        f.setVerticalSpacing(4)
        f.addRow("d_model", self.d_model)
        f.addRow("heads", self.nh)
        hs_row = QHBoxLayout()
        hs_row.addWidget(self.hs, 1)
        hs_row.addWidget(self.hs_auto)
        f.addRow("head size", hs_row)
        hv_row = QHBoxLayout()
        hv_row.addWidget(self.hv, 1)
        hv_row.addWidget(self.hv_auto)
        f.addRow("value size", hv_row)
        seeds = QHBoxLayout()
        seeds.addWidget(self.seed, 1)
        seeds.addWidget(QLabel("tokens", self))
        seeds.addWidget(self.embed_seed, 1)
        f.addRow("seed: weights", seeds)
        f.addRow(self.handset_note)
        att_box = QGroupBox("Attention", self)
        g = QFormLayout(att_box)
        g.setVerticalSpacing(4)
        g.addRow("positions", self.positional)
        self.base_label = QLabel("base", self)
        g.addRow(self.base_label, self.pos_base)
        self.learned_row = QWidget(self)
        learned_row = QHBoxLayout(self.learned_row)
        learned_row.setContentsMargins(0, 0, 0, 0)
        self.pos_scale.setParent(self.learned_row)
        self.pos_seed.setParent(self.learned_row)
        learned_row.addWidget(self.pos_scale, 1)
        self.pos_seed_label = QLabel("seed", self.learned_row)
        learned_row.addWidget(self.pos_seed_label)
        learned_row.addWidget(self.pos_seed, 1)
        self.scale_label = QLabel("table scale", self)
        g.addRow(self.scale_label, self.learned_row)
        self._att_form = g  # rows of the positional parameters show for the encodings that have them
        g.addRow("score rule", self.score_rule)
        g.addRow("soft cap c", self.cap)
        g.addRow("kernel", self.kernel)
        tiles = QHBoxLayout()
        tiles.addWidget(self.block_m)
        tiles.addWidget(QLabel("×", self))
        tiles.addWidget(self.block_n)
        g.addRow("flash tiles", tiles)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(model_box)
        layout.addWidget(att_box)
        layout.addStretch(1)

        self.d_model.valueChanged.connect(lambda v: self._set_model(d_model=v))
        self.nh.valueChanged.connect(lambda v: self._set_model(nh=v))
        self.hs.valueChanged.connect(lambda v: self._set_model(hs=v))
        self.hs_auto.toggled.connect(self._on_hs_auto)
        self.hv.valueChanged.connect(lambda v: self._set_model(hv=v))
        self.hv_auto.toggled.connect(self._on_hv_auto)
        self.pos_base.valueChanged.connect(lambda v: self._set_positional(base=float(v)))
        self.pos_scale.valueChanged.connect(lambda v: self._set_positional(scale=float(v)))
        self.pos_seed.valueChanged.connect(lambda v: self._set_positional(seed=int(v)))
        self.seed.valueChanged.connect(lambda v: self._set_model(seed=v))
        self.embed_seed.valueChanged.connect(lambda v: self._set_model(embed_seed=v))
        self.positional.activated.connect(self._on_positional)
        self.score_rule.activated.connect(self._on_score_rule)
        self.cap.valueChanged.connect(self._on_cap)
        self.kernel.activated.connect(lambda i: self._run(SetKernel(name=KERNEL_NAMES[i])))
        self.block_m.valueChanged.connect(lambda v: self._run(SetKernel(block_m=v)))
        self.block_n.valueChanged.connect(lambda v: self._run(SetKernel(block_n=v)))
        for ev in (ctx.session.events.model, ctx.session.events.positional, ctx.session.events.score_rule,
                   ctx.session.events.kernel):
            ev.connect(lambda *_: self.sync())
        self.sync()

    # ------------------------------------------------------------------ edits
    def _run(self, cmd) -> bool:
        ok = self.ctx.execute(cmd)
        if not ok:
            self.sync()  # the model refused: show its values again
        return ok

    def _set_model(self, **changes) -> bool:
        model = self.ctx.session.state.model
        if all(getattr(model, k) == v for k, v in changes.items()):
            return True
        drop = model.handset and any(k in SIZE_FIELDS for k in changes)
        ok = self._run(set_model(drop_handset=drop, **changes))
        if ok and drop:
            self.ctx.report(Level.INFO, "the hand-set weights no longer fit the new sizes and were replaced by seeded ones "
                                        "(Undo brings them back)")
        return ok

    def _on_hs_auto(self, auto: bool) -> None:
        model = self.ctx.session.state.model
        self._set_model(hs=None if auto else model.head_size)

    def _on_hv_auto(self, auto: bool) -> None:
        model = self.ctx.session.state.model
        self._set_model(hv=None if auto else model.value_size)

    def _set_positional(self, **changes) -> bool:
        pos = self.ctx.session.state.positional
        if all(getattr(pos, k) == v for k, v in changes.items()):
            return True
        try:
            new = replace(pos, **changes)
        except ValueError as exc:
            self.ctx.report(Level.ERROR, str(exc))
            self.sync()
            return False
        return self._run(SetPositional(new))

    def _on_positional(self, index: int) -> None:
        pos = self.ctx.session.state.positional
        self._run(SetPositional(replace(pos, kind=POSITIONAL_KINDS[index])))

    def _on_score_rule(self, index: int) -> None:
        rule = self.ctx.session.state.score_rule
        self._run(SetScoreRule(replace(rule, name=RULES[index])))

    def _on_cap(self, value: float) -> None:
        rule = self.ctx.session.state.score_rule
        if float(value) != rule.cap:
            self._run(SetScoreRule(replace(rule, cap=float(value))))

    # ------------------------------------------------------------------ view
    def sync(self) -> None:
        """Show the session's values (without emitting edits)."""
        state = self.ctx.session.state
        m, k = state.model, state.kernel
        pos = state.positional
        widgets = (self.d_model, self.nh, self.hs, self.hs_auto, self.hv, self.hv_auto, self.seed, self.embed_seed,
                   self.positional, self.pos_base, self.pos_scale, self.pos_seed, self.score_rule, self.cap,
                   self.kernel, self.block_m, self.block_n)
        for w in widgets:
            w.blockSignals(True)
        self.d_model.setValue(m.d_model)
        self.nh.setValue(m.nh)
        self.hs.setValue(m.head_size)
        self.hs_auto.setChecked(m.hs is None)
        self.hs.setEnabled(m.hs is not None)
        self.hv.setValue(m.value_size)
        self.hv_auto.setChecked(m.hv is None)
        self.hv.setEnabled(m.hv is not None)
        self.seed.setValue(m.seed)
        self.embed_seed.setValue(m.embed_seed)
        self.positional.setCurrentIndex(POSITIONAL_KINDS.index(pos.kind))
        self.pos_base.setValue(pos.base)
        self.pos_scale.setValue(pos.scale)
        self.pos_seed.setValue(pos.seed)
        for w in (self.base_label, self.pos_base):
            w.setEnabled(pos.kind in BASE_KINDS)
        for w in (self.scale_label, self.pos_scale, self.pos_seed_label, self.pos_seed):
            w.setEnabled(pos.kind in LEARNED_KINDS)
        self._att_form.setRowVisible(self.pos_base, pos.kind in BASE_KINDS)
        self._att_form.setRowVisible(self.learned_row, pos.kind in LEARNED_KINDS)
        self.score_rule.setCurrentIndex(RULES.index(state.score_rule.name))
        self.score_rule.setToolTip(FORMULAS.get(state.score_rule.name, ""))
        self.cap.setValue(state.score_rule.cap)
        self._att_form.setRowVisible(self.cap, state.score_rule.name == "softcap")
        self.kernel.setCurrentIndex(KERNEL_NAMES.index(k.name))
        self.block_m.setValue(k.block_m)
        self.block_n.setValue(k.block_n)
        engine = state.score_rule.engine and state.positional.kind != "alibi"
        for w in (self.kernel, self.block_m, self.block_n):
            w.setEnabled(engine)
        for w in widgets:
            w.blockSignals(False)
        self.handset_note.setText("Hand-set weights: seeds leave them; a size change replaces them."
                                  if m.handset else "")
        self.handset_note.setVisible(m.handset)
