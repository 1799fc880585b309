"""Session commands: every command's inverse restores the state; merging; EditMask; bad edits."""

import numpy as np
import pytest

from attnviz.model import commands as C
from attnviz.model.demos import build_demo
from attnviz.model.frozen import FrozenArray
from attnviz.model.mask.presets import preset
from attnviz.model.mask.rules import Rule
from attnviz.model.positional import PositionalConfig
from attnviz.model.score_rules import ScoreRuleConfig
from attnviz.model.state import (CrossConfig, CustomSource, ImageSource, SessionState, TextSource,
                                 TokenizerSpec)


def base():
    return SessionState(sources=(TextSource("prompt", text="by the river"),
                                 ImageSource("cam", data=b"\x89PNG fake", patch=16),
                                 CustomSource("state", count=2)))


COMMANDS = [
    C.AddSource(TextSource("extra", text="bank"), 1),
    C.RemoveSource("cam"),
    C.RenameSource("prompt", "words"),
    C.RecolourSource("state", "#123456"),
    C.MoveSource("state", 0),
    C.ReplaceSource("prompt", TextSource("prompt", text="other")),
    C.ReplaceSource("prompt", TextSource("renamed", text="other")),
    C.SetText("prompt", "at the savings bank"),
    C.SetImage("cam", b"other bytes"),
    C.SetPatch("cam", patch=8, policy="crop", target=(64, 64), class_token=False),
    C.SetCustomBlock("state", count=3, generator="zeros", seed=2, scale=0.5),
    C.SetTokenizer(TokenizerSpec('{"x": 1}', "mine.json")),
    C.SetCross(CrossConfig(("prompt",), ("cam", "state"))),
    C.set_model(d_model=32, nh=8, seed=4),
    C.SetWeight("W_o", np.ones((64, 64))),
    C.SetQKComponent("q", 1, 2, 3, 0.5),
    C.SetPositional(PositionalConfig("sinusoidal")),
    C.SetScoreRule(ScoreRuleConfig("additive", seed=3)),
    C.SetKernel("naive", 32, 16),
    C.SetMask(preset("causal", [])),
    C.set_view(head="mean", query=2, colormap="magma", log_scale=True, matrix="scores"),
]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: type(c).__name__)
def test_inverse_restores_and_reapply_redoes(cmd):
    s0 = base()
    s1, inv = cmd.apply(s0)
    assert s1 != s0
    s2, redo = inv.apply(s1)
    assert s2 == s0
    s3, _ = redo.apply(s2)
    assert s3 == s1
    assert isinstance(cmd.label, str) and cmd.label


def test_remove_source_in_cross_restores_cross():
    s0 = SessionState(sources=base().sources, cross=CrossConfig(("prompt",), ("cam", "state")))
    s1, inv = C.RemoveSource("state").apply(s0)
    assert s1.cross.keys == ("cam",)
    s1b, _ = C.RemoveSource("prompt").apply(s0)
    assert s1b.cross is None
    assert inv.apply(s1)[0] == s0


def test_rename_carries_mask_rules_along():
    from attnviz.model.mask.design import MaskDesign

    s0 = SessionState(sources=base().sources, mask=MaskDesign().with_rule("prompt", "cam", Rule.deny()))
    s1, inv = C.RenameSource("prompt", "words").apply(s0)
    assert s1.mask.rule_for("words", "cam") == Rule.deny() and s1.mask.rule_for("prompt", "cam") is None
    assert inv.apply(s1)[0] == s0


def test_replace_with_a_new_name_undoes_the_mask_rename_too():
    from attnviz.model.mask.design import MaskDesign

    s0 = SessionState(sources=base().sources, mask=MaskDesign().with_rule("prompt", "cam", Rule.deny()))
    s1, inv = C.ReplaceSource("prompt", TextSource("words", text="other")).apply(s0)
    assert s1.mask.rule_for("words", "cam") == Rule.deny()
    s2, _ = inv.apply(s1)
    assert s2.mask.rule_for("prompt", "cam") == Rule.deny() and s2 == s0


def test_rename_follows_cross_and_refuses_duplicates():
    s0 = SessionState(sources=base().sources, cross=CrossConfig(("prompt",), ("cam",)))
    s1, _ = C.RenameSource("prompt", "words").apply(s0)
    assert s1.cross.queries == ("words",)
    with pytest.raises(ValueError, match="already exists"):
        C.RenameSource("prompt", "cam").apply(s0)


@pytest.mark.parametrize("cmd, needle", [
    (C.RemoveSource("nope"), "no source named 'nope'"),
    (C.SetText("cam", "x"), "not a text source"),
    (C.set_model(d_model=10, nh=3), "not divisible"),
    (C.SetWeight("W_x", None), "unknown weight"),
    (C.SetKernel("cuda"), "unknown kernel"),
    (C.set_view(matrix="nope"), "shown matrix"),
    (C.set_view(bogus=1), "unknown view field"),
    (C.RecolourSource("prompt", "red"), "#rrggbb"),
])
def test_bad_edits_raise_clear_errors(cmd, needle):
    with pytest.raises(ValueError, match=needle):
        cmd.apply(base())


def test_toy_session_refuses_a_d_model_change_unless_embeddings_fit():
    s = build_demo("river-bank")
    with pytest.raises(ValueError, match="hand-set W_q must have shape"):
        C.set_model(d_model=8).apply(s)
    with pytest.raises(ValueError, match="4-dimensional embeddings but d_model is 8"):
        C.set_model(drop_handset=True, d_model=8).apply(s)
    s1, _ = C.set_model(drop_handset=True, seed=5).apply(s)
    assert not s1.model.handset and s1.model.seed == 5


def test_qk_component_set_and_clear():
    s0 = build_demo("river-bank")
    s1, inv = C.SetQKComponent("k", 0, 2, 1, 9.0).apply(s0)
    assert [o.value for o in s1.model.qk_overrides] == [9.0]
    s2, inv2 = C.SetQKComponent("k", 0, 2, 1, 3.0).apply(s1)
    assert [o.value for o in s2.model.qk_overrides] == [3.0]
    assert inv2.apply(s2)[0] == s1 and inv.apply(s1)[0] == s0
    with pytest.raises(ValueError, match="outside"):
        C.SetQKComponent("q", 3, 0, 0, 1.0).apply(s0)


def test_edit_mask_lifts_a_design_command_and_keeps_merge_key():
    class SetRule:
        label = "Set rule"

        def __init__(self, q, k, rule, key="stroke"):
            self.q, self.k, self.rule, self.merge_key = q, k, rule, key

        def apply(self, design):
            old = design.rule_for(self.q, self.k)
            return design.with_rule(self.q, self.k, self.rule), SetRule(self.q, self.k, old)

    s0 = base()
    a = C.EditMask(SetRule("prompt", "cam", Rule.deny()))
    b = C.EditMask(SetRule("cam", "prompt", Rule.deny()))
    assert a.merge_key == b.merge_key == ("mask", "stroke") and a.label == "Set rule"
    s1, inv_a = a.apply(s0)
    s2, inv_b = b.apply(s1)
    assert s2.mask.rule_for("prompt", "cam") == Rule.deny() and s2.mask.rule_for("cam", "prompt") == Rule.deny()
    assert inv_a.apply(inv_b.apply(s2)[0])[0] == s0
    assert C.SetText("prompt", "x").merge_key != a.merge_key


def test_set_weight_checks_shape():
    s = base()
    with pytest.raises(ValueError, match="hand-set W_q must have shape"):
        C.SetWeight("W_q", np.zeros((2, 2))).apply(s)
    s1, _ = C.SetWeight("W_q", FrozenArray(np.zeros((4, 64, 16)))).apply(s)
    assert s1.model.handset
